"""The contenders of the lock contention benchmark, and the client process.

The workload every contender runs, and each lock protocol as one client sees
it: `module`, `redisson`, `redis-py` and `python-redis-lock` (see
lock_bench.py's docstring). `client_process` is the body of one client
process: it sets up its contender, waits for the start, loops on
acquire / critical section / release until the deadline, and reports what it
measured through a pipe.
"""

import array
import gc
import math
import os
import time
import uuid

import redis

LOCK = "bench:lock"
COUNTER = "bench:counter"
INSIDE = "bench:inside"
LEASE_MS = 10000
WAIT_MS = 10000

CONTENDERS = ("module", "redisson", "redis-py", "python-redis-lock")

# Every connection, for every contender. redis-py 8 defaults to RESP3 and a 5 s
# socket timeout; a 5 s timeout would cut the 10 s blocking waits (BLPOP,
# LOCK.ACQUIRE ... WAIT) short, so no socket timeout, and RESP2, the protocol
# Redisson and redis-py < 8 speak by default (the lock commands' replies are
# the same in both).
CONN = {"host": "127.0.0.1", "protocol": 2, "socket_timeout": None}

# Redisson's scripts, from redisson/ (the one copy; see its README):
# RedissonLock.tryLockInnerAsync (KEYS[1] = lock, ARGV[1] = lease ms,
# ARGV[2] = "<client uuid>:<thread id>") and RedissonLock.unlockInnerAsync
# (KEYS[1] = lock, KEYS[2] = channel, ARGV[1] = LockPubSub.UNLOCK_MESSAGE "0",
# ARGV[2] = lease ms, ARGV[3] = owner).
REDISSON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "redisson")


def _redisson_script(name):
    with open(os.path.join(REDISSON_DIR, name), encoding="utf-8") as f:
        return f.read()


REDISSON_ACQUIRE = _redisson_script("try-lock-hincrby.lua")
REDISSON_RELEASE = _redisson_script("unlock.lua")
REDISSON_CHANNEL = "redisson_lock__channel:{%s}" % LOCK
REDISSON_UNLOCK_MESSAGE = "0"


class Stop(Exception):
    """The run is over and the lock was not granted: leave the loop."""


def _resp(*parts):
    """One RESP command, encoded once up front, as send_packed_command takes it
    (a list of bytes: a bare bytes object would be iterated as ints)."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        if isinstance(part, str):
            part = part.encode()
        elif isinstance(part, int):
            part = b"%d" % part
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return [b"".join(out)]


# The critical section's two round trips. The second is formatted per
# iteration with the new counter value (one bytes % operation).
CS_ENTER = [_resp("INCR", INSIDE)[0] + _resp("GET", COUNTER)[0]]
CS_LEAVE_HEAD = b"*3\r\n$3\r\nSET\r\n" + b"$%d\r\n%s\r\n" % (len(COUNTER), COUNTER.encode())
CS_LEAVE_TAIL = _resp("DECR", INSIDE)[0]


class Client:
    """What one client process measures."""

    def __init__(self):
        self.waits = array.array("q")  # ns from the start of acquire() to granted
        self.timeouts = 0  # acquire attempts that ended without the lock
        self.overlaps = 0  # INCR inside != 1 or DECR inside != 0
        self.release_errors = 0  # release said we did not hold the lock
        self.early = 0  # module: WAIT answered "busy" well before its timeout


def _contender_module(port, index, deadline, stats):
    r = redis.Redis(port=port, single_connection_client=True, **CONN)
    r.ping()
    conn = r.connection
    owner = "%s:%d" % (uuid.uuid4(), index)
    acquire_cmd = _resp("LOCK.ACQUIRE", LOCK, owner, LEASE_MS, "WAIT", WAIT_MS)
    release_cmd = _resp("LOCK.RELEASE", LOCK, owner)
    send, read, now = conn.send_packed_command, conn.read_response, time.monotonic
    early_s = WAIT_MS / 2000.0

    def acquire():
        while True:
            sent = now()
            send(acquire_cmd)
            if read() is None:
                return
            # An integer: WAIT timed out with the lock still held. Retry.
            stats.timeouts += 1
            if now() - sent < early_s:
                stats.early += 1
            if now() >= deadline[0]:
                raise Stop

    def release():
        send(release_cmd)
        if read() != 1:
            stats.release_errors += 1

    return conn, acquire, release


def _contender_redisson(port, index, deadline, stats):
    r = redis.Redis(port=port, single_connection_client=True, **CONN)
    r.ping()
    conn = r.connection
    acquire_sha = r.script_load(REDISSON_ACQUIRE)
    release_sha = r.script_load(REDISSON_RELEASE)
    # Redisson's lock name: "<connection manager uuid>:<thread id>".
    owner = "%s:%d" % (uuid.uuid4(), 1)
    acquire_cmd = _resp("EVALSHA", acquire_sha, 1, LOCK, LEASE_MS, owner)
    release_cmd = _resp("EVALSHA", release_sha, 2, LOCK, REDISSON_CHANNEL,
                        REDISSON_UNLOCK_MESSAGE, LEASE_MS, owner)

    # The unlock-message subscription: one per client, subscribed once and kept
    # (Redisson's PublishSubscribeService shares one per lock name). Each
    # message is one permit of RedissonLockEntry's semaphore; the permits are
    # the messages queued on this socket, so "tryAcquire(t)" = wait up to t
    # for one message and consume it. A new subscription in Redisson starts
    # with Semaphore(0): permits from before it are dropped (drain()).
    sub = redis.Connection(port=port, **CONN)
    sub.send_command("SUBSCRIBE", REDISSON_CHANNEL)
    reply = sub.read_response()
    assert reply[0] == b"subscribe", reply
    can_read, read_message = sub.can_read, sub.read_response

    def drain():
        while can_read(0):
            read_message()

    def semaphore_try_acquire(timeout_ms):
        if can_read(timeout_ms / 1000.0):
            read_message()

    send, read = conn.send_packed_command, conn.read_response

    def try_acquire():
        send(acquire_cmd)
        return read()

    def now_ms():
        return time.monotonic() * 1000.0

    def acquire():
        # RedissonLock.tryLock(waitTime = 10 s, leaseTime = 10 s), step by step.
        while True:
            time_left = float(WAIT_MS)
            current = now_ms()
            ttl = try_acquire()
            if ttl is None:
                return
            time_left -= now_ms() - current
            if time_left <= 0:
                failed()
                continue
            current = now_ms()
            drain()  # subscribe(threadId): a fresh RedissonLockEntry
            time_left -= now_ms() - current
            if time_left <= 0:
                failed()
                continue
            while True:
                current_time = now_ms()
                ttl = try_acquire()
                if ttl is None:
                    return
                time_left -= now_ms() - current_time
                if time_left <= 0:
                    break
                current_time = now_ms()
                if 0 <= ttl < time_left:
                    semaphore_try_acquire(ttl)
                else:
                    semaphore_try_acquire(time_left)
                time_left -= now_ms() - current_time
                if time_left <= 0:
                    break
            failed()

    def failed():
        stats.timeouts += 1
        if time.monotonic() >= deadline[0]:
            raise Stop

    def release():
        send(release_cmd)
        if read() != 1:
            stats.release_errors += 1

    return conn, acquire, release


def _contender_redis_py(port, index, deadline, stats):
    r = redis.Redis(port=port, single_connection_client=True, **CONN)
    r.ping()
    lock = r.lock(LOCK, timeout=LEASE_MS / 1000, blocking=True, blocking_timeout=WAIT_MS / 1000)

    def acquire():
        while not lock.acquire():
            stats.timeouts += 1
            if time.monotonic() >= deadline[0]:
                raise Stop

    def release():
        try:
            lock.release()
        except redis.exceptions.LockError:
            stats.release_errors += 1

    return r.connection, acquire, release


def _contender_python_redis_lock(port, index, deadline, stats):
    import redis_lock

    r = redis.Redis(port=port, single_connection_client=True, **CONN)
    r.ping()
    lock = redis_lock.Lock(r, LOCK, expire=LEASE_MS // 1000)

    def acquire():
        while not lock.acquire(blocking=True, timeout=WAIT_MS // 1000):
            stats.timeouts += 1
            if time.monotonic() >= deadline[0]:
                raise Stop

    def release():
        try:
            lock.release()
        except redis_lock.NotAcquired:
            stats.release_errors += 1

    return r.connection, acquire, release


SETUP = {
    "module": _contender_module,
    "redisson": _contender_redisson,
    "redis-py": _contender_redis_py,
    "python-redis-lock": _contender_python_redis_lock,
}


def client_process(contender, index, port, seconds, ready, go, start_at, out):
    """One client: set up, wait for the start, loop until the deadline, report."""
    stats = Client()
    try:
        # The deadline is only known after the start signal; the contender
        # closures read it through this one-element list.
        deadline_box = [math.inf]
        conn, acquire, release = SETUP[contender](port, index, deadline_box, stats)
        send, read = conn.send_packed_command, conn.read_response
        waits_append = stats.waits.append
        clock = time.perf_counter_ns
        monotonic = time.monotonic
        gc.collect()
        gc.disable()
        ready.wait()
        go.wait()
        deadline = start_at.value + seconds
        deadline_box[0] = deadline
        while monotonic() < deadline:
            begin = clock()
            try:
                acquire()
            except Stop:
                break
            waits_append(clock() - begin)
            # Critical section: read-modify-write of the counter.
            send(CS_ENTER)
            if read() != 1:
                stats.overlaps += 1
            value = read()
            value = b"%d" % (int(value) + 1) if value is not None else b"1"
            send([b"%s$%d\r\n%s\r\n%s" % (CS_LEAVE_HEAD, len(value), value, CS_LEAVE_TAIL)])
            read()
            if read() != 0:
                stats.overlaps += 1
            release()
        finished = monotonic()
        out.send({
            "waits": stats.waits.tobytes(),
            "timeouts": stats.timeouts,
            "overlaps": stats.overlaps,
            "release_errors": stats.release_errors,
            "early": stats.early,
            "finished": finished,
            "cpu": sum(os.times()[:2]),
            "error": None,
        })
    except BaseException as exc:  # report, don't hang the parent
        try:
            ready.abort()
        except Exception:
            pass
        out.send({"error": "%s: %s" % (type(exc).__name__, exc)})
    finally:
        out.close()
