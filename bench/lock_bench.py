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

Run `python bench/lock_bench.py --help` for the options.
"""

import argparse
import array
import gc
import math
import multiprocessing
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import redis

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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

# Redisson's RedissonLock.tryLockInnerAsync (KEYS[1] = lock, ARGV[1] = lease ms,
# ARGV[2] = "<client uuid>:<thread id>"), verbatim.
REDISSON_ACQUIRE = (
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "return redis.call('pttl', KEYS[1]);"
)

# Redisson's RedissonLock.unlockInnerAsync (KEYS[1] = lock, KEYS[2] = channel,
# ARGV[1] = LockPubSub.UNLOCK_MESSAGE "0", ARGV[2] = lease ms, ARGV[3] = owner),
# verbatim.
REDISSON_RELEASE = (
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; "
    "else "
    "redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; "
    "end; "
    "return nil;"
)
REDISSON_CHANNEL = "redisson_lock__channel:{%s}" % LOCK
REDISSON_UNLOCK_MESSAGE = "0"


# --------------------------------------------------------------------------
# The client process
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A throw-away redis-server on loopback, no persistence, module loaded."""

    def __init__(self, binary, module, cpus=None):
        self.binary, self.module, self.cpus = binary, module, cpus
        self.dir = tempfile.mkdtemp(prefix="lock-bench-")
        self.proc = None
        self.port = None

    def start(self):
        for _ in range(5):
            port = free_port()
            args = [self.binary, "--port", str(port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")]
            if self.module:
                args += ["--loadmodule", self.module]
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         preexec_fn=self._pin)
            client = redis.Redis(port=port, **CONN)
            for _ in range(100):
                if self.proc.poll() is not None:
                    break
                try:
                    client.ping()
                    self.port = port
                    return client
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
            self.stop()
        raise SystemExit("redis-server did not start; see %s" % os.path.join(self.dir, "redis.log"))

    def _pin(self):
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------
# One cell: a contender at N clients
# --------------------------------------------------------------------------

# A run is noisy when other processes took more than this share of all CPUs;
# a cell with no quiet run is run again, at most NOISY_RERUNS more times.
NOISY = 0.10
NOISY_RERUNS = 3


def wait_for_quiet(limit_s=60.0, sample_s=2.0):
    """Before a re-run: wait (at most limit_s) until the machine, idle of this
    benchmark, is quiet for one sample. Returns at once if /proc/stat is unknown."""
    cpus = os.cpu_count() or 1
    deadline = time.monotonic() + limit_s
    while True:
        before = busy_cpu_seconds()
        time.sleep(sample_s)
        share = (busy_cpu_seconds() - before) / (sample_s * cpus)
        if not share > NOISY / 2 or time.monotonic() >= deadline:
            return


def quiet(cell):
    return not cell["foreign_cpu"] > NOISY  # unknown (NaN) counts as quiet


def combine(repeats):
    """The repeats of one cell as one row: the run with the median sections/s
    among the quiet runs (all runs if none was quiet), with the correctness
    counts summed over every run (each must be clean)."""
    quiet_runs = [c for c in repeats if quiet(c)]
    pool = quiet_runs or repeats
    ordered = sorted(pool, key=lambda c: c["rate"])
    cell = dict(ordered[(len(ordered) - 1) // 2])
    cell["rates"] = [c["rate"] for c in pool]
    cell["noisy_runs"] = len(repeats) - len(quiet_runs)
    for key in ("lost", "overlaps", "release_errors", "early"):
        cell[key] = sum(c[key] for c in repeats)
    cell["errors"] = [e for c in repeats for e in c["errors"]]
    cell["empty_runs"] = sum(1 for c in repeats if not c["sections"])

    return cell


def percentile(sorted_values, q):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def jain(counts):
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return (total * total) / (len(counts) * squares) if squares else float("nan")


def busy_cpu_seconds():
    """CPU time the whole machine has spent busy (all CPUs), from /proc/stat.

    Interrupt and softirq time is left out: loopback traffic of the benchmark
    itself is partly accounted there rather than to its processes."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + steal) / os.sysconf("SC_CLK_TCK")


def server_cpu_seconds(admin):
    info = admin.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def run_cell(ctx, admin, port, contender, n, seconds):
    admin.flushall()
    admin.script_flush()
    admin.mset({COUNTER: 0, INSIDE: 0})
    admin.config_resetstat()
    ready = ctx.Barrier(n + 1)
    go = ctx.Barrier(n + 1)
    start_at = ctx.Value("d", 0.0, lock=False)
    pipes, procs = [], []
    for index in range(n):
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=client_process,
                           args=(contender, index, port, seconds, ready, go, start_at, sender),
                           daemon=True)
        proc.start()
        sender.close()
        pipes.append(receiver)
        procs.append(proc)
    errors = []
    base = None
    server_cpu = busy = float("nan")
    try:
        ready.wait(timeout=60)
        base = int(admin.info("stats")["total_commands_processed"])
        server_cpu = server_cpu_seconds(admin)
        busy = busy_cpu_seconds()
        start_at.value = time.monotonic() + 0.05
        go.wait(timeout=60)
    except threading.BrokenBarrierError:
        errors.append("a client failed during setup")
    start = start_at.value
    limit = time.monotonic() + seconds + 2 * WAIT_MS / 1000 + 30
    results = []
    for receiver in pipes:
        if receiver.poll(max(0.0, limit - time.monotonic())):
            try:
                results.append(receiver.recv())
            except EOFError:
                errors.append("a client exited without reporting")
        else:
            errors.append("a client did not finish in time")
    busy = busy_cpu_seconds() - busy
    server_cpu = server_cpu_seconds(admin) - server_cpu
    for proc in procs:
        proc.join(max(0.1, limit - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join()
    for res in results:
        if res.get("error"):
            errors.append(res["error"])
    results = [res for res in results if not res.get("error")]

    counts, waits = [], []
    for res in results:
        client_waits = array.array("q")
        client_waits.frombytes(res["waits"])
        counts.append(len(client_waits))
        waits.extend(client_waits)
    waits.sort()
    total = sum(counts)
    end = max((res["finished"] for res in results), default=start + seconds)
    elapsed = max(end - start, 1e-9)
    counter = int(admin.get(COUNTER) or 0)
    inside = int(admin.get(INSIDE) or 0)
    # The workload's commands: between the INFO taken once every client was
    # set up and this one, less that INFO itself and the two GETs above.
    commands = int(admin.info("stats")["total_commands_processed"]) - (base or 0) - 3
    counts += [0] * (n - len(counts))  # clients that failed count as starved
    # CPU the machine spent on anything but this cell (other processes,
    # e.g. a build running beside the benchmark), as a share of all CPUs.
    wall = time.monotonic() - start
    ours = server_cpu + sum(res["cpu"] for res in results)
    foreign = max(0.0, busy - ours) / (wall * (os.cpu_count() or 1)) if wall > 0 else float("nan")
    ms = 1e-6
    return {
        "contender": contender,
        "clients": n,
        "sections": total,
        "elapsed": elapsed,
        "rate": total / elapsed,
        "p50": percentile(waits, 0.50) * ms if waits else float("nan"),
        "p99": percentile(waits, 0.99) * ms if waits else float("nan"),
        "max": waits[-1] * ms if waits else float("nan"),
        "jain": jain(counts) if total else float("nan"),
        "lost": total - counter,
        "overlaps": sum(res["overlaps"] for res in results) + (1 if inside != 0 else 0),
        "timeouts": sum(res["timeouts"] for res in results),
        "release_errors": sum(res["release_errors"] for res in results),
        "early": sum(res["early"] for res in results),
        "commands_per_section": commands / total if total else float("nan"),
        "counts": counts,
        "errors": errors,
        "foreign_cpu": foreign,
    }


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------

HEADER = ("| contender | clients | sections/s | p50 wait ms | p99 wait ms | max wait ms "
          "| Jain | lost updates | overlaps | timeouts | cmds/section |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def table(cells):
    lines = [HEADER]
    for c in cells:
        rate = "%.0f" % c["rate"]
        if len(c["rates"]) > 1:
            rate += " (%.0f-%.0f)" % (min(c["rates"]), max(c["rates"]))
        lines.append("| %s | %d | %s | %.3f | %.3f | %.3f | %.4f | %d | %d | %d | %.2f |" % (
            c["contender"], c["clients"], rate, c["p50"], c["p99"], c["max"],
            c["jain"], c["lost"], c["overlaps"], c["timeouts"], c["commands_per_section"]))
    return "\n".join(lines)


def problems(cells):
    notes = []
    for c in cells:
        where = "%s @ %d clients" % (c["contender"], c["clients"])
        if c["lost"]:
            notes.append("%s: %d lost updates" % (where, c["lost"]))
        if c["overlaps"]:
            notes.append("%s: %d overlap violations" % (where, c["overlaps"]))
        if c["release_errors"]:
            notes.append("%s: %d releases of a lock not held" % (where, c["release_errors"]))
        if c["early"]:
            notes.append("%s: LOCK.ACQUIRE ... WAIT answered busy %d times well before its "
                         "%d ms timeout: the module is not blocking server-side" % (where, c["early"], WAIT_MS))
        if c["empty_runs"]:
            notes.append("%s: no critical section completed in %d run(s)" % (where, c["empty_runs"]))
        for error in c["errors"]:
            notes.append("%s: %s" % (where, error))
    return notes


def noise(cells):
    """How much other processes disturbed the runs shown."""
    dropped = sum(c["noisy_runs"] for c in cells if quiet(c))
    worst = max((c["foreign_cpu"] for c in cells if math.isfinite(c["foreign_cpu"])), default=0.0)
    text = ("Noise: a run during which other processes used more than %.0f%% of the machine's CPUs is "
            "left out when a quieter run of the same cell exists (%d run(s) left out, re-run up to %d "
            "extra time(s) per cell, each after waiting up to 60 s for the machine to be quiet). "
            "In the runs shown, other processes used at most %.0f%%."
            % (100 * NOISY, dropped, NOISY_RERUNS, 100 * worst))
    noisy = ["%s @ %d" % (c["contender"], c["clients"]) for c in cells if not quiet(c)]
    if noisy:
        text += (" WARNING: no quiet run of %s: those figures are disturbed; rerun on a quiet machine."
                 % ", ".join(noisy))
    return text


def target_check(cells, n=8):
    """The goal at 8 clients: module >= 2x redisson sections/s, p99 <= 10 ms, Jain >= 0.99."""
    by = {(c["contender"], c["clients"]): c for c in cells}
    module, redisson = by.get(("module", n)), by.get(("redisson", n))
    if not module:
        return "Target at %d clients: not evaluated (module contender not run at %d clients)." % (n, n)
    lines = ["Target at %d clients (module):" % n]
    if redisson:
        ratio = module["rate"] / redisson["rate"] if redisson["rate"] else float("inf")
        lines.append("- sections/s >= 2x redisson: %.2fx -> %s" % (ratio, "PASS" if ratio >= 2 else "FAIL"))
    else:
        lines.append("- sections/s >= 2x redisson: redisson not run at %d clients" % n)
    lines.append("- p99 wait <= 10 ms: %.3f ms -> %s" % (module["p99"], "PASS" if module["p99"] <= 10 else "FAIL"))
    lines.append("- Jain >= 0.99: %.4f -> %s" % (module["jain"], "PASS" if module["jain"] >= 0.99 else "FAIL"))
    clean = not module["lost"] and not module["overlaps"] and not module["errors"]
    lines.append("- zero lost updates and overlaps: %s" % ("PASS" if clean else "FAIL"))
    return "\n".join(lines)


def machine(admin, module_path, nproc, pin):
    info = admin.info("server")
    allocator = admin.info("memory").get("mem_allocator", "")
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import redis_lock
        redis_lock_version = redis_lock.__version__
    except ImportError:
        redis_lock_version = "not installed"
    try:
        import hiredis
        hiredis_version = hiredis.__version__
    except ImportError:
        hiredis_version = "not installed (pure-Python parser)"
    try:
        commit = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h %cI"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if commit and dirty:
            commit += " (with uncommitted changes)"
    except (OSError, subprocess.SubprocessError):
        commit = ""
    if module_path:
        built = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(os.path.getmtime(module_path)))
        versions = {m.get(b"name"): m.get(b"ver") for m in admin.module_list()}
        module = "%s (built %s; MODULE LIST: lock version %s)" % (
            os.path.relpath(module_path, REPO) if module_path.startswith(REPO + os.sep) else module_path,
            built, versions.get(b"lock", "?"))
    else:
        module = "not loaded"
    return [
        ("date", time.strftime("%Y-%m-%dT%H:%M:%S%z")),
        ("nproc", str(nproc)),
        ("CPU", cpu),
        ("kernel", platform.release()),
        ("redis-server", "%s (%s, %s)" % (info.get("redis_version"), info.get("executable", ""), allocator)),
        ("placement", "--pin %s" % pin),
        ("module", module),
        ("repo HEAD", commit or "unknown"),
        ("Python", platform.python_version()),
        ("redis-py", redis.__version__),
        ("hiredis", hiredis_version),
        ("python-redis-lock", redis_lock_version),
    ]


def command_line():
    argv0 = sys.argv[0]
    try:
        rel = os.path.relpath(os.path.abspath(argv0))
        if not rel.startswith(".."):
            argv0 = rel
    except ValueError:
        pass
    return shlex.join(["python", argv0] + sys.argv[1:])


def _finite(x):
    return x if math.isfinite(x) else 0


def plot(cells, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    contenders = list(dict.fromkeys(c["contender"] for c in cells))
    clients = sorted(set(c["clients"] for c in cells))
    by = {(c["contender"], c["clients"]): c for c in cells}
    panels = (
        ("rate", "Critical sections per second\n(higher is better)", "sections/s"),
        ("p99", "p99 wait for the lock\n(lower is better)", "ms (log scale)"),
        ("jain", "Jain's fairness index\n(1 = every client served equally)", "index"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 4.8))
    width = 0.8 / max(1, len(contenders))
    for ax, (key, title, ylabel) in zip(axes, panels):
        for i, name in enumerate(contenders):
            xs = [j + (i - (len(contenders) - 1) / 2) * width for j in range(len(clients))]
            ys = [_finite(by[(name, n)][key]) if (name, n) in by else 0 for n in clients]
            ax.bar(xs, ys, width, label=name)
        ax.set_xticks(range(len(clients)))
        ax.set_xticklabels(["%d client%s" % (n, "" if n == 1 else "s") for n in clients])
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    if any(_finite(c["p99"]) > 0 for c in cells):
        axes[1].set_yscale("log")
    axes[2].set_ylim(0, 1.05)
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def placement(args):
    if args.pin == "split":
        return ("redis-server is pinned to the first CPU and the clients (and this script) to "
                "the others (`--pin split`).")
    return "Processes are placed by the scheduler (`--pin none`)."


def write_doc(path, cells, args, facts, notes):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    png = os.path.splitext(path)[0] + ".png"
    plot(cells, png)
    lines = [
        "# Lock contention benchmark",
        "",
        "Produced by `bench/lock_bench.py` (wrapper: `bench/run.sh`, `make bench`). Command line:",
        "",
        "```",
        command_line(),
        "```",
        "",
        "Each cell: N client processes (one connection each; `redisson` also keeps one pub/sub "
        "connection) loop for %g s on lock `%s`, with no pause between a release and the next acquire. "
        "Critical section: `INCR %s` (must be 1) + `GET %s` in one round trip, then "
        "`SET %s <value+1>` + `DECR %s` (must be 0) in another, then release. Lease %d ms and wait "
        "timeout %d ms for every contender. %s"
        % (args.seconds, LOCK, INSIDE, COUNTER, COUNTER, INSIDE, LEASE_MS, WAIT_MS, placement(args)),
        "",
        "Columns: *sections/s*: critical sections completed per second: each cell is run %d time(s), "
        "in rounds, and the row shows the run with the median rate among its quiet runs (see Noise "
        "below), their range in brackets; the other columns are from that run, except lost updates "
        "and overlaps, which are summed over every run. *wait*: from the start of "
        "the acquire call to the grant, retries after timeouts included, over every acquisition "
        "(a lock that lets the releasing client re-acquire at once gets many near-zero waits, so "
        "for it read p99 with *max* and *Jain*: its starved clients are a few slow samples). "
        "*Jain*: (sum x)^2 / (n * sum x^2) over per-client section counts (1 = all equal). "
        "*timeouts*: acquire calls that gave up after the 10 s wait. *cmds/section*: commands the "
        "server processed per critical section, the 4 of the critical section included (commands "
        "inside a Lua script count; pub/sub deliveries do not)." % args.repeat,
        "",
        table(cells),
        "",
        "![sections/s and p99 wait](%s)" % os.path.basename(png),
        "",
        target_check(cells),
        "",
        noise(cells),
        "",
        "## Correctness",
        "",
    ]
    if notes:
        lines += ["- " + n for n in notes]
    else:
        lines.append("Every cell: zero lost updates, zero overlap violations, no errors.")
    lines += ["", "## Machine", "", "| | |", "|---|---|"]
    lines += ["| %s | %s |" % (k, v) for k, v in facts]
    lines += [
        "",
        "Clients and server run on the same machine: with `--pin split` the N client processes "
        "share the CPUs the server does not have, so a protocol that wakes every waiter on each "
        "release pays for it in client CPU. The figures compare contenders on one machine, not "
        "absolute capacity.",
        "",
        "## Contenders",
        "",
        "- `module`: `LOCK.ACQUIRE %s <owner> %d WAIT %d` (retried only when it times out with an "
        "integer reply), `LOCK.RELEASE %s <owner>`." % (LOCK, LEASE_MS, WAIT_MS, LOCK),
        "- `redisson`: Redisson RLock's protocol: `tryLockInnerAsync` via EVALSHA (owner "
        "`<uuid>:<thread>`), then `tryLock`'s loop: on a ttl reply, wait on the unlock channel "
        "`%s` for min(ttl, remaining wait) and retry; `unlockInnerAsync` (publishes `0`). As Redisson "
        "does with a shared subscription, each client subscribes once and keeps it, so no "
        "SUBSCRIBE/UNSUBSCRIBE round trips are paid per wait (this favours `redisson`); permits "
        "left from before a wait are dropped, as a new RedissonLockEntry starts at zero." % REDISSON_CHANNEL,
        "- `redis-py`: `Redis.lock(name, timeout=10, blocking_timeout=10)`: SET NX PX, polling with "
        "the default 0.1 s sleep; release by a Lua script.",
        "- `python-redis-lock`: `redis_lock.Lock(conn, name, expire=10).acquire(blocking=True, "
        "timeout=10)`: GET (already held?), SET NX EX, BLPOP on a signal list; release by a Lua "
        "script that pushes the signal.",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return png


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

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
    p.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks.md"),
                   help="markdown report to write; the plot goes beside it as .png "
                        "(default docs/benchmarks.md; '-' to write none)")
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
        print("\nwrote %s and %s" % (args.out, png), file=sys.stderr)
    bad = any(c["lost"] or c["overlaps"] or c["errors"] or c["empty_runs"] for c in cells)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
