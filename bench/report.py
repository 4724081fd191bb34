"""The report of the lock contention benchmark: the results table, the
target check at 8 clients, the noise and correctness notes, the machine
facts, the plot, and the markdown document that holds them all.
"""

import math
import os
import platform
import shlex
import subprocess
import sys
import time

import redis

from contenders import COUNTER, INSIDE, LEASE_MS, LOCK, REDISSON_CHANNEL, WAIT_MS
from harness import NOISY, NOISY_RERUNS, quiet

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def ratios(cells, baseline="redisson"):
    """Same-run ratios, which carry over between machines better than absolute
    rates: each contender's sections/s against `baseline`'s at the same client
    count, and against its own 1-client figure, all from this one run."""
    by = {(c["contender"], c["clients"]): c for c in cells}

    def ratio(a, b):
        if not b or not b["rate"] or not math.isfinite(b["rate"]):
            return "-"
        return "%.2fx" % (a["rate"] / b["rate"])

    lines = [
        "| contender | clients | sections/s | vs %s, same clients | vs its own 1 client |" % baseline,
        "|---|---:|---:|---:|---:|",
    ]
    for c in cells:
        lines.append("| %s | %d | %.0f | %s | %s |" % (
            c["contender"], c["clients"], c["rate"],
            ratio(c, by.get((baseline, c["clients"]))),
            ratio(c, by.get((c["contender"], 1)))))
    return "\n".join(lines)


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
    date = dict(facts).get("date", "an unknown date")
    lines = [
        "# Lock contention benchmark",
        "",
        "Recorded on %s (machine below) by `bench/lock_bench.py`; `make bench` runs it through "
        "`bench/run.sh` and writes the report to `.cache/bench/benchmarks.md` (untracked). "
        "`docs/performance.md` (\"The recorded run\") keeps a copy of one such run as the reference. "
        "Command line:" % date,
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
        "## Same-run ratios",
        "",
        "Absolute rates depend on the machine: mostly on the round-trip time between clients "
        "and server, and on how many cores the client processes share. The ratios below compare "
        "figures from this same run, so they carry over better: each contender against "
        "Redisson's protocol at the same client count, and against its own 1-client rate "
        "(how it scales under contention).",
        "",
        ratios(cells),
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
