"""The harness of the lock contention benchmark: a throw-away redis-server,
one cell (a contender at N clients: fork the client processes, start them
together, collect and check their results) and the noise handling (how busy
the rest of the machine was, which repeat of a cell is shown).
"""

import array
import math
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import redis

from contenders import CONN, COUNTER, INSIDE, WAIT_MS, client_process


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
