"""Fairness of a lock to waiters that slice their wait (docs/waiting.md):
8 slicing clients, each waiting in 200 ms pieces, against 8 clients that
arrive continuously with single long waits, on one lock, one server, side
by side in one run:

  kept, overlap  the documented protocol with kept places (the default): a
                 piece of LOCK.ACQUIRE ... WAIT 200; at 3/4 of a piece the
                 next goes out on a second connection and takes the
                 first's place (what the Rust client does)
  kept, no overlap  kept places, each piece sent once the previous one
                 timed out (a client that only asks again after a piece)
  KEEP 0         each piece sent once the previous one timed out, with
                 KEEP 0: every piece queues at the back (the behaviour
                 before kept places)

Every client loops: arrive, wait until granted, hold the lock 25 ms,
release: 16 clients then wait about 375 ms, two pieces or so.
Grants are numbered inside the critical section, so their order is exact.
Reported per mode: grants; overtakes (a slicing client's acquisition
granted after an acquisition that began after the slicing client's first
piece was written, more than 1 ms later: a later arrival served first) and
how many slicing acquisitions were overtaken at least once; Jain's fairness
index over the 16 clients' grant counts (1.0: all equal); the slicing and
the long-waiting clients' mean and p99 waits; the module's counters of
places taken back and pieces continued. Then the memory of 10,000 kept
places (the default cap, lock.keep-places-max).

Usage (make bench runs it through bench/run.sh):
    python bench/fair_bench.py [--seconds 15] [--slicers 8] [--arrivals 8]
        [--piece-ms 200] [--hold-ms 25] [--server redis-server]
        [--module target/release/libredis_lock.so]
"""

import argparse
import bisect
import itertools
import os
import sys
import threading
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contenders import CONN  # noqa: E402
from harness import Server, jain, percentile  # noqa: E402

KEY = "bench:fair"
LEASE_MS = 30000
# An acquisition counts as a later arrival only if it began this much after
# the slicing client's first piece was written (the server's event loop
# may read two sockets written within a moment in either order).
TOLERANCE_S = 0.001
MODES = ("kept, overlap", "kept, no overlap", "KEEP 0")


class Unanswered(Exception):
    """A waiting command that the server never answered."""


class Run:
    """One mode's run: the clients' acquisitions, numbered as granted."""

    def __init__(self, port, mode, args):
        self.port, self.mode, self.piece_ms = port, mode, args.piece_ms
        self.hold_s = args.hold_ms / 1000
        seconds = args.seconds
        self.until = time.monotonic() + seconds
        self.order = itertools.count()
        self.acquisitions = []  # (client, slicing, began, written, granted_at, number)
        self.lock = threading.Lock()
        self.unanswered = 0  # pieces never answered (see read)

    def read(self, conn, owner):
        """A piece's reply, awaited its WAIT and 2 s more: a piece the
        server never answers is counted, its connection closed, and what
        the owner holds given back (the acquisition starts over)."""
        if conn.can_read(self.piece_ms / 1000 + 2.0):
            return conn.read_response()
        with self.lock:
            self.unanswered += 1
        conn.disconnect()
        raise Unanswered()

    def acquire_cmd(self, owner, wait_ms):
        cmd = ["LOCK.ACQUIRE", KEY, owner, LEASE_MS, "WAIT", wait_ms]
        return cmd + ["KEEP", 0] if self.mode == "KEEP 0" else cmd

    def sliced(self, conns, owner):
        """One acquisition in pieces: (written, holds) once granted."""
        cur, other = conns
        cur.send_command(*self.acquire_cmd(owner, self.piece_ms))
        written = sent = time.monotonic()
        while True:
            if self.mode != "kept, overlap":
                if self.read(cur, owner) is None:
                    return written, 1
                cur.send_command(*self.acquire_cmd(owner, self.piece_ms))
                continue
            overlap_at = sent + self.piece_ms * 0.75 / 1000
            if cur.can_read(max(0.0, overlap_at - time.monotonic())):
                if self.read(cur, owner) is None:
                    return written, 1
                # Timed out before the next piece went out: its place is
                # kept, and the next piece takes it back.
                cur.send_command(*self.acquire_cmd(owner, self.piece_ms))
                sent = time.monotonic()
                continue
            other.send_command(*self.acquire_cmd(owner, self.piece_ms))
            sent = time.monotonic()
            if self.read(cur, owner) is None:
                # Granted just before the next piece: that one re-entered.
                return written, 1 + (self.read(other, owner) is None)
            cur, other = other, cur

    def client(self, index, slicing):
        owner = "%s-%d" % ("slicer" if slicing else "long", index)
        conns = [redis.Connection(port=self.port, **CONN) for _ in range(2)]
        try:
            while time.monotonic() < self.until:
                began = time.monotonic()
                if slicing:
                    try:
                        written, holds = self.sliced(conns, owner)
                    except Unanswered:
                        for c in conns:
                            c.disconnect()
                        conns[0].send_command("HGET", KEY, owner)
                        for _ in range(int(conns[0].read_response() or 0)):
                            conns[0].send_command("LOCK.RELEASE", KEY, owner)
                            conns[0].read_response()
                        continue
                else:
                    conns[0].send_command(*self.acquire_cmd(owner, 60000))
                    written, holds = time.monotonic(), 1
                    if conns[0].read_response() is not None:
                        continue
                number = next(self.order)  # inside the critical section
                granted_at = time.monotonic()
                time.sleep(self.hold_s)
                for _ in range(holds):
                    conns[0].send_command("LOCK.RELEASE", KEY, owner)
                    conns[0].read_response()
                with self.lock:
                    self.acquisitions.append(
                        (owner, slicing, began, written, granted_at, number))
        finally:
            for c in conns:
                c.disconnect()


def overtakes(acquisitions):
    """(overtakes, slicing acquisitions overtaken at least once)."""
    by_began = sorted(acquisitions, key=lambda a: a[2])
    began = [a[2] for a in by_began]
    total = overtaken = 0
    for owner, slicing, _, written, _, number in acquisitions:
        if not slicing:
            continue
        later = by_began[bisect.bisect_right(began, written + TOLERANCE_S):]
        n = sum(1 for a in later if a[5] < number)
        total += n
        overtaken += n > 0
    return total, overtaken


def run_mode(args, mode):
    server = Server(args.server, os.path.abspath(args.module))
    admin = server.start()
    run = Run(server.port, mode, args)
    threads = [threading.Thread(target=run.client, args=(i, True)) for i in range(args.slicers)]
    threads += [threading.Thread(target=run.client, args=(i, False)) for i in range(args.arrivals)]
    for i, t in enumerate(threads):
        t.start()
        time.sleep(0.01 if i < args.slicers else 0.0)
    for t in threads:
        t.join()
    info = admin.info("lock")
    server.cleanup()
    acq = run.acquisitions
    counts = {}
    for a in acq:
        counts[a[0]] = counts.get(a[0], 0) + 1
    owners = ["slicer-%d" % i for i in range(args.slicers)] + [
        "long-%d" % i for i in range(args.arrivals)]
    total, overtaken = overtakes(acq)
    waits = {s: sorted((a[4] - a[2]) * 1000 for a in acq if a[1] == s) for s in (True, False)}
    slicing = sum(1 for a in acq if a[1])
    return {
        "grants (slicing / long waits)": "%d (%d / %d)" % (len(acq), slicing, len(acq) - slicing),
        "overtakes of a slicing client by a later arrival": total,
        "slicing acquisitions overtaken": "%d of %d" % (overtaken, slicing),
        "Jain's index over the clients' grants": "%.3f" % jain([counts.get(o, 0) for o in owners]),
        "slicing clients' wait, mean / p99 ms": "%.0f / %.0f" % (
            sum(waits[True]) / max(1, len(waits[True])), percentile(waits[True], 0.99)),
        "long waits, mean / p99 ms": "%.0f / %.0f" % (
            sum(waits[False]) / max(1, len(waits[False])), percentile(waits[False], 0.99)),
        "places taken back / pieces continued": "%s / %s" % (
            info.get("lock_places_rejoined", 0), info.get("lock_waits_continued", 0)),
        "pieces never answered (a bug if not 0)": run.unanswered,
    }


def kept_memory(args, places=10000):
    """used_memory per kept place: `places` waiters (the default cap,
    lock.keep-places-max) each leave with WAIT 1 KEEP 600000, on 10
    connections; bytes measured once all are kept and once all are
    cancelled (LOCK.CANCEL)."""
    server = Server(args.server, os.path.abspath(args.module))
    admin = server.start()
    admin.execute_command("LOCK.ACQUIRE", KEY, "holder", 600000)
    before = admin.info("memory")["used_memory"]

    def leave(first):
        r = redis.Redis(port=server.port, **CONN)
        pipe = r.pipeline(transaction=False)
        for i in range(first, places, 10):
            pipe.execute_command("LOCK.ACQUIRE", KEY, "w%d" % i, 600000,
                                 "WAIT", 1, "KEEP", 600000)
        pipe.execute()

    threads = [threading.Thread(target=leave, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = int(admin.info("lock")["lock_kept_places"])
    during = admin.info("memory")["used_memory"]
    for i in range(places):
        admin.execute_command("LOCK.CANCEL", KEY, "w%d" % i)
    after = admin.info("memory")["used_memory"]
    server.cleanup()
    print()
    print("kept places: %d kept, used_memory %+d bytes (%.0f bytes each); "
          "%+d bytes once all were cancelled" % (
              kept, during - before, (during - before) / max(1, kept), after - before))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--hold-ms", type=int, default=25)
    ap.add_argument("--slicers", type=int, default=8)
    ap.add_argument("--arrivals", type=int, default=8)
    ap.add_argument("--piece-ms", type=int, default=200)
    ap.add_argument("--server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--module", default="target/release/libredis_lock.so")
    args = ap.parse_args()
    sys.setswitchinterval(0.0005)  # the clients' threads take turns promptly
    cells = {mode: run_mode(args, mode) for mode in MODES}
    print("# fair_bench: %d clients waiting in %d ms pieces, %d arriving with "
          "single long waits, one lock held %d ms per grant, %.0f s per mode"
          % (args.slicers, args.piece_ms, args.arrivals, args.hold_ms, args.seconds))
    print("command: python bench/fair_bench.py " + " ".join(sys.argv[1:]))
    print()
    print("| | " + " | ".join(MODES) + " |")
    print("|---|" + "---|" * len(MODES))
    for key in cells[MODES[0]]:
        print("| %s | %s |" % (key, " | ".join(str(cells[m][key]) for m in MODES)))
    kept_memory(args)


if __name__ == "__main__":
    main()
