#!/usr/bin/env bash
# What issue 27's listing, times and hot keys cost, in one run on one
# server (REDIS_SERVER, default redis-server), for docs/performance.md:
#
# 1. the acquire path before and after, in instructions:
#    scripts/callgrind-acquire.sh with BASELINE_MODULE (deterministic, so
#    the machine's load does not move it);
# 2. the same in server time per call, paired (both builds' servers side by
#    side, so load weighs on both alike): scripts/bench-builds.sh REPS
#    baseline=... this=...;
# 3. the listing: scripts/bench-listing.py (server time per LOCK.SCAN call
#    beside SCAN's, memory kept per object returned).
#
#   bash scripts/bench-ops.sh BASELINE.so [REPS]
#
# BASELINE.so: a build to compare with (e.g. the main branch's module);
# this build is LOCK_MODULE_PATH (default target/release/libredis_lock.so).
# REPS: bench-builds repetitions (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 1)) || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
baseline=$(realpath -m "$1")
reps=${2:-10}
module=$(realpath -m "${LOCK_MODULE_PATH:-target/release/libredis_lock.so}")
python=.cache/py-venv/bin/python
[[ -x $python ]] || python=python3
echo "# bench-ops: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
BASELINE_MODULE=$baseline LOCK_MODULE_PATH=$module bash scripts/callgrind-acquire.sh
echo
bash scripts/bench-builds.sh "$reps" "baseline=$baseline" "this=$module"
echo
LOCK_MODULE_PATH=$module "$python" scripts/bench-listing.py
