#!/usr/bin/env bash
# Where LOCK.ACQUIRE's server-side cost goes, in instructions (deterministic,
# unlike wall-clock usec_per_call on a shared machine).
#
# Runs redis-server under callgrind collecting only inside Redis's call(),
# sends N commands on fresh keys (every call takes a free lock / sets a new
# key), and prints instructions per call for SET NX PX, LOCK.ACQUIRE and
# Redisson's acquire script (EVALSHA of tryLockInnerAsync), LOCK.ACQUIRE
# ... TOKEN (a fencing token: the counter key written too) and Redisson
# RFencedLock's script (fresh keys and one key re-entered), plus
# the share of LOCK.ACQUIRE spent in RedisModule_Replicate (RM_Replicate;
# VM_Replicate in Valkey), which propagates the
# HSET + PEXPIREAT effects to replicas and the AOF; then what loading the
# module costs INCR, SET and HSET on other keys (without the module, with it
# and nothing waited, with it after one waiter of each kind).
#
# With BASELINE_MODULE=<another build's .so>, it prints only a comparison
# of the two builds instead: LOCK.ACQUIRE on fresh keys and re-entering one
# key, LOCK.ACQUIRE ... TOKEN, and a cycle of LOCK.ACQUIRE + LOCK.RELEASE
# (one pipeline of both, so every acquire takes a free lock and every
# release frees it), per build, side by side.
#
# Environment: REDIS_SERVER (default redis-server), LOCK_MODULE_PATH,
# BASELINE_MODULE, N (20000).
set -euo pipefail
cd "$(dirname "$0")/.."
server=${REDIS_SERVER:-redis-server}
module=$(realpath -m "${LOCK_MODULE_PATH:-target/release/libredis_lock.so}")
n=${N:-20000}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[[ -f $module ]] || { echo "error: no module at $module (make build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# profile <label> <command...>: prints "<instructions per call> <RM_Replicate instructions per call>"
# With load=none the server runs without the module; with setup=waits, one
# client of each kind waits for a lock object (and times out) first.
profile() {
  local label=$1; shift
  local port; port=$(free_port)
  local calls=$n
  local load=(--loadmodule "${profile_module:-$module}")
  [[ ${load_module:-yes} == no ]] && load=()
  valgrind --tool=callgrind --toggle-collect=call --callgrind-out-file="$tmp/$label.out" \
    "$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$tmp" \
    "${load[@]}" >"$tmp/$label.log" 2>&1 &
  local pid=$!
  for _ in $(seq 150); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  if [[ ${setup:-} == waits ]]; then # counted too, but 8 calls among $n
    local cli=(redis-cli -p "$port")
    "${cli[@]}" LOCK.ACQUIRE tax:lock holder 60000 >/dev/null
    "${cli[@]}" LOCK.ACQUIRE tax:lock waiter 60000 WAIT 10 >/dev/null
    "${cli[@]}" LOCK.WACQUIRE tax:rw writer 60000 >/dev/null
    "${cli[@]}" LOCK.RACQUIRE tax:rw reader 60000 WAIT 10 >/dev/null
    "${cli[@]}" LOCK.SEMSET tax:sem 0 >/dev/null
    "${cli[@]}" LOCK.SEMACQUIRE tax:sem 1 WAIT 10 >/dev/null
    "${cli[@]}" LOCK.LATCHSET tax:latch 1 >/dev/null
    "${cli[@]}" LOCK.AWAIT tax:latch 10 >/dev/null
    sleep 0.5
  fi
  if [[ $1 == EVALSHA ]]; then # the script is loaded outside call()'s count
    local sha; sha=$(redis-cli -p "$port" SCRIPT LOAD "${eval_script:-$script}")
    set -- EVALSHA "$sha" "${@:2}"
  fi
  if [[ $1 == CYCLE ]]; then # 2n commands from a file, n pairs
    redis-cli -p "$port" --pipe <"$cycle_file" >/dev/null
    calls=$((2 * n))
  else
    redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -c 1 -n "$n" -r 100000000 -q "$@" >/dev/null
  fi
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  local total replicate
  total=$(callgrind_annotate --inclusive=yes "$tmp/$label.out" | awk '/PROGRAM TOTALS/ && !done {gsub(",","",$1); print $1; done=1}')
  replicate=$(callgrind_annotate --inclusive=yes "$tmp/$label.out" | awk '/:(RM|VM)_Replicate / && !done {gsub(",","",$1); print $1; done=1}')
  echo "$((total / calls)) $(( ${replicate:-0} / calls ))"
}

# Redisson's RedissonLock.tryLockInnerAsync (redisson/, the one copy).
script=$(<redisson/try-lock-hincrby.lua)

if [[ -n ${BASELINE_MODULE:-} ]]; then
  baseline=$(realpath -m "$BASELINE_MODULE")
  [[ -f $baseline ]] || { echo "error: no module at $baseline" >&2; exit 1; }
  echo "# callgrind-acquire: $("$server" --version)"
  echo "each: redis-benchmark -P 16 -c 1 -n $n -r 100000000, instructions inside call() per command"
  echo "baseline: $baseline"
  echo "this:     $module"
  echo
  echo "| command | baseline | this build | change |"
  echo "|---|---|---|---|"
  # A pipeline of acquire then release of one key, repeated: both halves
  # counted, so per pair = 2 x per call.
  cycle=$tmp/cycle.txt
  for _ in $(seq "$n"); do
    printf 'LOCK.ACQUIRE lock:cycle owner:1 30000\nLOCK.RELEASE lock:cycle owner:1\n'
  done >"$cycle"
  for case in "fresh|LOCK.ACQUIRE lock:__rand_int__ owner:1 30000" \
    "hot|LOCK.ACQUIRE lock:hot owner:1 30000" \
    "token|LOCK.ACQUIRE lock:__rand_int__ owner:1 30000 TOKEN" \
    "cycle|"; do
    label=${case%%|*}
    read -r -a words <<<"${case#*|}"
    figures=()
    for build in "$baseline" "$module"; do
      if [[ $label == cycle ]]; then
        read -r per _ < <(profile_module=$build cycle_file=$cycle profile "$label" CYCLE)
      else
        read -r per _ < <(profile_module=$build profile "$label" "${words[@]}")
      fi
      figures+=("$per")
    done
    what="\`${case#*|}\`"
    [[ $label == cycle ]] && what="\`LOCK.ACQUIRE\` + \`LOCK.RELEASE\` of one key, per command"
    echo "| $what | ${figures[0]} | ${figures[1]} | $(awk -v a="${figures[1]}" -v b="${figures[0]}" 'BEGIN {printf "%+.1f%%", 100*(a-b)/b}') |"
  done
  exit 0
fi

echo "# callgrind-acquire: $("$server" --version)"
echo "each: redis-benchmark -P 16 -c 1 -n $n -r 100000000 (fresh keys), instructions inside call()"
read -r set_total _ < <(profile set SET 'lock:__rand_int__' v NX PX 30000)
read -r acq_total acq_repl < <(profile acquire LOCK.ACQUIRE 'lock:__rand_int__' owner:1 30000)
read -r eval_total _ < <(profile evalsha EVALSHA 1 'lock:__rand_int__' 30000 owner:1)
read -r tok_total _ < <(profile token LOCK.ACQUIRE 'lock:__rand_int__' owner:1 30000 TOKEN)
read -r tok_hot _ < <(profile token_hot LOCK.ACQUIRE 'lock:hot' owner:1 30000 TOKEN)
read -r acq_hot _ < <(profile acquire_hot LOCK.ACQUIRE 'lock:hot' owner:1 30000)
# Redisson RFencedLock's acquire with token (KEYS[2] its counter).
fenced=$(<redisson/fenced-acquire.lua)
read -r fenced_total _ < <(eval_script=$fenced profile fenced EVALSHA 2 'lock:__rand_int__' \
  'redisson_lock_token:{lock:__rand_int__}' 30000 owner:1)
read -r fenced_hot _ < <(eval_script=$fenced profile fenced_hot EVALSHA 2 'lock:hot' \
  'redisson_lock_token:{lock:hot}' 30000 owner:1)
echo
echo "| command | instructions per call | vs SET NX PX |"
echo "|---|---|---|"
echo "| SET NX PX | $set_total | 1.00x |"
echo "| LOCK.ACQUIRE | $acq_total | $(awk -v a="$acq_total" -v b="$set_total" 'BEGIN {printf "%.2fx", a/b}') |"
echo "| LOCK.ACQUIRE without its RM_Replicate calls | $((acq_total - acq_repl)) | $(awk -v a="$((acq_total - acq_repl))" -v b="$set_total" 'BEGIN {printf "%.2fx", a/b}') |"
echo "| EVALSHA (Redisson's script) | $eval_total | $(awk -v a="$eval_total" -v b="$set_total" 'BEGIN {printf "%.2fx", a/b}') |"
echo "| LOCK.ACQUIRE ... TOKEN | $tok_total | $(awk -v a="$tok_total" -v b="$set_total" 'BEGIN {printf "%.2fx", a/b}') |"
echo "| EVALSHA (RFencedLock's script) | $fenced_total | $(awk -v a="$fenced_total" -v b="$set_total" 'BEGIN {printf "%.2fx", a/b}') |"
echo
echo "LOCK.ACQUIRE / EVALSHA = $(awk -v a="$acq_total" -v b="$eval_total" 'BEGIN {printf "%.3f", a/b}') (instructions)"
echo "TOKEN / RFencedLock's script = $(awk -v a="$tok_total" -v b="$fenced_total" 'BEGIN {printf "%.3f", a/b}') on fresh keys, $(awk -v a="$tok_hot" -v b="$fenced_hot" 'BEGIN {printf "%.3f", a/b}') re-entering one key (instructions)"
echo "TOKEN / LOCK.ACQUIRE = $(awk -v a="$tok_total" -v b="$acq_total" 'BEGIN {printf "%.3f", a/b}') on fresh keys, $(awk -v a="$tok_hot" -v b="$acq_hot" 'BEGIN {printf "%.3f", a/b}') re-entering one key ($tok_hot vs $acq_hot instructions)"
echo
echo "RM_Replicate (2 calls: HSET, PEXPIREAT): $acq_repl instructions per LOCK.ACQUIRE ($(awk -v a="$acq_repl" -v b="$acq_total" 'BEGIN {printf "%.0f%%", 100*a/b}'))"

# What loading the module costs commands on other keys (docs/performance.md:
# "No tax on the rest of the server"): without the module, with it and
# nothing waited, with it after one waiter of each kind (a server that
# cannot unsubscribe from keyspace events keeps hearing them).
echo
echo "| command on other keys | without the module | module, nothing waited | module, after waits |"
echo "|---|---|---|---|"
for cmd in "INCR counter:__rand_int__" "SET key:__rand_int__ value" "SET key:__rand_int__ value EX 600" \
  "HSET hash:__rand_int__ field value"; do
  read -r -a words <<<"$cmd"
  read -r bare _ < <(load_module=no profile bare "${words[@]}")
  read -r idle _ < <(profile idle "${words[@]}")
  read -r waited _ < <(setup=waits profile waited "${words[@]}")
  echo "| \`$cmd\` | $bare | $idle ($(awk -v a="$idle" -v b="$bare" 'BEGIN {printf "%.3fx", a/b}')) | $waited ($(awk -v a="$waited" -v b="$bare" 'BEGIN {printf "%.3fx", a/b}')) |"
done
