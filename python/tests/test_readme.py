"""The repository README's Python start runs as printed, against a throw-away
server: its one `redis.Redis()` is pointed at the test server's port."""

from __future__ import annotations

import re
import subprocess
import sys

from harness import ROOT, Server


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_readme_python_start_runs(server: Server) -> None:
    blocks = readme_python_blocks()
    assert len(blocks) == 1, blocks
    code = blocks[0]
    assert code.startswith("import redis\n"), "the start shows its imports"
    assert code.count("redis.Redis()") == 1, code
    pointed = code.replace("redis.Redis()", f"redis.Redis(port={server.port})")
    done = subprocess.run(
        [sys.executable, "-c", pointed],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "locked\n", done.stdout
    assert not server.client().exists("order:42"), "released when the block ends"
