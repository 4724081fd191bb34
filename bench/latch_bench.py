"""A count-down latch opening for many waiters, and a latch that expires
under a waiter: the module's LOCK.LATCHSET / LOCK.COUNTDOWN / LOCK.AWAIT
against Redisson's RCountDownLatch protocol (its scripts through EVAL, its
waiting on redisson_countdownlatch__channel__{name}), same server binary.

Open: W waiters (default 32, one connection each) wait for a latch of count
1; a last count-down opens it. Reported: how long after the count-down was
sent each waiter heard (median and max over all waiters of R rounds).

  module    waiters: LOCK.AWAIT name 10000; opener: LOCK.COUNTDOWN name
  redisson  waiters: RCountDownLatch.await(10 s): subscribe to the channel,
            then GET; while the count is above zero, wait for a message (or
            the time left) and GET again; opener: the countDown script
            (DECR, DEL at 0, PUBLISH 0)

Expiry: a latch of count 1 that expires after 300 ms, one waiter with a
3 s timeout. Reported: what the waiter was told and when, after the
latch's deadline.

  module    LOCK.LATCHSET name 1 PX 300; LOCK.AWAIT name 3000 -> -1
  redisson  the trySetCount script, then PEXPIRE name 300 (Redisson's
            expire() on the object); await(3 s) as above

Usage (make bench runs it through bench/run.sh):
    python bench/latch_bench.py [--waiters 32] [--rounds 5]
        [--server redis-server] [--module target/release/libredis_lock.so]
"""

import argparse
import os
import sys
import threading
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contenders import CONN, REDISSON_DIR  # noqa: E402
from harness import Server, percentile  # noqa: E402

LATCH = "bench:latch"
CHANNEL = "redisson_countdownlatch__channel__{%s}" % LATCH


def _script(name):
    with open(os.path.join(REDISSON_DIR, name), encoding="utf-8") as f:
        return f.read()


def module_wait(port, timeout_ms, ready, out):
    """LOCK.AWAIT on a connection of its own: (reply, monotonic time)."""
    conn = redis.Connection(port=port, **CONN)
    conn.send_command("LOCK.AWAIT", LATCH, timeout_ms)
    ready.release()
    reply = conn.read_response()
    out.append((reply, time.monotonic()))
    conn.disconnect()


def redisson_wait(port, timeout_ms, ready, out):
    """RCountDownLatch.await(timeout): subscribe, then check the count, and
    wait for a message (or the time left) while it is above zero. Reply 1
    when it finds the count at zero, 0 when the time is up."""
    r = redis.Redis(port=port, **CONN)
    sub = redis.Connection(port=port, **CONN)
    sub.send_command("SUBSCRIBE", CHANNEL)
    sub.read_response()
    started = time.monotonic()
    ready.release()
    reply = 0
    while True:
        if int(r.get(LATCH) or 0) <= 0:
            reply = 1
            break
        left = timeout_ms / 1000.0 - (time.monotonic() - started)
        if left <= 0:
            break
        if sub.can_read(left):
            sub.read_response()
    out.append((reply, time.monotonic()))
    sub.disconnect()
    r.close()


def start_waiters(contender, port, count, timeout_ms):
    wait = module_wait if contender == "module" else redisson_wait
    ready = threading.Semaphore(0)
    out = []
    threads = [threading.Thread(target=wait, args=(port, timeout_ms, ready, out))
               for _ in range(count)]
    for t in threads:
        t.start()
    for _ in threads:
        ready.acquire()
    return threads, out


def queued(r, count):
    """Until the module shows `count` waiters (its own waiters only)."""
    for _ in range(500):
        if len(r.execute_command("LOCK.LATCHINFO", LATCH)[5]) >= count:
            return
        time.sleep(0.002)
    raise SystemExit("the waiters did not queue")


def open_rounds(contender, args, server):
    r = redis.Redis(port=server.port, **CONN)
    try_set = _script("latch-try-set-count.lua")
    count_down = _script("latch-count-down.lua")
    heard = []
    for _ in range(args.rounds):
        r.delete(LATCH)
        if contender == "module":
            r.execute_command("LOCK.LATCHSET", LATCH, 1)
        else:
            r.eval(try_set, 2, LATCH, CHANNEL, "1", "1", "PUBLISH")
        threads, out = start_waiters(contender, server.port, args.waiters, 10000)
        if contender == "module":
            queued(r, args.waiters)
        else:
            time.sleep(0.2)  # every waiter subscribed and checked (no way to see them)
        sent = time.monotonic()
        if contender == "module":
            r.execute_command("LOCK.COUNTDOWN", LATCH)
        else:
            r.eval(count_down, 2, LATCH, CHANNEL, "0", "PUBLISH")
        for t in threads:
            t.join()
        assert all(reply == 1 for reply, _ in out), out
        heard += [(at - sent) * 1000 for _, at in out]
    heard.sort()
    return {
        "open: waiters told after the count-down, median ms": percentile(heard, 0.5),
        "open: waiters told after the count-down, max ms": heard[-1],
    }


def expiry_round(contender, server):
    r = redis.Redis(port=server.port, **CONN)
    r.delete(LATCH)
    if contender == "module":
        r.execute_command("LOCK.LATCHSET", LATCH, 1, "PX", 300)
    else:
        try_set = _script("latch-try-set-count.lua")
        r.eval(try_set, 2, LATCH, CHANNEL, "1", "1", "PUBLISH")
        r.pexpire(LATCH, 300)
    deadline = r.pexpiretime(LATCH)
    threads, out = start_waiters(contender, server.port, 1, 3000)
    for t in threads:
        t.join()
    reply, _ = out[0]
    secs, micros = r.time()
    told_after = secs * 1000 + micros // 1000 - deadline
    meaning = {1: "reached zero", 0: "timed out", -1: "expired"}[reply]
    return {
        "expiry: the waiter was told": "%s (%d)" % (meaning, reply),
        "expiry: told after the latch's deadline, ms": told_after,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--waiters", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--module", default="target/release/libredis_lock.so")
    args = ap.parse_args()
    module = os.path.abspath(args.module)
    cells = {}
    for contender in ("module", "redisson"):
        server = Server(args.server, module)
        server.start()
        cells[contender] = open_rounds(contender, args, server)
        cells[contender].update(expiry_round(contender, server))
        server.cleanup()
    print("# latch_bench: %d waiters, %d rounds; a 300 ms latch expiring "
          "under a 3 s wait" % (args.waiters, args.rounds))
    print("command: python bench/latch_bench.py " + " ".join(sys.argv[1:]))
    print()
    print("| | module (LOCK.LATCHSET / COUNTDOWN / AWAIT) "
          "| Redisson's scripts + messages |")
    print("|---|---|---|")

    def fmt(v):
        return "%.1f" % v if isinstance(v, float) else str(v)

    for key in cells["module"]:
        module, redisson = cells["module"][key], cells["redisson"][key]
        print("| %s | %s | %s |" % (key, fmt(module), fmt(redisson)))


if __name__ == "__main__":
    main()
