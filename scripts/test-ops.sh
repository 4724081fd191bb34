#!/usr/bin/env bash
# make test-ops: the operations checks, on real servers started here (on
# free loopback ports, stopped at the end). Arguments: the Makefile's
# MATRIX entries, "label=server binary".
#
# 1. The release archive (make dist, this machine's target): its SHA-256
#    files verify; unpacked, the module loads into a clean server of every
#    matrix version (MODULE LIST: "lock" with the version's number), logs
#    its version line, and takes and releases a lock.
# 2. A server older than the oldest supported refuses it: Redis 6.2.14
#    (scripts/fetch-old-server.sh builds it) exits at start with the
#    module's line naming the minimum, and without a crash report.
# 3. The real redis_exporter (contrib/redis_exporter/pin pins it; built
#    with go), run as docs/operations.md says (--script lock-info.lua from
#    the archive, --include-modules-metrics), scrapes each matrix server
#    after some locking: every numeric INFO lock field is a metric with
#    INFO's value, and redis_module_info names the module and its version.
#
# Ends with "test-ops: N passed, M failed"; exits 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# Go's own installer puts it here, which a fresh shell's PATH may lack.
export PATH=$PATH:/usr/local/go/bin

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml)
IFS=. read -r major minor patch <<<"$version"
number=$((major * 10000 + minor * 100 + patch))
host=$(rustc -vV | sed -n 's/^host: //p')
name=redis-lock-v$version-$host
archive=target/dist/$name.tar.gz

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok      $*"; }
fail() { failed=$((failed + 1)); echo "FAILED  $*"; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server BINARY DIR PORT [ARGS...]: starts it in the background and
# waits until it answers PING (0) or has exited (1).
start_server() {
  local bin=$1 dir=$2 port=$3
  shift 3
  mkdir -p "$dir"
  "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --logfile "$dir/server.log" \
    --save '' --appendonly no --daemonize no "$@" >/dev/null 2>&1 &
  local pid=$!
  pids+=("$pid")
  echo "$pid" >"$dir/pid"
  for _ in $(seq 100); do
    redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

stop_server() {
  local dir=$1
  kill "$(cat "$dir/pid")" 2>/dev/null
  wait "$(cat "$dir/pid")" 2>/dev/null
}

# ---- 1. the archive: checksums, then unpacked ----------------------------
if [[ ! -f $archive ]]; then
  fail "make dist made no $archive"
  echo "test-ops: $passed passed, $failed failed"
  exit 1
fi
if (cd target/dist && sha256sum --check --quiet "$name.tar.gz.sha256"); then
  pass "archive: $name.tar.gz matches its .sha256"
else
  fail "archive: $name.tar.gz does not match its .sha256"
fi
unpacked=$tmp/unpacked
mkdir -p "$unpacked"
tar -xzf "$archive" -C "$unpacked"
dist=$unpacked/$name
members=$(cd "$dist" && ls | tr '\n' ' ')
if [[ $members == "LICENSE README.md SHA256SUMS libredis_lock.so lock-info.lua redis.conf.example " ]] &&
  (cd "$dist" && sha256sum --check --quiet SHA256SUMS); then
  pass "archive: members ($members) match SHA256SUMS"
else
  fail "archive: members are '$members', or SHA256SUMS does not verify"
fi
module=$dist/libredis_lock.so

# ---- each server of the matrix -------------------------------------------
for entry in "$@"; do
  label=${entry%%=*}
  bin=${entry#*=}
  dir=$tmp/$label
  port=$(free_port)
  if ! start_server "$bin" "$dir" "$port" --loadmodule "$module"; then
    fail "$label: the unpacked module did not load: $(tail -3 "$dir/server.log")"
    continue
  fi
  cli() { redis-cli -p "$port" "$@"; }

  list=$(cli MODULE LIST | tr '\n' ' ')
  line=$(grep -o "lock module: version $version (commit [^)]*) loaded on .*" "$dir/server.log")
  if [[ $list == *"name lock ver $number "* && -n $line ]]; then
    pass "$label: loaded from the archive: MODULE LIST ver $number; log: $line"
  else
    fail "$label: MODULE LIST '$list', version line '$line'"
  fi

  # Some locking: a grant, a contended acquire, a wait that times out, a release.
  cli LOCK.ACQUIRE ops:k a 30000 >/dev/null
  cli LOCK.ACQUIRE ops:k b 30000 >/dev/null
  cli LOCK.ACQUIRE ops:k b 30000 WAIT 50 >/dev/null
  released=$(cli LOCK.RELEASE ops:k a)
  if [[ $released == 1 ]]; then
    pass "$label: the module from the archive takes and releases a lock"
  else
    fail "$label: LOCK.RELEASE answered '$released'"
  fi

  # ---- 3. redis_exporter scrapes it --------------------------------------
  if [[ -z ${exporter:-} ]]; then
    exporter=$root/.cache/exporter/redis_exporter
    if ! command -v go >/dev/null; then
      fail "redis_exporter: go is not installed (it builds the exporter)"
      exporter=none
    elif ! (cd contrib/redis_exporter/pin && go build -o "$exporter" github.com/oliver006/redis_exporter); then
      fail "redis_exporter: go build failed"
      exporter=none
    fi
  fi
  if [[ $exporter != none ]]; then
    eport=$(free_port)
    "$exporter" --redis.addr "redis://127.0.0.1:$port" --web.listen-address "127.0.0.1:$eport" \
      --script "$dist/lock-info.lua" --include-modules-metrics >"$dir/exporter.log" 2>&1 &
    epid=$!
    pids+=("$epid")
    metrics=
    for _ in $(seq 100); do
      metrics=$(curl -sf "http://127.0.0.1:$eport/metrics") && break
      sleep 0.1
    done
    kill "$epid" 2>/dev/null
    wait "$epid" 2>/dev/null
    echo "$metrics" >"$dir/metrics.txt"
    cli INFO lock >"$dir/info.txt"
    if verdict=$(python3 - "$dir/metrics.txt" "$dir/info.txt" "$number" <<'EOF'
import re, sys
metrics, info, number = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
scraped = {}
for m in re.finditer(r'^redis_script_values\{[^}]*key="([^"]+)"[^}]*\} (\S+)$', metrics, re.M):
    scraped[m.group(1)] = float(m.group(2))
fields = {}
for line in info.splitlines():
    name, _, value = line.strip().partition(":")
    try:
        fields[name] = float(value)
    except ValueError:
        pass
problems = [f"{k}: INFO {v}, scraped {scraped.get(k)}" for k, v in fields.items() if scraped.get(k) != v]
for k in ("lock_acquired", "lock_contended", "lock_released", "lock_waits_timed_out"):
    if fields.get(k, 0) < 1:
        problems.append(f"{k} is {fields.get(k)} after the locking")
if not re.search(r'^redis_script_result\{[^}]*\} 1$', metrics, re.M):
    problems.append("redis_script_result is not 1")
if not re.search(r'^redis_module_info\{[^}]*name="lock"[^}]*ver="%s"[^}]*\} 1$' % number, metrics, re.M):
    problems.append("no redis_module_info for lock")
if problems or not fields:
    print("; ".join(problems) or "INFO lock had no numeric field")
    sys.exit(1)
print(f"{len(fields)} INFO lock fields as redis_script_values, redis_module_info ver={number}")
EOF
    ); then
      pass "$label: redis_exporter: $verdict"
    else
      fail "$label: redis_exporter: $verdict (scrape in $dir/metrics.txt)"
    fi
  fi
  stop_server "$dir"
done

# ---- 2. a server too old is refused ---------------------------------------
if old=$(bash scripts/fetch-old-server.sh); then
  dir=$tmp/old
  port=$(free_port)
  if start_server "$old" "$dir" "$port" --loadmodule "$module"; then
    fail "Redis 6.2.14 started with the module loaded"
    stop_server "$dir"
  else
    wait "$(cat "$dir/pid")" 2>/dev/null
    refusal=$(grep -o "lock module: not loaded: .*" "$dir/server.log")
    if [[ $refusal == *"Redis 6.2.14 is older than Redis 7.0, the oldest server this module supports"* ]] &&
      ! grep -q "BUG REPORT" "$dir/server.log"; then
      pass "Redis 6.2.14 refuses the module and exits: $refusal"
    else
      fail "Redis 6.2.14: no refusal line, or a crash: $(tail -5 "$dir/server.log")"
    fi
  fi
else
  fail "could not build Redis 6.2.14 (scripts/fetch-old-server.sh)"
fi

echo
echo "test-ops: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
