"""Generates the threaded client (``redis_lock_client/_sync``) from the
asyncio one (``_async``), so the logic is written and fixed once (as
httpcore's scripts/unasync.py and psycopg's tools/async_to_sync.py do).
``redis_lock_client/_async/_io.py`` and ``redis_lock_client/_sync/_io.py``
are written by hand: they are where threads and tasks really differ.

    python python/scripts/unasync.py          # rewrite _sync/
    python python/scripts/unasync.py --check  # fail if _sync/ is stale (make lint)

The rewrite is textual: ``async def`` / ``async with`` / ``async for`` lose
``async``, ``await`` goes, ``__aenter__`` / ``__aexit__`` become
``__enter__`` / ``__exit__``, ``AsyncName`` becomes ``Name``; a comment line
``# sync: <code>`` becomes ``<code>`` (a line only the threaded client
has). Module docstrings, comment lines, the docstrings of the engine's
modules and of private functions stay in the source (the API keeps its
docstrings). The result is formatted with ruff.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "redis_lock_client"
SOURCE, TARGET = PACKAGE / "_async", PACKAGE / "_sync"
HAND_WRITTEN = {"_io.py"}
# Modules of the engine, not of the API: their twins keep no docstrings.
INTERNAL = {"acquire.py", "counted.py", "engine.py", "tracking.py", "waiting.py", "watchdog.py"}

RULES = [
    (re.compile(r"^(\s*)# sync: (.*)$"), r"\1\2"),
    (re.compile(r"\ban ``async with``"), "a ``with``"),
    (re.compile(r"\basync (def|with|for)\b"), r"\1"),
    (re.compile(r"\bawait "), ""),
    (re.compile(r"\b__aenter__\b"), "__enter__"),
    (re.compile(r"\b__aexit__\b"), "__exit__"),
    (re.compile(r"\b(_?)Async([A-Z]\w*)"), r"\1\2"),
    (re.compile(r"\bredis\.asyncio\."), "redis."),
]


def unasync(text: str, source: str) -> str:
    tree = ast.parse(text)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        name = getattr(node, "name", "")
        private = name.startswith("_") and not name.endswith("__")
        if isinstance(node, ast.Module) or source in INTERNAL or private:
            first = node.body[0]
            alone = len(node.body) == 1 and not isinstance(node, ast.Module)
            if ast.get_docstring(node, clean=False) is not None and not alone:
                skip.update(range(first.lineno, (first.end_lineno or 0) + 1))
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if number in skip or (line.lstrip().startswith("#") and "# sync: " not in line):
            continue  # the module's docstring and the comments are the source's
        for pattern, replacement in RULES:
            line = pattern.sub(replacement, line)
        lines.append(line)
    header = f'"""Generated from ``_async/{source}`` by ``scripts/unasync.py``: do not edit."""\n'
    return header + "\n".join(lines) + "\n"


def ruff_format(text: str, name: str) -> str:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        sys.exit("unasync: ruff is needed to format the generated files")
    done = subprocess.run(
        [ruff, "format", "--stdin-filename", str(TARGET / name), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=PACKAGE.parents[1],
    )
    if done.returncode != 0:
        sys.exit(f"unasync: ruff could not format {name}: {done.stderr}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if _sync/ is stale")
    check = parser.parse_args().check
    stale = []
    wanted = set(HAND_WRITTEN)
    for src in sorted(SOURCE.glob("*.py")):
        if src.name in HAND_WRITTEN:
            continue
        wanted.add(src.name)
        out = ruff_format(unasync(src.read_text(), src.name), src.name)
        dst = TARGET / src.name
        if not dst.exists() or dst.read_text() != out:
            stale.append(dst.name)
            if not check:
                dst.write_text(out)
    extra = sorted(p.name for p in TARGET.glob("*.py") if p.name not in wanted)
    for name in extra:
        stale.append(name)
        if not check:
            (TARGET / name).unlink()
    if check and stale:
        sys.exit(
            f"unasync: _sync/ is stale ({', '.join(stale)}): run python python/scripts/unasync.py"
        )
    if not check:
        print(f"unasync: {len(stale)} file(s) rewritten" if stale else "unasync: up to date")


if __name__ == "__main__":
    main()
