"""A process that ends while it holds locks, permits and a drop-in lock
exits at once, on every Python the machine has (before 3.12, starting a
thread during interpreter shutdown blocks for good), and what it held ends
on the server with its lease."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import redis_lock_client
from harness import ROOT, Server, wait_until

HOLDER = Path(__file__).with_name("exit_holder.py")


def interpreters() -> list[str]:
    """This one, and every other CPython >= 3.10 found where Debian and
    pyenv put them (one per version)."""
    found = {sys.version_info[:3]: sys.executable}
    candidates = glob.glob("/usr/bin/python3.[0-9]*") + glob.glob(
        os.path.expanduser("~/.pyenv/versions/*/bin/python3")
    )
    for exe in sorted(candidates):
        if not re.search(r"python3(\.\d+)?$", exe) or not os.access(exe, os.X_OK):
            continue
        out = subprocess.run(
            [exe, "-c", "import sys; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            continue
        version = tuple(int(x) for x in out.stdout.split())
        if version >= (3, 10, 0):
            found.setdefault(version, exe)  # type: ignore[arg-type]
    return [found[v] for v in sorted(found)]


@pytest.fixture(scope="module")
def pythonpath() -> Iterator[str]:
    """The package, and redis-py (pure Python) with what it needs, for
    interpreters other than the test's own."""
    import redis as redis_package

    site = Path(redis_package.__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="rlc-exit-") as tmp:
        for name in ("redis", "async_timeout"):
            if (site / name).exists():
                os.symlink(site / name, Path(tmp, name))
        src = Path(redis_lock_client.__file__).resolve().parents[1]
        yield os.pathsep.join([tmp, str(src)])


@pytest.mark.parametrize("ending", ["normal", "raise"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("python", interpreters())
def test_a_process_holding_everything_exits_at_once(
    server: Server, r: redis.Redis, pythonpath: str, python: str, flavour: str, ending: str
) -> None:
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
    # Keys of their own per interpreter: two of the same version (the
    # venv's and Debian's 3.11) must not wait for each other's leftovers
    # (the drop-in's lease is 30 s).
    prefix = f"exit:{flavour}:{ending}:{python}"
    proc = subprocess.Popen(
        [python, str(HOLDER), str(server.port), flavour, ending, prefix],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    told = time.monotonic()
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"{python} did not exit within 2 s: {err.decode()[-2000:]}") from None
    exited = time.monotonic() - told
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert line.strip() == b"held", err
    assert proc.returncode == (0 if ending == "normal" else 1), err
    assert exited < 2.0
    # Taken with a 1 s lease that nothing renews any more: gone within it
    # (or released at once, when the client could still do so).
    for key in (f"{prefix}:lock", f"{prefix}:rw"):
        assert wait_until(lambda key=key: not r.exists(key), 2.0), key
    assert wait_until(lambda: r.zcard(f"{{{prefix}:sem}}:timeout") == 0, 2.0)
    # The drop-in's client has the default 30 s lease: no longer renewed
    # (or released), so it ends within 30 s of the grant.
    ttl = r.pttl(f"{prefix}:dropin")
    assert ttl == -2 or 0 < ttl <= 30000
