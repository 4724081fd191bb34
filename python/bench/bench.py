"""The Python client's benchmark (run by `make bench`).

1. Overhead: uncontended lock+unlock cycles per second, 1 and 8 threads
   (each on a lock of its own), raw ``LOCK.ACQUIRE`` + ``LOCK.RELEASE``
   through redis-py's ``execute_command`` against the package's two paths
   (``try_lock(name, 0, lease)`` + ``unlock()``, and ``lock(name)`` with the
   watchdog + ``unlock()``), interleaved against one server: each round
   gives every path ``seconds`` in ``slices`` turns, the paths taking
   turns in an order that rotates (so the paths compared in a round ran
   under the same load, none always first or last); each path's ratio to
   raw is taken within the same round, the median and the range over the
   rounds reported; so is the client process's CPU time per cycle (all
   its threads; the server is another process), which is what the package
   adds and moves far less with other load on the machine than the rate.
2. Contention: 8 and 32 threads on one lock, each looping acquire, a
   critical section of one round trip (INCR), release: this package's
   ``LockClient.lock``, redis-py's ``Lock`` (``blocking_timeout=10``) and
   python-redis-lock's ``Lock``: sections/s, p99 wait for the lock, and
   fairness (Jain's index over each thread's count of sections: 1.0 =
   every thread got the same share).

All threads live in one process (the GIL is shared by every contender
alike). Writes a Markdown table to .cache/bench/python-client.md.

    .cache/py-venv/bin/python python/bench/bench.py [--seconds 1] [--rounds 5] [--slices 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from harness import ROOT, SERVER, Server  # noqa: E402
from redis_lock_client import LockClient  # noqa: E402

Cycle = Callable[[int], Callable[[], None]]


def run_threads(n: int, seconds: float, make: Cycle) -> list[int]:
    """Runs ``make(i)()`` in a loop on n threads for ``seconds``; counts."""
    counts = [0] * n
    start = threading.Barrier(n + 1)
    stop = [False]

    def body(i: int) -> None:
        cycle = make(i)
        cycle()  # warm up (connections, CLIENT ID)
        start.wait()
        c = 0
        while not stop[0]:
            cycle()
            c += 1
        counts[i] = c

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(seconds)
    stop[0] = True
    for t in threads:
        t.join()
    return counts


def spread(ratios: list[float]) -> str:
    """A ratio's median over the rounds, and its range."""
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def overhead(server: Server, seconds: float, rounds: int, slices: int) -> list[str]:
    r = server.client(protocol=2, max_connections=64)
    locks = LockClient(r)

    def raw(i: int) -> Callable[[], None]:
        name, owner = f"bench:raw:{i}", f"raw-{i}"

        def cycle() -> None:
            r.execute_command("LOCK.ACQUIRE", name, owner, 30000)
            r.execute_command("LOCK.RELEASE", name, owner)

        return cycle

    def with_lease(i: int) -> Callable[[], None]:
        name = f"bench:lease:{i}"

        def cycle() -> None:
            g = locks.try_lock(name, 0, lease=30)
            assert g is not None
            g.unlock()

        return cycle

    def with_watchdog(i: int) -> Callable[[], None]:
        name = f"bench:dog:{i}"

        def cycle() -> None:
            locks.lock(name).unlock()

        return cycle

    paths = [
        ("raw `LOCK.ACQUIRE` + `LOCK.RELEASE` (`execute_command`)", raw),
        ("`try_lock(name, 0, lease=30)` + `unlock()`", with_lease),
        ("`lock(name)` (watchdog) + `unlock()`", with_watchdog),
    ]
    rows = [
        "| threads | path | lock+unlock/s (median) | vs raw, same round: median (range) "
        "| client CPU us/cycle (median) | raw CPU / path CPU, same round: median (range) |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for n in (1, 8):
        rates: dict[str, list[float]] = {p: [] for p, _ in paths}
        ratios: dict[str, list[float]] = {p: [] for p, _ in paths}
        cpus: dict[str, list[float]] = {p: [] for p, _ in paths}
        cpu_ratios: dict[str, list[float]] = {p: [] for p, _ in paths}
        for round_no in range(rounds):
            cycles = {label: 0 for label, _ in paths}
            used = {label: 0.0 for label, _ in paths}
            for slice_no in range(slices):
                turn = (round_no + slice_no) % len(paths)
                for label, make in paths[turn:] + paths[:turn]:
                    cpu = time.process_time()
                    cycles[label] += sum(run_threads(n, seconds / slices, make))
                    used[label] += time.process_time() - cpu
            this_round = {}
            this_cpu = {}
            for label, _ in paths:
                this_cpu[label] = used[label] / max(cycles[label], 1) * 1e6
                this_round[label] = cycles[label] / seconds
                rates[label].append(this_round[label])
                cpus[label].append(this_cpu[label])
            base = this_round[paths[0][0]]
            base_cpu = this_cpu[paths[0][0]]
            for label, _ in paths:
                ratios[label].append(this_round[label] / base)
                cpu_ratios[label].append(base_cpu / this_cpu[label])
        for label, _ in paths:
            rate = statistics.median(rates[label])
            cpu = statistics.median(cpus[label])
            rows.append(
                f"| {n} | {label} | {rate:.0f} | {spread(ratios[label])} | {cpu:.0f} "
                f"| {spread(cpu_ratios[label])} |"
            )
            print(rows[-1], flush=True)
    return rows


def contention(server: Server, seconds: float) -> list[str]:
    import redis_lock  # python-redis-lock

    def jain(counts: list[int]) -> float:
        total = sum(counts)
        squares = sum(c * c for c in counts)
        return total * total / (len(counts) * squares) if squares else 0.0

    def contender(kind: str, n: int) -> tuple[float, float, float, int]:
        r = server.client(protocol=2, max_connections=2 * n + 8, socket_timeout=None)
        r.delete("bench:lock", "bench:counter")
        locks = LockClient(r)
        waits: list[list[float]] = [[] for _ in range(n)]

        def make(i: int) -> Callable[[], None]:
            if kind == "redis-lock-client":

                def cycle() -> None:
                    t = time.perf_counter()
                    g = locks.lock("bench:lock")
                    waits[i].append(time.perf_counter() - t)
                    r.incr("bench:counter")
                    g.unlock()

            elif kind == "redis-py Lock":
                lock = r.lock("bench:lock", timeout=10, blocking_timeout=10)

                def cycle() -> None:
                    t = time.perf_counter()
                    while not lock.acquire():
                        pass
                    waits[i].append(time.perf_counter() - t)
                    r.incr("bench:counter")
                    lock.release()

            else:
                lock = redis_lock.Lock(r, "bench:lock", expire=10)

                def cycle() -> None:
                    t = time.perf_counter()
                    while not lock.acquire(blocking=True, timeout=10):
                        pass
                    waits[i].append(time.perf_counter() - t)
                    r.incr("bench:counter")
                    lock.release()

            return cycle

        counts = run_threads(n, seconds, make)
        all_waits = sorted(w for ws in waits for w in ws)
        p99 = all_waits[int(len(all_waits) * 0.99)] if all_waits else 0.0
        r.close()
        return sum(counts) / seconds, p99, jain(counts), sum(counts)

    rows = [
        "| threads | lock | sections/s | p99 wait (ms) | fairness (Jain) |",
        "|---:|---|---:|---:|---:|",
    ]
    for n in (8, 32):
        for kind in ("redis-lock-client", "redis-py Lock", "python-redis-lock"):
            rate, p99, fair, _ = contender(kind, n)
            rows.append(f"| {n} | {kind} | {rate:.0f} | {p99 * 1000:.1f} | {fair:.2f} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=1.0, help="per cell (default 1)")
    p.add_argument("--rounds", type=int, default=5, help="overhead rounds (default 5)")
    p.add_argument("--slices", type=int, default=5, help="turns per path and round (default 5)")
    p.add_argument("--out", default=str(ROOT / ".cache/bench/python-client.md"))
    p.add_argument("--overhead-only", action="store_true", help="skip the contention table")
    args = p.parse_args()
    server = Server()
    try:
        version = server.client().info("server").get("redis_version")
        print(f"python client bench on {SERVER} {version}", flush=True)
        print("overhead over raw commands (uncontended):", flush=True)
        over = overhead(server, args.seconds, args.rounds, args.slices)
        cont: list[str] = []
        if not args.overhead_only:
            print("contention on one lock:", flush=True)
            cont = contention(server, args.seconds * 3)
    finally:
        server.close()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"# Python client (redis-lock-client): overhead and contention\n\n"
        f"Server: {SERVER} {version}; redis-py {redis.__version__}; "
        f"{args.rounds} rounds of {args.seconds:g} s in {args.slices} slices (overhead), "
        f"{args.seconds * 3:g} s per cell (contention).\n\n"
        + "\n".join(over)
        + "\n\n"
        + "\n".join(cont)
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
