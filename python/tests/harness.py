"""Real redis-server processes with the module, and a TCP proxy that cuts
connections at chosen moments (for the retry tests)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[2]
MODULE = os.environ.get("LOCK_MODULE_PATH") or str(ROOT / "target/release/libredis_lock.so")
SERVER = os.environ.get("REDIS_SERVER") or "redis-server"
REDISSON = ROOT / "redisson"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A redis-server on a free loopback port with the lock module."""

    def __init__(self, *args: str, module: bool = True) -> None:
        if not Path(MODULE).exists():
            raise RuntimeError(f"{MODULE} is missing: run `make build` first")
        self.dir = tempfile.mkdtemp(prefix="rlc-test-")
        self.args = list(args)
        self.module = module
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        for _ in range(5):
            self.port = free_port()
            cmd = [
                SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.dir,
                "--save",
                "",
                "--appendonly",
                "no",
                "--logfile",
                "server.log",
                "--enable-debug-command",
                "yes",
            ]
            if self.module:
                cmd += ["--loadmodule", MODULE]
            cmd += self.args
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    redis.Redis(port=self.port, socket_timeout=1).ping()
                    return
                except redis.exceptions.ConnectionError:
                    time.sleep(0.02)
            self.stop()
        log = Path(self.dir, "server.log")
        raise RuntimeError(f"{SERVER} did not start: {log.read_text() if log.exists() else ''}")

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/"

    def client(self, **kw: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **kw)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Proxy:
    """Forwards 127.0.0.1:<port> to a server. ``cut_after(word)`` makes the
    proxy forward the next command containing ``word`` to the server, then
    close the client's side without passing the reply on (the command ran,
    its reply is lost); ``cut_before(word)`` closes without forwarding it
    (it never ran); ``hold(word)`` forwards it and keeps the reply back until
    ``release_held()``."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.rule: tuple[str, bytes] | None = None
        self.fired = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _arm(self, kind: str, word: str) -> None:
        with self.lock:
            self.fired.clear()
            self.rule = (kind, word.encode())

    def cut_after(self, word: str) -> None:
        self._arm("after", word)

    def cut_before(self, word: str) -> None:
        self._arm("before", word)

    def hold(self, word: str) -> None:
        self.release.clear()
        self._arm("hold", word)

    def release_held(self) -> None:
        self.release.set()

    def _take(self, data: bytes) -> str | None:
        with self.lock:
            if self.rule is not None and self.rule[1] in data:
                kind = self.rule[0]
                self.rule = None
                return kind
        return None

    def _accept(self) -> None:
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()
                continue
            threading.Thread(target=self._pipe, args=(c, s), daemon=True).start()

    def _pipe(self, c: socket.socket, s: socket.socket) -> None:
        cut: str | None = None
        try:
            while True:
                ready, _, _ = select.select([c, s], [], [], 0.5)
                if self.closed:
                    return
                for r in ready:
                    data = r.recv(65536)
                    if not data:
                        return
                    if r is c:
                        kind = self._take(data)
                        if kind == "before":
                            self.fired.set()
                            return
                        s.sendall(data)
                        if kind is not None:
                            cut = kind
                    else:
                        if cut == "after":
                            self.fired.set()
                            return  # the reply is dropped, both sides closed
                        if cut == "hold":
                            self.held.set()
                            self.fired.set()
                            self.release.wait(30)
                            cut = None
                        c.sendall(data)
        except OSError:
            return
        finally:
            for x in (c, s):
                try:
                    x.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        self.sock.close()


def wait_until(cond: Callable[[], bool], timeout: float = 5.0, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())
