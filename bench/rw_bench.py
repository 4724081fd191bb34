"""Mixed read-write load on one read-write lock: the module's LOCK.R*/W*
commands against Redisson's RReadWriteLock protocol (its scripts through
EVALSHA plus its unlock-message waiting), same load, same server binary.

Each of R reader and W writer processes loops for S seconds: acquire (wait up
to 10 s), hold for a short time, release. Every grant and release is stamped
with CLOCK_MONOTONIC (one clock for all processes) and sent back; the report
gives, per contender:

* reads/s and writes/s granted;
* read grants between two write grants (the readers served per batch);
* writers' p50/p99/max wait (from the start of the acquire to the grant), and
  writes that timed out;
* how long a writer waited beyond the holds ahead of it (asked before it and
  still held when it asked): under a fair queue only the hand-off time;
* read grants that overtook a waiting writer (asked more than 2 ms after it,
  granted before it): none under a fair queue, but for stamping noise (a
  request is stamped when its send returns; a process can be descheduled
  right before or after, and one event-loop turn of the server reads
  several clients in no set order).

Usage (make bench-rwlock runs it in the bench venv):
    python bench/rw_bench.py [--readers 16] [--writers 2] [--seconds 10]
        [--read-hold-ms 2] [--write-hold-ms 1] [--server redis-server]
        [--module target/release/libredis_lock.so]
"""

import argparse
import bisect
import multiprocessing as mp
import os
import sys
import time
import uuid

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contenders import CONN, REDISSON_DIR  # noqa: E402
from harness import Server, percentile  # noqa: E402

LOCK = "bench:rw"
LEASE_MS = 10000
WAIT_MS = 10000
CHANNEL = "redisson_rwlock:{%s}" % LOCK
# A stamp is taken just before a command is sent; between the stamp and the
# send a process can be descheduled, so two requests stamped less than this
# apart may reach the server in either order: not counted as overtaking.
SKEW = 0.002


def _script(name):
    with open(os.path.join(REDISSON_DIR, name), encoding="utf-8") as f:
        return f.read()


class Stop(Exception):
    pass


def module_side(r, owner, write):
    conn = r.connection
    kind = "W" if write else "R"
    acquire = ("LOCK.%sACQUIRE" % kind, LOCK, owner, LEASE_MS, "WAIT", WAIT_MS)
    release = ("LOCK.%sRELEASE" % kind, LOCK, owner)

    def lock(deadline, sent):
        while True:
            conn.send_command(*acquire)
            sent.append(time.monotonic())
            if conn.read_response() is None:
                return True
            if time.monotonic() >= deadline:
                return False

    def unlock():
        conn.send_command(*release)
        conn.read_response()

    return lock, unlock


def redisson_side(r, port, owner, write):
    """RedissonReadLock / RedissonWriteLock.tryLock(10 s, lease): the script,
    then, while busy, wait for an unlock message on the shared channel (or
    the remaining lease), as RedissonLock.tryLock does."""
    conn = r.connection
    if write:
        sha = r.script_load(_script("rw-write-lock.lua"))
        unlock_sha = r.script_load(_script("rw-write-unlock.lua"))
        field = owner + ":write"
        acquire = ("EVALSHA", sha, 1, LOCK, LEASE_MS, field)
        release = ("EVALSHA", unlock_sha, 2, LOCK, CHANNEL, "1", LEASE_MS, field)
    else:
        sha = r.script_load(_script("rw-read-lock.lua"))
        unlock_sha = r.script_load(_script("rw-read-unlock.lua"))
        prefix = "{%s}:%s:rwlock_timeout" % (LOCK, owner)
        acquire = ("EVALSHA", sha, 2, LOCK, prefix, LEASE_MS, owner, owner + ":write")
        tag = "{%s}" % LOCK
        release = ("EVALSHA", unlock_sha, 4, LOCK, CHANNEL, prefix, tag, "0", owner)
    sub = redis.Connection(port=port, **CONN)
    sub.send_command("SUBSCRIBE", CHANNEL)
    sub.read_response()

    def lock(deadline, sent):
        def try_once():
            conn.send_command(*acquire)
            sent.append(time.monotonic())
            return conn.read_response()

        while True:
            started = time.monotonic()
            while sub.can_read(0):
                sub.read_response()
            while True:
                ttl = try_once()
                if ttl is None:
                    return True
                left = WAIT_MS / 1000.0 - (time.monotonic() - started)
                if left <= 0:
                    break
                wait = min(left, ttl / 1000.0) if ttl >= 0 else left
                if sub.can_read(wait):
                    sub.read_response()
            if time.monotonic() >= deadline:
                return False

    def unlock():
        conn.send_command(*release)
        conn.read_response()

    return lock, unlock


def worker(contender, port, write, hold_s, seconds, go, out):
    r = redis.Redis(port=port, single_connection_client=True, **CONN)
    r.ping()
    owner = "%s:1" % uuid.uuid4()
    if contender == "module":
        lock, unlock = module_side(r, owner, write)
    else:
        lock, unlock = redisson_side(r, port, owner, write)
    events = []  # (asked, granted or None, released)
    go.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sent = []
        ok = lock(deadline + WAIT_MS / 1000.0, sent)
        # Asked: when the first request had been handed to the kernel, the
        # nearest a client gets to its arrival at the server.
        asked = sent[0]
        if not ok:
            events.append((asked, None, None))
            break
        granted = time.monotonic()
        if hold_s:
            time.sleep(hold_s)
        released = time.monotonic()
        unlock()
        events.append((asked, granted, released))
    out.send((write, events))
    out.close()


def run(contender, args, module):
    server = Server(args.server, module)
    admin = server.start()
    admin.delete(LOCK)
    go = mp.Event()
    pipes, procs = [], []
    for i in range(args.readers + args.writers):
        write = i >= args.readers
        hold = (args.write_hold_ms if write else args.read_hold_ms) / 1000.0
        parent, child = mp.Pipe(duplex=False)
        p = mp.Process(target=worker, args=(contender, server.port, write, hold, args.seconds, go, child))
        p.start()
        pipes.append(parent)
        procs.append(p)
    time.sleep(1.0)
    go.set()
    results = [pipe.recv() for pipe in pipes]
    for p in procs:
        p.join()
    server.cleanup()
    return summarise(results, args.seconds)


def summarise(results, seconds):
    reads, writes, timeouts = [], [], 0
    for write, events in results:
        for asked, granted, released in events:
            if granted is None:
                timeouts += write
                continue
            (writes if write else reads).append((asked, granted, released))
    grants = sorted([(g, "R") for _, g, _ in reads] + [(g, "W") for _, g, _ in writes])
    batches, current = [], 0
    for _, kind in grants:
        if kind == "W":
            if current:
                batches.append(current)
            current = 0
        else:
            current += 1
    waits = sorted(g - a for a, g, _ in writes)
    # For each write: the holds ahead of it (asked before it, granted before
    # it, still held when it asked) and the read grants that overtook it
    # (asked after it, granted before it). A fair queue makes a writer wait
    # for what is ahead, and nobody overtakes it.
    holds = sorted(reads + writes, key=lambda e: e[1])
    granted_at = [g for _, g, _ in holds]
    beyond, overtaking = [], 0
    read_set = set(reads)
    for asked, granted, released in writes:
        lo = bisect.bisect_left(granted_at, asked - 1.0)
        hi = bisect.bisect_left(granted_at, granted)
        ahead_end = asked
        for h_asked, h_granted, h_released in holds[lo:hi]:
            if h_asked < asked and h_released > asked:
                ahead_end = max(ahead_end, h_released)
            elif h_asked > asked + SKEW and (h_asked, h_granted, h_released) in read_set:
                overtaking += 1
        beyond.append(granted - ahead_end)
    beyond.sort()
    ms = 1000.0
    return {
        "reads/s": len(reads) / seconds,
        "writes/s": len(writes) / seconds,
        "read grants between two write grants (mean)": (sum(batches) / len(batches)) if batches else float("nan"),
        "read grants between two write grants (max)": max(batches) if batches else 0,
        "write wait p50 ms": percentile(waits, 0.5) * ms if waits else float("nan"),
        "write wait p99 ms": percentile(waits, 0.99) * ms if waits else float("nan"),
        "write wait max ms": waits[-1] * ms if waits else float("nan"),
        "write wait beyond the holds ahead of it, p99 ms":
            percentile(beyond, 0.99) * ms if beyond else float("nan"),
        "write wait beyond the holds ahead of it, max ms": beyond[-1] * ms if beyond else float("nan"),
        "read grants that overtook a waiting writer": overtaking,
        "writes timed out (10 s)": timeouts,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readers", type=int, default=16)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--read-hold-ms", type=float, default=2.0)
    ap.add_argument("--write-hold-ms", type=float, default=1.0)
    ap.add_argument("--server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--module", default="target/release/libredis_lock.so")
    args = ap.parse_args()
    module = os.path.abspath(args.module)
    cells = {c: run(c, args, module) for c in ("module", "redisson")}
    print("# rw_bench: %d readers (hold %.1f ms), %d writers (hold %.1f ms), %.0f s, one lock"
          % (args.readers, args.read_hold_ms, args.writers, args.write_hold_ms, args.seconds))
    print("command: python bench/rw_bench.py " + " ".join(sys.argv[1:]))
    print()
    print("| | module (LOCK.R*/W*) | Redisson's scripts + unlock messages |")
    print("|---|---|---|")
    for key in cells["module"]:
        def fmt(v):
            return "%.1f" % v if isinstance(v, float) else str(v)
        print("| %s | %s | %s |" % (key, fmt(cells["module"][key]), fmt(cells["redisson"][key])))


if __name__ == "__main__":
    main()
