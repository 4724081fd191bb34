"""The file-size gate: no source file over MAX_LINES lines, tests included.

Source files are those of sources.py (Rust, Python, Java, shell, Lua...,
Makefiles and scripts). A file may be left out only by being listed below
with the reason; a listed file that is gone, or back under the limit, fails
the gate until it is taken off the list.

Usage: python scripts/gates/sizes.py [REPO]
"""

import sys
from pathlib import Path

from sources import source_files

MAX_LINES = 800

# Generated files: none yet.
GENERATED: dict[str, str] = {}

# Files over the limit that another change is replacing; the gate fails once
# one is gone or within the limit, until its entry here is removed.
PENDING: dict[str, str] = {}


def lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def check(repo: Path) -> list[str]:
    problems = []
    files = source_files(repo)
    for name in files:
        n = lines(repo / name)
        if n > MAX_LINES and name not in GENERATED and name not in PENDING:
            problems.append(f"{name} has {n} lines (at most {MAX_LINES}): split it by topic")
    for name, why in {**GENERATED, **PENDING}.items():
        if name not in files:
            problems.append(f"{name} is left out ({why}) but is gone")
        elif lines(repo / name) <= MAX_LINES:
            problems.append(f"{name} is left out ({why}) but is within {MAX_LINES} lines now")
    return problems


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    problems = check(repo)
    for p in problems:
        print(f"sizes: {p}")
    if problems:
        print(f"sizes: FAILED ({len(problems)})")
        return 1
    left_out = ", ".join(sorted({**GENERATED, **PENDING}))
    print(f"sizes: every source file within {MAX_LINES} lines (left out: {left_out or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
