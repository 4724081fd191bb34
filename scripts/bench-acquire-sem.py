"""Server-side cost of a semaphore acquire + release, the module against
Redisson's scripts through EVALSHA (run by scripts/bench-acquire.sh against
its server; plain python3, no packages: a small RESP client below).

Two pairs, on one key each, in steady state (a batch of B acquires, then
their B releases, repeated until N pairs):

  semaphore  LOCK.SEMACQUIRE name 1 / LOCK.SEMRELEASE name 1 against
             RedissonSemaphore's tryAcquire / release scripts
             (redisson/sem-try-acquire.lua, sem-release.lua); the value is
             set to B permits first, so every acquire succeeds.
  permits    LOCK.PERMITACQUIRE name 1 LEASE 30000 / LOCK.PERMITRELEASE name id
             against RedissonPermitExpirableSemaphore's tryAcquire (with a
             lease) / tryRelease(id) scripts (permit-try-acquire.lua,
             permit-release.lua; the id as 16 raw bytes, as Redisson sends it).

Each batch is one pipeline; INFO commandstats is read before and after each
phase, so an EVALSHA acquire and an EVALSHA release are told apart. The
figure is usec per call (usec / calls of the phase's command over the run);
each pair of contenders runs REPEAT times, interleaved, and the median run is
shown. Nothing is asserted: the issue's target is acquire + release at most
0.5x the scripts' and the ratio is printed.

Usage: python3 scripts/bench-acquire-sem.py PORT [N] [REPEAT] [BATCH]
"""

import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REDISSON = os.path.join(HERE, "..", "redisson")
NON_EXPIRABLE = 922337203685477
LEASE_MS = 30000


class Resp:
    """A minimal RESP2 client: pipelined commands, replies parsed in order."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, int):
                a = b"%d" % a
            elif isinstance(a, str):
                a = a.encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def pipeline(self, commands):
        self.sock.sendall(b"".join(self.encode(c) for c in commands))
        return [self.read() for _ in commands]

    def call(self, *args):
        return self.pipeline([args])[0]

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError("bad RESP line %r" % line)


def stats(r, name):
    """(calls, usec) of one command in INFO commandstats."""
    text = r.call("INFO", "commandstats").decode()
    for line in text.splitlines():
        if line.startswith("cmdstat_%s:" % name):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return int(fields["calls"]), int(fields["usec"]), int(fields.get("failed_calls", 0))
    return 0, 0, 0


def script(r, name):
    with open(os.path.join(REDISSON, name), encoding="utf-8") as f:
        return r.call("SCRIPT", "LOAD", f.read()).decode()


class Phase:
    """usec and calls of one command over the phases run through it."""

    def __init__(self, stat):
        self.stat, self.calls, self.usec = stat, 0, 0

    def run(self, r, commands):
        c0, u0, f0 = stats(r, self.stat)
        replies = r.pipeline(commands)
        c1, u1, f1 = stats(r, self.stat)
        bad = [x for x in replies if isinstance(x, Exception)]
        if bad or f1 != f0:
            raise SystemExit("error: %s: %s (failed_calls %d)" % (self.stat, bad[:1], f1 - f0))
        self.calls += c1 - c0
        self.usec += u1 - u0
        return replies

    def per_call(self):
        return self.usec / self.calls if self.calls else float("nan")


def sem_module(r, name, n, batch):
    r.call("DEL", name)
    r.call("LOCK.SEMSET", name, batch)
    acq, rel = Phase("lock.semacquire"), Phase("lock.semrelease")
    for _ in range(n // batch):
        got = acq.run(r, [("LOCK.SEMACQUIRE", name, 1)] * batch)
        if got != [1] * batch:
            raise SystemExit("error: LOCK.SEMACQUIRE did not take a free permit: %r" % got[:3])
        rel.run(r, [("LOCK.SEMRELEASE", name, 1)] * batch)
    return acq.per_call(), rel.per_call()


def sem_redisson(r, name, n, batch, shas):
    r.call("DEL", name)
    r.call("SET", name, batch)
    channel = "redisson_sc:{%s}" % name
    acq, rel = Phase("evalsha"), Phase("evalsha")
    for _ in range(n // batch):
        got = acq.run(r, [("EVALSHA", shas["sem-try-acquire"], 1, name, 1)] * batch)
        if got != [1] * batch:
            raise SystemExit("error: Redisson's tryAcquire did not take a free permit: %r" % got[:3])
        rel.run(r, [("EVALSHA", shas["sem-release"], 2, name, channel, 1, "PUBLISH")] * batch)
    return acq.per_call(), rel.per_call()


def permit_module(r, name, n, batch):
    r.call("DEL", name, "{%s}:timeout" % name)
    r.call("LOCK.SEMSET", name, batch)
    acq, rel = Phase("lock.permitacquire"), Phase("lock.permitrelease")
    for _ in range(n // batch):
        got = acq.run(r, [("LOCK.PERMITACQUIRE", name, 1, "LEASE", LEASE_MS)] * batch)
        if any(not isinstance(ids, list) or len(ids) != 1 for ids in got):
            raise SystemExit("error: LOCK.PERMITACQUIRE did not take a free permit: %r" % got[:3])
        rel.run(r, [("LOCK.PERMITRELEASE", name, ids[0]) for ids in got])
    return acq.per_call(), rel.per_call()


def permit_redisson(r, name, n, batch, shas):
    timeouts, channel = "{%s}:timeout" % name, "redisson_sc:{%s}" % name
    r.call("DEL", name, timeouts)
    r.call("SET", name, batch)
    acq, rel = Phase("evalsha"), Phase("evalsha")
    for _ in range(n // batch):
        now = int(time.time() * 1000)
        ids = [os.urandom(16) for _ in range(batch)]
        got = acq.run(r, [("EVALSHA", shas["permit-try-acquire"], 3, name, timeouts, channel,
                           1, now + LEASE_MS, now, NON_EXPIRABLE, "PUBLISH", i) for i in ids])
        if got != [b"OK"] * batch:
            raise SystemExit("error: Redisson's permit tryAcquire did not take a free permit: %r" % got[:3])
        now = int(time.time() * 1000)
        got = rel.run(r, [("EVALSHA", shas["permit-release"], 3, name, channel, timeouts,
                           i, 1, now, "PUBLISH") for i in ids])
        if got != [1] * batch:
            raise SystemExit("error: Redisson's tryRelease(id) did not release: %r" % got[:3])
    return acq.per_call(), rel.per_call()


def median_run(pairs):
    """The run whose acquire + release is the median."""
    ordered = sorted(pairs, key=sum)
    return ordered[(len(ordered) - 1) // 2]


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    r = Resp(port)
    shas = {s: script(r, s + ".lua") for s in
            ("sem-try-acquire", "sem-release", "permit-try-acquire", "permit-release")}
    runs = {k: [] for k in ("sem-module", "sem-redisson", "permit-module", "permit-redisson")}
    for _ in range(repeat):
        runs["sem-module"].append(sem_module(r, "sem:bench", n, batch))
        runs["sem-redisson"].append(sem_redisson(r, "sem:bench", n, batch, shas))
        runs["permit-module"].append(permit_module(r, "permit:bench", n, batch))
        runs["permit-redisson"].append(permit_redisson(r, "permit:bench", n, batch, shas))
    print()
    print("## semaphore and permits: acquire + release on one key (N=%d pairs, batches of %d, "
          "%d runs, median by acquire + release)" % (n, batch, repeat))
    print()
    print("| pair | module acquire | module release | module sum | Redisson acquire | "
          "Redisson release | Redisson sum | module / Redisson |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = {}
    for kind, label, cmds in (("sem", "semaphore", "LOCK.SEMACQUIRE / LOCK.SEMRELEASE"),
                              ("permit", "permit, LEASE 30000", "LOCK.PERMITACQUIRE / LOCK.PERMITRELEASE")):
        m = median_run(runs[kind + "-module"])
        s = median_run(runs[kind + "-redisson"])
        ratios[kind] = sum(m) / sum(s)
        print("| %s (%s) | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2fx** |"
              % (label, cmds, m[0], m[1], sum(m), s[0], s[1], sum(s), ratios[kind]))
    print()
    print("usec_per_call, server-side (INFO commandstats). Runs (acquire+release sums): "
          + "; ".join("%s %s" % (k, " ".join("%.2f" % sum(x) for x in v)) for k, v in runs.items()))
    print()
    # The runs of a pair alternate in one server, so each run's module sum
    # over the Redisson sum right after it moves less with the machine's load.
    for kind, label in (("sem", "semaphore"), ("permit", "permit")):
        paired = sorted(sum(m) / sum(s) for m, s in zip(runs[kind + "-module"], runs[kind + "-redisson"]))
        print("%s acquire+release / Redisson scripts: %.2fx (target <= 0.5x); per run, paired: "
              "median %.2fx, range %.2f-%.2f"
              % (label, ratios[kind], paired[(len(paired) - 1) // 2], paired[0], paired[-1]))


if __name__ == "__main__":
    main()
