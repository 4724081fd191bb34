#!/usr/bin/env python3
"""Lock contention benchmark: the lock module against client-side Redis locks.

Starts its own redis-server (loopback, free port, no persistence, the module
loaded), then for each contender and each client count N runs N client
*processes* (one connection each, plus a pub/sub connection for `redisson`)
that, for a fixed time, take the lock `bench:lock`, run a read-modify-write
critical section on `bench:counter`, and release the lock.

The critical section is identical for every contender:

    INCR bench:inside ; GET bench:counter      (one pipelined round trip)
    SET bench:counter <value + 1> ; DECR bench:inside   (one round trip)

`INCR bench:inside` must return 1 and `DECR bench:inside` must return 0, else
an overlap violation is counted; after a cell, `bench:counter` must equal the
number of acquisitions, else updates were lost.

Contenders (their lock protocols are not altered; only the harness around them
is kept lean):

* `module`: `LOCK.ACQUIRE bench:lock <owner> 10000 WAIT 10000` (server-side
  FIFO wait; retried only when it times out) / `LOCK.RELEASE bench:lock <owner>`.
* `redisson`: Redisson RLock's protocol: the `tryLockInnerAsync` script via
  EVALSHA, `tryLock`'s wait loop on unlock messages from
  `redisson_lock__channel:{bench:lock}`, the `unlockInnerAsync` script.
* `redis-py`: `redis.Redis.lock(..., timeout=10, blocking_timeout=10)`
  (SET NX PX, polling every 0.1 s by default).
* `python-redis-lock`: `redis_lock.Lock(conn, ..., expire=10)`,
  `acquire(blocking=True, timeout=10)` (SET NX EX, BLPOP on a signal list).

The code: contenders.py (the workload and each contender's protocol, the
client process), harness.py (the server, one cell, noise), report.py (tables,
plot, markdown); this file parses the options and runs the rounds.

Run `python bench/lock_bench.py --help` for the options.
"""

import argparse
import multiprocessing
import os
import sys

from contenders import CONTENDERS
from harness import NOISY_RERUNS, Server, combine, quiet, run_cell, wait_for_quiet
from report import machine, noise, problems, ratios, table, target_check, write_doc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def shown(path):
    """A path as the user should see it: relative to the current directory
    when it is below it."""
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help="comma-separated, from: %s (default: all)" % ", ".join(CONTENDERS))
    p.add_argument("--clients", default="1,8,32", help="comma-separated client counts (default 1,8,32)")
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each cell (default 5)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of every cell, in rounds; the row shown is the run with the median "
                        "sections/s among the runs not disturbed by other processes, with their "
                        "range in brackets (default 3)")
    p.add_argument("--server", default="/usr/bin/redis-server", help="redis-server binary")
    p.add_argument("--module", default=os.path.join(REPO, "target", "release", "libredis_lock.so"),
                   help="the lock module .so (default: target/release/libredis_lock.so)")
    p.add_argument("--pin", choices=("split", "none"), default="split",
                   help="split (default): redis-server pinned to the first CPU, the clients to the "
                        "others; none: leave placement to the scheduler")
    p.add_argument("--out", default=os.path.join(REPO, ".cache", "bench", "benchmarks.md"),
                   help="markdown report to write; the plot goes beside it as .png "
                        "(default .cache/bench/benchmarks.md, untracked; '-' to write none)")
    args = p.parse_args(argv)
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = [c for c in args.contenders if c not in CONTENDERS]
    if unknown or not args.contenders:
        p.error("unknown contender(s) %s; choose from %s" % (unknown, ", ".join(CONTENDERS)))
    try:
        args.clients = [int(n) for n in args.clients.split(",") if n.strip()]
    except ValueError:
        p.error("--clients takes comma-separated integers")
    if not args.clients or min(args.clients) < 1:
        p.error("--clients must be positive")
    if args.seconds <= 0:
        p.error("--seconds must be positive")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    module = os.path.abspath(args.module) if args.module else ""
    if not os.path.exists(module):
        if "module" in args.contenders:
            raise SystemExit("module %s not found: build it with `cargo build --release`, or pass "
                             "--module, or leave `module` out of --contenders" % args.module)
        print("note: %s not found; starting redis-server without it" % args.module, file=sys.stderr)
        module = ""
    ctx = multiprocessing.get_context("fork")
    nproc = len(os.sched_getaffinity(0))
    server_cpus = None
    if args.pin == "split":
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            # The server gets the first CPU to itself; this process and the
            # clients (forked from it) share the others.
            server_cpus = {cpus[0]}
            os.sched_setaffinity(0, set(cpus[1:]))
        else:
            print("note: one CPU only: --pin split ignored", file=sys.stderr)
    server = Server(args.server, module, server_cpus)
    admin = server.start()
    runs = {}

    def run(round_name, contender, n):
        print("%s: %s with %d client(s) for %g s ..." % (round_name, contender, n, args.seconds),
              file=sys.stderr, flush=True)
        cell = run_cell(ctx, admin, server.port, contender, n, args.seconds)
        runs.setdefault((contender, n), []).append(cell)
        print("  %.0f sections/s, p99 wait %.3f ms, Jain %.4f, lost %d, overlaps %d, "
              "other processes' CPU %.0f%%%s" % (
                  cell["rate"], cell["p99"], cell["jain"], cell["lost"], cell["overlaps"],
                  100 * cell["foreign_cpu"],
                  ("; errors: %s" % "; ".join(cell["errors"])) if cell["errors"] else ""),
              file=sys.stderr, flush=True)

    try:
        facts = machine(admin, module, nproc, args.pin)
        # Rounds: every cell once per round, so that a burst of noise on the
        # machine spreads over the contenders instead of hitting one cell's
        # every repeat.
        for round_no in range(args.repeat):
            for contender in args.contenders:
                for n in args.clients:
                    run("round %d/%d" % (round_no + 1, args.repeat), contender, n)
        for extra in range(NOISY_RERUNS):
            for (contender, n), cells in list(runs.items()):
                if not any(quiet(c) for c in cells):
                    wait_for_quiet()
                    run("re-run %d (no quiet run yet)" % (extra + 1), contender, n)
    finally:
        server.cleanup()
    cells = [combine(cells) for cells in runs.values()]
    notes = problems(cells)
    print(table(cells))
    print()
    print(ratios(cells))
    print()
    print(target_check(cells))
    print()
    print(noise(cells))
    if notes:
        print()
        print("Problems:")
        for note in notes:
            print("- " + note)
    if args.out != "-":
        png = write_doc(args.out, cells, args, facts, notes)
        print("\nreport: %s\nplot:   %s" % (shown(args.out), shown(png)), file=sys.stderr)
    bad = any(c["lost"] or c["overlaps"] or c["errors"] or c["empty_runs"] for c in cells)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
