"""Exclusion with Redisson's Lua scripts and with the Rust crate, both ways."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import redis

from harness import REDISSON, ROOT, Server
from redis_lock_client import LockClient

TRY_LOCK = (REDISSON / "try-lock-hincrby.lua").read_text()
UNLOCK = (REDISSON / "unlock.lua").read_text()


def test_redisson_scripts_and_this_client_exclude_each_other(r: redis.Redis) -> None:
    locks = LockClient(r)
    # Redisson first: the client is excluded, then waits and gets it.
    assert r.eval(TRY_LOCK, 1, "i:lock", 30000, "redisson-uuid:1") is None
    assert locks.try_lock("i:lock", 0) is None
    assert (
        r.eval(UNLOCK, 2, "i:lock", "redisson_lock__channel:{i:lock}", 0, 30000, "redisson-uuid:1")
        == 1
    )
    g = locks.try_lock("i:lock", 0)
    assert g is not None
    # The client first: Redisson's script answers the remaining lease.
    pttl = r.eval(TRY_LOCK, 1, "i:lock", 30000, "redisson-uuid:1")
    assert isinstance(pttl, int) and pttl > 0
    g.unlock()
    assert not r.exists("i:lock")


def test_an_owner_shared_with_redisson_reenters_both_ways(r: redis.Redis) -> None:
    shared = LockClient(r).as_owner("redisson-uuid:7")
    g = shared.lock("i:shared")
    assert r.eval(TRY_LOCK, 1, "i:shared", 30000, "redisson-uuid:7") is None
    assert r.hget("i:shared", "redisson-uuid:7") == b"2"
    assert (
        r.eval(
            UNLOCK, 2, "i:shared", "redisson_lock__channel:{i:shared}", 0, 30000, "redisson-uuid:7"
        )
        == 0
    )
    g.unlock()
    assert not r.exists("i:shared")


def rust_example() -> Path:
    exe = ROOT / "target/release/examples/watchdog"
    if not exe.exists():
        # --workspace: the features `cargo test` builds with (Cargo resolves
        # shared dependencies' features over the packages it builds), so this
        # shares its build instead of compiling the client a second time.
        subprocess.run(
            [
                "cargo",
                "build",
                "--release",
                "-q",
                "--workspace",
                "--example",
                "watchdog",
            ],
            cwd=ROOT,
            check=True,
            env={
                **os.environ,
                "PATH": os.path.expanduser("~/.cargo/bin:") + os.environ.get("PATH", ""),
            },
        )
    return exe


def test_the_rust_crate_and_this_client_exclude_each_other(server: Server, r: redis.Redis) -> None:
    name = "example:watchdog"  # the lock the Rust example takes
    locks = LockClient(r)
    mine = locks.lock(name)
    rust = subprocess.Popen(
        [str(rust_example()), server.url()],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert rust.stdout is not None
    try:
        # The Rust client waits in the queue behind this one.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not locks.info(name)["waiters"]:
            time.sleep(0.01)
        assert len(locks.info(name)["waiters"]) == 1
        mine.unlock()
        line = rust.stdout.readline()
        assert line.startswith(f"locked {name} as "), line
        rust_owner = line.split(" as ", 1)[1].strip()
        assert r.hget(name, rust_owner) == b"1"
        # Now this client is excluded, and waits until the Rust side's
        # operator forces the lock (after 3.5 s), then gets it.
        assert locks.try_lock(name, 0) is None
        g = locks.try_lock(name, 10.0)
        assert g is not None
        g.unlock()
        out, _ = rust.communicate(timeout=10)
        assert rust.returncode == 0, out
    finally:
        rust.kill()
        rust.wait()
