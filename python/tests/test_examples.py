"""The examples run against a throw-away server, as in CI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness import ROOT, Server

EXAMPLES = ROOT / "python" / "examples"


@pytest.mark.parametrize(
    "script, expected",
    [
        ("quickstart.py", ["locked order:42 as ", "released"]),
        ("dropin.py", ["locked report", "released: True"]),
        ("watchdog.py", ["3.5x its lease", "told after"]),
    ],
)
def test_example_runs(server: Server, script: str, expected: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), server.url()],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for text in expected:
        assert text in done.stdout, done.stdout
