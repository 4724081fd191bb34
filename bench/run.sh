#!/usr/bin/env bash
# Runs the lock contention benchmark in its own virtualenv (.cache/bench-venv),
# creating it and installing bench/requirements.txt when needed, then the
# read-write lock's mixed-load benchmark (bench/rw_bench.py), the semaphore
# benchmark (bench/sem_bench.py), the latch's (bench/latch_bench.py), the
# fairness to sliced waits (bench/fair_bench.py) and the client
# library's overhead benchmark (client/examples/overhead.rs). Arguments
# go to bench/lock_bench.py, e.g.:
#   bench/run.sh --contenders redisson,redis-py --clients 8 --seconds 3
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.cache/bench-venv
req=bench/requirements.txt
stamp=$venv/.requirements.txt

if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -m venv "$venv" 2>/dev/null; then
        # Debian's python3 ships venv/ensurepip in a separate package.
        rm -rf "$venv"
        sudo=; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo=sudo
        $sudo apt-get update -qq
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
        python3 -m venv "$venv"
    fi
fi
if ! cmp -s "$req" "$stamp"; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$stamp"
fi

# The module under test: build it when it is missing, the default path is used
# and the module contender is selected (it is by default).
contenders=module custom_module=
prev=
for arg in "$@"; do
    case "$arg" in
        --contenders=*) contenders=${arg#*=} ;;
        --module|--module=*) custom_module=1 ;;
    esac
    [ "$prev" = --contenders ] && contenders=$arg
    prev=$arg
done
case ",$contenders," in
    *,module,*)
        if [ -z "$custom_module" ] && [ ! -f target/release/libredis_lock.so ]; then
            cargo build --release
        fi ;;
esac

"$venv/bin/python" bench/lock_bench.py "$@"

# The read-write lock under a mixed load, the module against Redisson's
# RReadWriteLock protocol in one run (bench/rw_bench.py; RW_BENCH_ARGS passes
# options, e.g. "--readers 16 --writers 2 --seconds 10").
mkdir -p .cache/bench
# shellcheck disable=SC2086
"$venv/bin/python" bench/rw_bench.py ${RW_BENCH_ARGS:-} | tee .cache/bench/rwlock.md

# Semaphores: 32 clients on 4 permits and a dead permit holder, the module
# against Redisson's RSemaphore / RPermitExpirableSemaphore protocols
# (bench/sem_bench.py; SEM_BENCH_ARGS passes options, e.g. "--seconds 5").
# shellcheck disable=SC2086
"$venv/bin/python" bench/sem_bench.py ${SEM_BENCH_ARGS:-} | tee .cache/bench/semaphore.md

# The count-down latch: 32 waiters let go by one count-down, and a latch
# expiring under a waiter, the module against Redisson's RCountDownLatch
# protocol (bench/latch_bench.py; LATCH_BENCH_ARGS passes options).
# shellcheck disable=SC2086
"$venv/bin/python" bench/latch_bench.py ${LATCH_BENCH_ARGS:-} | tee .cache/bench/latch.md

# Fairness to waiters that slice their wait (docs/waiting.md): 8 clients
# waiting in 200 ms pieces against 8 with single long waits on one lock, with
# kept places (pieces overlapping, and not) and with KEEP 0, in one run
# (bench/fair_bench.py; FAIR_BENCH_ARGS passes options, e.g. "--seconds 5").
# shellcheck disable=SC2086
"$venv/bin/python" bench/fair_bench.py ${FAIR_BENCH_ARGS:-} | tee .cache/bench/fairness.md

# The Rust client library's overhead over raw LOCK.* commands, measured side
# by side in one run against a server of its own (client/examples/overhead.rs).
# CLIENT_BENCH_ARGS passes options to it, e.g. "--rounds 9 --seconds 2".
cargo build --quiet --release -p redis-lock-client --example overhead
mkdir -p .cache/bench
# shellcheck disable=SC2086
target/release/examples/overhead --server "${REDIS_SERVER:-redis-server}" \
    --module target/release/libredis_lock.so --out .cache/bench/client-overhead.md \
    ${CLIENT_BENCH_ARGS:-}
