#!/usr/bin/env bash
# What loading the module costs commands that touch no lock object: the same
# commands on servers side by side, one without the module, one with it
# loaded and no lock ever waited for, and one with it loaded after a client
# of each kind waited once (a lock, a reader, a semaphore, a latch), which
# is where a server that cannot unsubscribe from keyspace events keeps
# paying (docs/operations.md, Known limits: Redis 7.x and Valkey).
#
# Each round, for each command, each server in turn (the order rotates
# every round): FLUSHALL, CONFIG RESETSTAT, redis-benchmark -P 16 -c 50
# -n $BENCH_TAX_N -r $BENCH_TAX_KEYSPACE, then usec_per_call from INFO
# commandstats (server time per call, without network or client). The
# table gives the medians, and the ratios to the server without the module
# as medians of the per-round ratios (each round's servers ran within the
# same few seconds, so the machine's load weighs on them alike) and as the
# ratio of each server's fastest run (load only ever adds time). On a
# shared machine these move by tens of percent; scripts/callgrind-acquire.sh
# counts the same thing in instructions, deterministically.
#
# Environment: REDIS_SERVER (default redis-server), LOCK_MODULE_PATH
# (default target/release/libredis_lock.so), BENCH_TAX_N (200000),
# BENCH_TAX_KEYSPACE (100000), BENCH_TAX_ROUNDS (5).
set -euo pipefail

cd "$(dirname "$0")/.."
server=${REDIS_SERVER:-redis-server}
module=$(realpath -m "${LOCK_MODULE_PATH:-target/release/libredis_lock.so}")
n=${BENCH_TAX_N:-200000}
keyspace=${BENCH_TAX_KEYSPACE:-100000}
rounds=${BENCH_TAX_ROUNDS:-5}
bench_opts=(-P 16 -c 50 -n "$n" -r "$keyspace")

[[ -f $module ]] || { echo "error: no module at $module (make build)" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# label|server options
servers=(
  "without the module|"
  "module loaded, nothing waited|--loadmodule $module"
  "module loaded, after waits|--loadmodule $module"
)
labels=()
ports=()
for entry in "${servers[@]}"; do
  IFS='|' read -r label opts <<<"$entry"
  port=$(free_port)
  dir="$tmp/${#ports[@]}"
  mkdir "$dir"
  # shellcheck disable=SC2086 # $opts is a list of options
  "$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/server.log" $opts &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" PING >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  labels+=("$label")
  ports+=("$port")
done

# The third server: one client of each kind waits (and times out) once.
waited=${ports[2]}
cli() { redis-cli -p "$waited" "$@" >/dev/null; }
cli LOCK.ACQUIRE tax:lock holder 60000
cli LOCK.ACQUIRE tax:lock waiter 60000 WAIT 10
cli LOCK.WACQUIRE tax:rw writer 60000
cli LOCK.RACQUIRE tax:rw reader 60000 WAIT 10
cli LOCK.SEMSET tax:sem 0
cli LOCK.SEMACQUIRE tax:sem 1 WAIT 10
cli LOCK.LATCHSET tax:latch 1
cli LOCK.AWAIT tax:latch 10
sleep 0.1 # a server that can unsubscribe does so on its next event-loop turn
heard=$(redis-cli -p "$waited" INFO lock | tr -d '\r' | sed -n 's/^lock_keyspace_events://p')

# label|commandstats name|command
commands=(
  "INCR|incr|INCR counter:__rand_int__"
  "SET|set|SET key:__rand_int__ value"
  "SET EX|set|SET key:__rand_int__ value EX 600"
  "HSET|hset|HSET hash:__rand_int__ field value"
  "ZADD|zadd|ZADD zset:__rand_int__ 1 member"
  "GET|get|GET key:__rand_int__"
)

run_once() { # port stat words...
  local port=$1 stat=$2
  shift 2
  redis-cli -p "$port" FLUSHALL >/dev/null
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  redis-benchmark -h 127.0.0.1 -p "$port" "${bench_opts[@]}" -q "$@" >/dev/null
  redis-cli -p "$port" INFO commandstats | tr -d '\r' |
    sed -n "s/^cmdstat_$stat:.*usec_per_call=\([0-9.]*\).*/\1/p"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
minimum() { printf '%s\n' "$@" | sort -g | head -n 1; }

echo "# bench-tax: $("$server" --version)"
echo
echo "servers:   $server --bind 127.0.0.1 --port <port> --save '' --appendonly no [--loadmodule $module]"
echo "           (3 at once: without the module; with it, nothing waited; with it, after a lock,"
echo "           a reader, a semaphore and a latch each had a waiter time out: keyspace events"
echo "           still heard there: ${heard:-none})"
echo "benchmark: redis-benchmark -h 127.0.0.1 -p <port> ${bench_opts[*]} -q <command>"
echo "between runs: FLUSHALL, CONFIG RESETSTAT; after each: INFO commandstats (usec_per_call)"
echo "$rounds rounds, each server in turn per command (order rotating); medians"

declare -A usecs=() ratios=()
for ((r = 0; r < rounds; r++)); do
  for c in "${commands[@]}"; do
    IFS='|' read -r label stat cmd <<<"$c"
    read -r -a words <<<"$cmd"
    declare -A round=()
    for ((k = 0; k < ${#ports[@]}; k++)); do
      s=$(((k + r) % ${#ports[@]}))
      u=$(run_once "${ports[$s]}" "$stat" "${words[@]}")
      [[ -n $u ]] || { echo "error: no commandstats for $cmd" >&2; exit 1; }
      round[$s]=$u
      usecs[$label,$s]+="$u "
    done
    for ((s = 1; s < ${#ports[@]}; s++)); do
      ratios[$label,$s]+="$(awk -v a="${round[$s]}" -v b="${round[0]}" 'BEGIN { printf "%.3f", a / b }') "
    done
    unset round
  done
done

echo
echo "| command | ${labels[0]} | ${labels[1]} | ratio | fastest runs | ${labels[2]} | ratio | fastest runs |"
echo "|---|---|---|---|---|---|---|---|"
for c in "${commands[@]}"; do
  IFS='|' read -r label _ _ <<<"$c"
  # shellcheck disable=SC2086
  row="| $label | $(median ${usecs[$label,0]}) µs"
  for ((s = 1; s < ${#ports[@]}; s++)); do
    # shellcheck disable=SC2086
    fastest=$(awk -v a="$(minimum ${usecs[$label,$s]})" -v b="$(minimum ${usecs[$label,0]})" 'BEGIN { printf "%.3f", a / b }')
    row+=" | $(median ${usecs[$label,$s]}) µs | **$(median ${ratios[$label,$s]})x** (${ratios[$label,$s]% }) | ${fastest}x"
  done
  echo "$row |"
done
echo
echo "ratio: usec_per_call over the server without the module, median of the per-round ratios (each round's in brackets);"
echo "fastest runs: each server's fastest run over the other's (the machine's load only ever adds time)"
