#!/usr/bin/env bash
# Server-side cost of taking a lock: SET NX PX vs LOCK.ACQUIRE vs Redisson's
# acquire script (tryLockInnerAsync) through EVALSHA; and with a fencing
# token: LOCK.ACQUIRE ... TOKEN vs Redisson RFencedLock's script; and the
# read-write lock: LOCK.RACQUIRE / LOCK.WACQUIRE vs Redisson's read and write
# lock scripts; and semaphores: acquire + release with LOCK.SEMACQUIRE /
# LOCK.SEMRELEASE and LOCK.PERMITACQUIRE ... LEASE / LOCK.PERMITRELEASE vs
# Redisson's RSemaphore and RPermitExpirableSemaphore scripts
# (scripts/bench-acquire-sem.py, same server, BENCH_N pairs, BENCH_REPEAT
# runs; it prints module / Redisson for both pairs, the issue's target 0.5x).
#
# Starts a fresh server with the module on a free loopback port (no
# persistence), drives each command with redis-benchmark (same N, key space
# and pipeline for all three), and reads usec_per_call from INFO commandstats:
# the time the server spent in the command, without network or client cost.
# Each measurement is repeated (interleaved) and the median is reported.
#
# Scenarios:
#   fresh keys  lock:__rand_int__ with -r $BENCH_KEYSPACE: mostly free locks (the
#               share that took a free key is shown; the rest re-enter / SET NX
#               fails): 63% at the default 100000, 95% at 1000000
#   hot key     one key, the same owner re-entering it (SET NX always fails)
#
# Environment: REDIS_SERVER (default redis-server), LOCK_MODULE_PATH (default
# target/release/libredis_lock.so), BENCH_N requests per run (default 100000),
# BENCH_REPEAT runs per command (default 3), BENCH_KEYSPACE the -r of the fresh
# keys scenario (default 100000).
# After each scenario's table it prints the ratios docs/performance.md's
# "Server-side cost of one acquire" and "Cost of a fenced acquire" quote (acquire / EVALSHA,
# acquire / SET, TOKEN / acquire, TOKEN / RFencedLock's script).
set -euo pipefail

cd "$(dirname "$0")/.."
server=${REDIS_SERVER:-redis-server}
module=$(realpath -m "${LOCK_MODULE_PATH:-target/release/libredis_lock.so}")
n=${BENCH_N:-100000}
repeat=${BENCH_REPEAT:-3}
keyspace=${BENCH_KEYSPACE:-100000}
bench_opts=(-P 16 -c 50 -n "$n")

[[ -f $module ]] || { echo "error: no module at $module (make build)" >&2; exit 1; }

tmp=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

server_cmd=("$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no
  --dir "$tmp" --logfile "$tmp/server.log" --loadmodule "$module")
"${server_cmd[@]}" &
server_pid=$!

for _ in $(seq 50); do
  cli PING >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if ! cli MODULE LIST 2>/dev/null | grep -qx lock; then
  echo "error: the module did not load into $server:" >&2
  cat "$tmp/server.log" >&2
  exit 1
fi

# Redisson's RedissonLock.tryLockInnerAsync (redisson/, the one copy): KEYS[1]
# lock, ARGV[1] lease ms, ARGV[2] owner.
script=$(<redisson/try-lock-hincrby.lua)
sha=$(cli SCRIPT LOAD "$script")
# Redisson RFencedLock's acquire with token: KEYS[2] is the token counter.
fenced=$(<redisson/fenced-acquire.lua)
fenced_sha=$(cli SCRIPT LOAD "$fenced")
# Redisson's RReadWriteLock: the read lock (KEYS[2] the owner's hold-key
# prefix) and the write lock (ARGV[2] the writer's field).
read_sha=$(cli SCRIPT LOAD "$(<redisson/rw-read-lock.lua)")
write_sha=$(cli SCRIPT LOAD "$(<redisson/rw-write-lock.lua)")

# label|commandstats name|keys one lock makes|command (KEY stands for the
# scenario's key, COUNTER for its token counter)
commands=(
  "SET NX PX|set|1|SET KEY v NX PX 30000"
  "LOCK.ACQUIRE|lock.acquire|1|LOCK.ACQUIRE KEY owner:1 30000"
  "EVALSHA (Redisson)|evalsha|1|EVALSHA $sha 1 KEY 30000 owner:1"
  "LOCK.ACQUIRE TOKEN|lock.acquire|2|LOCK.ACQUIRE KEY owner:1 30000 TOKEN"
  "EVALSHA (RFencedLock)|evalsha|2|EVALSHA $fenced_sha 2 KEY COUNTER 30000 owner:1"
  "LOCK.RACQUIRE|lock.racquire|2|LOCK.RACQUIRE KEY owner:1 30000"
  "EVALSHA (RReadLock)|evalsha|2|EVALSHA $read_sha 2 KEY HOLDS 30000 owner:1 owner:1:write"
  "LOCK.WACQUIRE|lock.wacquire|1|LOCK.WACQUIRE KEY owner:1 30000"
  "EVALSHA (RWriteLock)|evalsha|1|EVALSHA $write_sha 1 KEY 30000 owner:1:write"
)
# name|key|extra redis-benchmark options|note on acquire / SET
scenarios=(
  "fresh keys|lock:__rand_int__|-r $keyspace|"
  "hot key, same owner re-entering|lock:hot|| (SET NX writes nothing here)"
)

# One run: "usec_per_call requests_per_s keys_left"
run_once() { # stat, extra options, command words...
  local stat=$1 extra=$2; shift 2
  cli FLUSHALL >/dev/null
  cli CONFIG RESETSTAT >/dev/null
  local csv rps stats usec failed
  # shellcheck disable=SC2086 # $extra is a list of options
  csv=$(redis-benchmark -h 127.0.0.1 -p "$port" "${bench_opts[@]}" $extra --csv "$@")
  rps=$(tail -n 1 <<<"$csv" | cut -d, -f2 | tr -d '"')
  stats=$(cli INFO commandstats | tr -d '\r' | grep "^cmdstat_$stat:")
  usec=$(sed -n 's/.*usec_per_call=\([0-9.]*\).*/\1/p' <<<"$stats")
  failed=$(sed -n 's/.*failed_calls=\([0-9]*\).*/\1/p' <<<"$stats")
  if [[ -z $usec || ${failed:-0} -ne 0 ]]; then
    echo "error: bad run of '$*': $stats" >&2
    exit 1
  fi
  echo "$usec $rps $(cli DBSIZE)"
}

# Redisson's counter name for a lock key without braces.
counter_of() { echo "redisson_lock_token:{$1}"; }
# Redisson's read-hold key prefix of owner:1 on a lock key without braces.
holds_of() { echo "{$1}:owner:1:rwlock_timeout"; }

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "# bench-acquire: $("$server" --version)"
echo
server_line=$(printf '%q ' "${server_cmd[@]}")
echo "server:    ${server_line% }"
for scenario in "${scenarios[@]}"; do
  IFS='|' read -r _ key extra _ <<<"$scenario"
  for c in "${commands[@]}"; do
    IFS='|' read -r _ _ _ cmd <<<"$c"
    cmd=${cmd//KEY/$key}
    cmd=${cmd//HOLDS/$(holds_of "$key")}
    echo "benchmark: redis-benchmark -h 127.0.0.1 -p $port ${bench_opts[*]} ${extra:+$extra }--csv ${cmd//COUNTER/$(counter_of "$key")}"
  done
done
echo "between runs: FLUSHALL, CONFIG RESETSTAT; after each: INFO commandstats (usec_per_call), DBSIZE"
echo "each command $repeat times, interleaved; median reported"

for scenario in "${scenarios[@]}"; do
  IFS='|' read -r sname key extra set_note <<<"$scenario"
  declare -A usecs=() rpss=() keys=()
  for ((r = 1; r <= repeat; r++)); do
    for c in "${commands[@]}"; do
      IFS='|' read -r label stat per_lock cmd <<<"$c"
      cmd=${cmd//KEY/$key}
      cmd=${cmd//HOLDS/$(holds_of "$key")}
      read -r -a words <<<"${cmd//COUNTER/$(counter_of "$key")}"
      out=$(run_once "$stat" "$extra" "${words[@]}")
      read -r usec rps left <<<"$out"
      usecs[$label]+="$usec "
      rpss[$label]+="$rps "
      keys[$label]+="$((left / per_lock)) "
    done
  done

  # shellcheck disable=SC2086
  set_usec=$(median ${usecs["SET NX PX"]})
  echo
  echo "## $sname ($key, N=$n)"
  echo
  echo "| command | usec_per_call (median) | runs | vs SET NX PX | requests/s (median) | free-lock share |"
  echo "|---|---|---|---|---|---|"
  for c in "${commands[@]}"; do
    IFS='|' read -r label _ _ <<<"$c"
    # shellcheck disable=SC2086
    u=$(median ${usecs[$label]})
    # shellcheck disable=SC2086
    rps=$(median ${rpss[$label]})
    # shellcheck disable=SC2086
    share=$(awk -v k="$(median ${keys[$label]})" -v n="$n" 'BEGIN { printf "%.0f%%", 100 * k / n }')
    ratio=$(awk -v a="$u" -v b="$set_usec" 'BEGIN { printf "%.2fx", a / b }')
    echo "| $label | $u | ${usecs[$label]% } | $ratio | $rps | $share |"
    case $label in
      LOCK.ACQUIRE) acquire_usec=$u ;;
      "LOCK.ACQUIRE TOKEN") token_usec=$u ;;
      "EVALSHA (Redisson)") evalsha_usec=$u ;;
      "EVALSHA (RFencedLock)") fenced_usec=$u ;;
      LOCK.RACQUIRE) racquire_usec=$u ;;
      LOCK.WACQUIRE) wacquire_usec=$u ;;
      "EVALSHA (RReadLock)") rscript_usec=$u ;;
      "EVALSHA (RWriteLock)") wscript_usec=$u ;;
    esac
  done
  echo
  # The ratios as docs/performance.md names them.
  awk -v a="$acquire_usec" -v s="$set_usec" -v e="$evalsha_usec" -v t="$token_usec" \
    -v f="$fenced_usec" -v note="$set_note" -v ra="$racquire_usec" -v rs="$rscript_usec" \
    -v wa="$wacquire_usec" -v ws="$wscript_usec" '
    BEGIN {
      printf "acquire / EVALSHA: %.2fx\n", a / e
      printf "acquire / SET: %.2fx%s\n", a / s, note
      printf "TOKEN / acquire: %.2fx\n", t / a
      printf "TOKEN / RFencedLock script: %.2fx\n", t / f
      printf "read acquire / RReadLock script: %.2fx\n", ra / rs
      printf "write acquire / RWriteLock script: %.2fx\n", wa / ws
    }'
  # The same ratios per round, paired (each round's two commands ran within
  # seconds of each other, so the machine's load weighs on both alike):
  # the median and range of the per-round ratios.
  paired() { # name, label a, label b
    awk -v name="$1" -v a="${usecs[$2]}" -v b="${usecs[$3]}" 'BEGIN {
      n = split(a, x, " "); split(b, y, " ")
      for (i = 1; i <= n; i++) { # insertion sort (mawk has no asort)
        v = x[i] / y[i]
        for (j = i - 1; j >= 1 && r[j] > v; j--) r[j + 1] = r[j]
        r[j + 1] = v
      }
      printf "%s, per round, paired: median %.2fx, range %.2f-%.2f\n", name, r[int((n + 1) / 2)], r[1], r[n]
    }'
  }
  paired "acquire / EVALSHA" "LOCK.ACQUIRE" "EVALSHA (Redisson)"
  paired "acquire / SET" "LOCK.ACQUIRE" "SET NX PX"
  paired "TOKEN / RFencedLock script" "LOCK.ACQUIRE TOKEN" "EVALSHA (RFencedLock)"
  paired "read acquire / RReadLock script" "LOCK.RACQUIRE" "EVALSHA (RReadLock)"
  paired "write acquire / RWriteLock script" "LOCK.WACQUIRE" "EVALSHA (RWriteLock)"
  unset usecs rpss keys
done

# Semaphores and permits: acquire + release pairs, pipelined in batches, in
# the same server (scripts/bench-acquire-sem.py: plain python3).
cli FLUSHALL >/dev/null
python3 scripts/bench-acquire-sem.py "$port" "$n" "$repeat"
