#!/usr/bin/env bash
# Compares module builds on fresh keys, paired: one server per build, all
# running side by side, so the machine's load at any moment weighs on every
# build alike. bench-acquire.sh measures one build; this answers "is build B
# cheaper than build A?" on a shared machine where single figures move by
# +-30% between runs.
#
#   bash scripts/bench-builds.sh REPS name=path/to/lib.so [name=path.so ...]
#
# Each repetition, for each build in turn: FLUSHALL, CONFIG RESETSTAT, then
# redis-benchmark -P 16 -c 50 -n $BENCH_N -r $BENCH_KEYSPACE (default 100000
# requests over 1000000 keys: 95% take a free lock) of SET NX PX, LOCK.ACQUIRE
# and Redisson's acquire script (EVALSHA), each read back as usec_per_call
# from INFO commandstats (server-side time, without network or client). The
# report gives, per build, the medians and interquartile ranges of the
# per-repetition ratios LOCK.ACQUIRE / EVALSHA and LOCK.ACQUIRE / SET NX PX.
#
# Variants of the module are built by applying a patch to a copy of the tree,
# e.g. the experiments in scripts/experiments/ (see docs/performance.md).
# Environment: REDIS_SERVER (default redis-server), BENCH_N, BENCH_KEYSPACE.
set -euo pipefail

cd "$(dirname "$0")/.."
(($# >= 2)) || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
reps=$1
shift
server=${REDIS_SERVER:-redis-server}
n=${BENCH_N:-100000}
keyspace=${BENCH_KEYSPACE:-1000000}
bench_opts=(-P 16 -c 50 -n "$n" -r "$keyspace" -q)

# Redisson's RedissonLock.tryLockInnerAsync (redisson/, the one copy).
script=$(<redisson/try-lock-hincrby.lua)

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

names=()
ports=()
for build in "$@"; do
  name=${build%%=*}
  module=$(realpath -m "${build#*=}")
  [[ $name != "$build" && -f $module ]] || { echo "error: expected name=path/to/lib.so, got $build" >&2; exit 2; }
  port=$(free_port)
  mkdir "$tmp/$name"
  "$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$tmp/$name" \
    --logfile "$tmp/$name/server.log" --loadmodule "$module" &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" MODULE LIST | grep -qx lock || { echo "error: $module did not load" >&2; cat "$tmp/$name/server.log" >&2; exit 1; }
  names+=("$name")
  ports+=("$port")
done

usec_per_call() { # port command
  redis-cli -p "$1" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v c="cmdstat_$2" '$1 == c {print $7}'
}

echo "# bench-builds: $("$server" --version)"
echo "# $reps repetitions; each: redis-benchmark ${bench_opts[*]} of SET NX PX, LOCK.ACQUIRE, EVALSHA per build"
for ((rep = 1; rep <= reps; rep++)); do
  for i in "${!names[@]}"; do
    port=${ports[$i]}
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$script")
    line="${names[$i]}"
    for command in set lock.acquire evalsha; do
      redis-cli -p "$port" FLUSHALL >/dev/null
      redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
      case $command in
        set) redis-benchmark -p "$port" "${bench_opts[@]}" SET 'lock:__rand_int__' v NX PX 30000 ;;
        lock.acquire) redis-benchmark -p "$port" "${bench_opts[@]}" LOCK.ACQUIRE 'lock:__rand_int__' owner:1 30000 ;;
        evalsha) redis-benchmark -p "$port" "${bench_opts[@]}" EVALSHA "$sha" 1 'lock:__rand_int__' 30000 owner:1 ;;
      esac >/dev/null
      line+=" $(usec_per_call "$port" "$command")"
    done
    echo "$line"
  done
done >"$tmp/runs.txt"

python3 - "$tmp/runs.txt" "${names[@]}" <<'EOF'
import statistics, sys

runs = {}
for line in open(sys.argv[1]):
    name, set_us, acquire_us, eval_us = line.split()
    runs.setdefault(name, []).append((float(set_us), float(acquire_us), float(eval_us)))

def spread(values):
    q1, median, q3 = statistics.quantiles(values, n=4)
    return f"**{statistics.median(values):.3f}** ({q1:.3f}-{q3:.3f})"

print()
print("| build | SET NX PX | LOCK.ACQUIRE | EVALSHA | LOCK.ACQUIRE / EVALSHA | LOCK.ACQUIRE / SET NX PX |")
print("|---|---|---|---|---|---|")
for name in sys.argv[2:]:
    rows = runs[name]
    medians = [statistics.median(column) for column in zip(*rows)]
    print(f"| {name} | " + " | ".join(f"{m:.2f} µs" for m in medians)
          + f" | {spread([a / e for s, a, e in rows])} | {spread([a / s for s, a, e in rows])} |")
print()
print("usec_per_call medians; ratios: median (interquartile range) of the per-repetition ratios")
EOF
