"""A semaphore under contention, and a dead permit holder: the module's
LOCK.SEM* / LOCK.PERMIT* commands against Redisson's RSemaphore and
RPermitExpirableSemaphore protocols (their scripts through EVALSHA, plus
their waiting on redisson_sc:{name} messages), same server binary.

Contention: C client processes (default 32) loop for S seconds on one
semaphore of P permits (default 4): acquire one permit (wait up to 10 s),
hold it 1-3 ms (uniform), release it. Every request and grant is stamped
with CLOCK_MONOTONIC; the report gives acquisitions/s, the Jain fairness
index over the per-client acquisition counts (1.0 = all equal), p50/p99/max
wait (from the start of the acquire to the grant), acquires that timed out,
and the most holders seen at once (from the stamps: a grant is stamped after
its reply, a release before its command, so the count cannot exceed the
true one; more than P would be a safety violation).

  module    LOCK.SEMACQUIRE name 1 WAIT 10000 / LOCK.SEMRELEASE name 1
  redisson  RedissonSemaphore.tryAcquire(1, 10 s): the tryAcquire script;
            on failure wait for a message on redisson_sc:{name} (or the time
            left), try again; release: the release script (publishes the new
            count). Each process is one Redisson client with its own
            subscription, kept for the run (Redisson shares one per JVM).

Dead holder: a permit semaphore of 1 permit; a process takes it with a
200 ms lease and is SIGKILLed; a waiter then asks for it (wait up to 5 s).
Reported: when the waiter got it, relative to the dead permit's deadline
(the deadline is the permit's score in {name}:timeout; the grant time is
read from the waiter's own permit: its score minus its lease, by the
server's clock for the module, by the waiter's clock for Redisson, one
machine here). Then, without any waiter: the value and the number of
leases 100 ms after the deadline, before and after one more call.

  module    holder: LOCK.PERMITACQUIRE name 1 LEASE 200;
            waiter: LOCK.PERMITACQUIRE name 1 LEASE 10000 WAIT 5000
  redisson  holder: the tryAcquire script with a 200 ms lease; waiter:
            RPermitExpirableSemaphore.tryAcquire(5 s, 10 s): the script; on
            failure it answers the nearest lease deadline (':<score>') and
            the client waits for a message or until then, and tries again.

Usage (make bench runs it through bench/run.sh):
    python bench/sem_bench.py [--clients 32] [--permits 4] [--seconds 10]
        [--hold-ms 1-3] [--dead-runs 5] [--server redis-server]
        [--module target/release/libredis_lock.so]
"""

import argparse
import multiprocessing as mp
import os
import random
import signal
import sys
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contenders import CONN, REDISSON_DIR  # noqa: E402
from harness import Server, jain, percentile  # noqa: E402

SEM = "bench:sem"
CHANNEL = "redisson_sc:{%s}" % SEM
TIMEOUTS = "{%s}:timeout" % SEM
WAIT_MS = 10000
NON_EXPIRABLE = 922337203685477
DEAD_LEASE_MS = 200
WAITER_LEASE_MS = 10000
WAITER_WAIT_MS = 5000


def _script(name):
    with open(os.path.join(REDISSON_DIR, name), encoding="utf-8") as f:
        return f.read()


def now_ms():
    return int(time.time() * 1000)


# --------------------------------------------------------------------------
# Contention
# --------------------------------------------------------------------------

def module_side(r):
    conn = r.connection
    acquire = ("LOCK.SEMACQUIRE", SEM, 1, "WAIT", WAIT_MS)
    release = ("LOCK.SEMRELEASE", SEM, 1)

    def lock(sent):
        conn.send_command(*acquire)
        sent.append(time.monotonic())
        return conn.read_response() == 1

    def unlock():
        conn.send_command(*release)
        conn.read_response()

    return lock, unlock


def redisson_side(r, port):
    """RedissonSemaphore.tryAcquire(1, 10 s) and release(1)."""
    conn = r.connection
    acquire_sha = r.script_load(_script("sem-try-acquire.lua"))
    release_sha = r.script_load(_script("sem-release.lua"))
    acquire = ("EVALSHA", acquire_sha, 1, SEM, 1)
    release = ("EVALSHA", release_sha, 2, SEM, CHANNEL, 1, "PUBLISH")
    sub = redis.Connection(port=port, **CONN)
    sub.send_command("SUBSCRIBE", CHANNEL)
    sub.read_response()

    def try_once(sent):
        conn.send_command(*acquire)
        sent.append(time.monotonic())
        return conn.read_response() == 1

    def lock(sent):
        started = time.monotonic()
        # Messages from before this acquire are stale: the try below sees
        # their effect (Redisson subscribes, then tries).
        while sub.can_read(0):
            sub.read_response()
        while True:
            if try_once(sent):
                return True
            left = WAIT_MS / 1000.0 - (time.monotonic() - started)
            if left <= 0:
                return False
            if sub.can_read(left):
                sub.read_response()

    def unlock():
        conn.send_command(*release)
        conn.read_response()

    return lock, unlock


def worker(contender, port, hold_ms, seconds, go, out):
    r = redis.Redis(port=port, single_connection_client=True, **CONN)
    r.ping()
    if contender == "module":
        lock, unlock = module_side(r)
    else:
        lock, unlock = redisson_side(r, port)
    rng = random.Random(os.getpid())
    events = []  # (asked, granted or None, released)
    go.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sent = []
        ok = lock(sent)
        asked = sent[0]
        if not ok:
            events.append((asked, None, None))
            continue
        granted = time.monotonic()
        time.sleep(rng.uniform(*hold_ms) / 1000.0)
        released = time.monotonic()
        unlock()
        events.append((asked, granted, released))
    out.send(events)
    out.close()


def contention(contender, args, module):
    server = Server(args.server, module)
    admin = server.start()
    admin.delete(SEM)
    if contender == "module":
        assert admin.execute_command("LOCK.SEMSET", SEM, args.permits) == 1
    else:
        admin.eval(_script("sem-try-set-permits.lua"), 2, SEM, CHANNEL, args.permits, "PUBLISH")
    go = mp.Event()
    pipes, procs = [], []
    for _ in range(args.clients):
        parent, child = mp.Pipe(duplex=False)
        p = mp.Process(target=worker, args=(contender, server.port, args.hold_ms, args.seconds, go, child))
        p.start()
        pipes.append(parent)
        procs.append(p)
    time.sleep(1.0)
    go.set()
    results = [pipe.recv() for pipe in pipes]
    for p in procs:
        p.join()
    left = int(admin.get(SEM) or 0)
    server.cleanup()
    return summarise(results, args, left)


def summarise(results, args, left):
    counts, waits, timeouts, marks = [], [], 0, []
    for events in results:
        n = 0
        for asked, granted, released in events:
            if granted is None:
                timeouts += 1
                continue
            n += 1
            waits.append(granted - asked)
            marks.append((granted, 1))
            marks.append((released, -1))
        counts.append(n)
    waits.sort()
    marks.sort(key=lambda m: (m[0], m[1]))  # a release before a grant at the same stamp
    holders = most = 0
    for _, d in marks:
        holders += d
        most = max(most, holders)
    ms = 1000.0
    return {
        "acquisitions/s": sum(counts) / args.seconds,
        "Jain fairness index (per-client acquisitions)": jain(counts),
        "acquisitions per client, min / max": "%d / %d" % (min(counts), max(counts)),
        "wait p50 ms": percentile(waits, 0.5) * ms,
        "wait p99 ms": percentile(waits, 0.99) * ms,
        "wait max ms": waits[-1] * ms if waits else float("nan"),
        "acquires timed out (10 s)": timeouts,
        "most holders at once (stamps)": most,
        "permits left at the end": left,
    }


# --------------------------------------------------------------------------
# Dead holder
# --------------------------------------------------------------------------

def holder(contender, port, out):
    """Takes the one permit with a 200 ms lease, reports its id, then hangs
    until killed."""
    r = redis.Redis(port=port, single_connection_client=True, **CONN)
    if contender == "module":
        ids = r.execute_command("LOCK.PERMITACQUIRE", SEM, 1, "LEASE", DEAD_LEASE_MS)
        member = bytes.fromhex(ids[0].decode())
    else:
        member = os.urandom(16)
        now = now_ms()
        reply = r.evalsha(r.script_load(_script("permit-try-acquire.lua")), 3, SEM, TIMEOUTS, CHANNEL,
                          1, now + DEAD_LEASE_MS, now, NON_EXPIRABLE, "PUBLISH", member)
        assert reply == b"OK", reply
    out.send(member)
    time.sleep(3600)


def redisson_waiter(r, port):
    """RPermitExpirableSemaphore.tryAcquire(5 s, lease 10 s): returns the
    permit's member (16 bytes) or None."""
    sha = r.script_load(_script("permit-try-acquire.lua"))
    sub = redis.Connection(port=port, **CONN)
    sub.send_command("SUBSCRIBE", CHANNEL)
    sub.read_response()
    started = time.monotonic()
    while True:
        member = os.urandom(16)
        now = now_ms()
        reply = r.evalsha(sha, 3, SEM, TIMEOUTS, CHANNEL, 1, now + WAITER_LEASE_MS, now,
                          NON_EXPIRABLE, "PUBLISH", member)
        if reply == b"OK":
            return member
        left = WAITER_WAIT_MS / 1000.0 - (time.monotonic() - started)
        if left <= 0:
            return None
        if reply is not None:  # ':<score>': the nearest lease deadline
            nearest = (float(reply.decode()[1:]) - now_ms()) / 1000.0
            left = min(left, max(nearest, 0.0))
        if sub.can_read(left):
            sub.read_response()


def killed_holder(contender, server):
    """A semaphore of one permit, taken with a lease by a process that is
    then SIGKILLed: (an admin client, the dead permit's deadline)."""
    admin = redis.Redis(port=server.port, **CONN)
    admin.delete(SEM, TIMEOUTS)
    if contender == "module":
        assert admin.execute_command("LOCK.SEMSET", SEM, 1) == 1
    else:
        admin.eval(_script("sem-try-set-permits.lua"), 2, SEM, CHANNEL, 1, "PUBLISH")
    parent, child = mp.Pipe(duplex=False)
    p = mp.Process(target=holder, args=(contender, server.port, child))
    p.start()
    member = parent.recv()
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    deadline = float(admin.zscore(TIMEOUTS, member))
    return admin, deadline


def dead_holder_once(contender, server):
    admin, deadline = killed_holder(contender, server)
    r = redis.Redis(port=server.port, single_connection_client=True, **CONN)
    if contender == "module":
        ids = r.execute_command("LOCK.PERMITACQUIRE", SEM, 1, "LEASE", WAITER_LEASE_MS, "WAIT", WAITER_WAIT_MS)
        got = bytes.fromhex(ids[0].decode()) if ids else None
    else:
        got = redisson_waiter(r, server.port)
    arrived = now_ms()
    if got is None:
        return float("nan"), float("nan")
    granted = float(admin.zscore(TIMEOUTS, got)) - WAITER_LEASE_MS
    return granted - deadline, arrived - deadline


def no_caller_once(contender, server):
    """The holder dies and nobody asks: (value, leases) 100 ms after the
    deadline, then after one more call (availablePermits / SEMAVAILABLE)."""
    admin, deadline = killed_holder(contender, server)
    time.sleep(max(0.0, (deadline + 100 - now_ms()) / 1000.0))
    before = (int(admin.get(SEM) or 0), admin.zcard(TIMEOUTS))
    if contender == "module":
        admin.execute_command("LOCK.SEMAVAILABLE", SEM)
    else:
        admin.eval(_script("permit-available.lua"), 3, SEM, TIMEOUTS, CHANNEL, now_ms(), "PUBLISH")
    after = (int(admin.get(SEM) or 0), admin.zcard(TIMEOUTS))
    return before, after


def dead_holder(contender, args, module):
    server = Server(args.server, module)
    server.start()
    runs = [dead_holder_once(contender, server) for _ in range(args.dead_runs)]
    before, after = no_caller_once(contender, server)
    server.cleanup()
    granted = sorted(g for g, _ in runs)
    arrived = sorted(a for _, a in runs)
    return {
        "dead holder: waiter granted after the lease deadline, median ms": percentile(granted, 0.5),
        "dead holder: waiter granted after the lease deadline, max ms": granted[-1],
        "dead holder: waiter's reply after the lease deadline, max ms": arrived[-1],
        "no caller: (value, leases) 100 ms after the deadline": "%d, %d" % before,
        "no caller: (value, leases) after one availablePermits call": "%d, %d" % after,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--permits", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--hold-ms", default="1-3", help="min-max hold, ms (uniform)")
    ap.add_argument("--dead-runs", type=int, default=5)
    ap.add_argument("--server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--module", default="target/release/libredis_lock.so")
    ap.add_argument("--contenders", default="module,redisson")
    args = ap.parse_args()
    args.hold_ms = tuple(float(x) for x in args.hold_ms.split("-"))
    module = os.path.abspath(args.module)
    cells = {}
    contenders = args.contenders.split(",")
    for c in contenders:
        cells[c] = contention(c, args, module)
        cells[c].update(dead_holder(c, args, module))
    print("# sem_bench: %d clients, one semaphore of %d permits, hold %g-%g ms, %.0f s; "
          "dead holder: lease %d ms, %d runs"
          % (args.clients, args.permits, args.hold_ms[0], args.hold_ms[1], args.seconds,
             DEAD_LEASE_MS, args.dead_runs))
    print("command: python bench/sem_bench.py " + " ".join(sys.argv[1:]))
    print()
    titles = {"module": "module (LOCK.SEM* / LOCK.PERMIT*)",
              "redisson": "Redisson's scripts + redisson_sc messages"}
    print("| | " + " | ".join(titles[c] for c in contenders) + " |")
    print("|---" * (len(contenders) + 1) + "|")

    def fmt(key, v):
        if key.startswith("Jain"):
            return "%.4f" % v
        return "%.1f" % v if isinstance(v, float) else str(v)

    for key in cells[contenders[0]]:
        print("| %s | %s |" % (key, " | ".join(fmt(key, cells[c][key]) for c in contenders)))


if __name__ == "__main__":
    main()
