"""The layering gate: every Rust file on a floor of layers.toml, no import
from a floor above, no import circle but the known ones.

Usage: python scripts/gates/layers.py [REPO]   (default: this repository)
Prints what is wrong and exits 1, or prints a one-line summary.
"""

import sys
import tomllib
from pathlib import Path

from rust_imports import Crate

TABLE = "scripts/gates/layers.toml"


def circles(nodes: list[str], arrows: dict[tuple[str, str], set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one file (Tarjan)."""
    out_of: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in arrows:
        out_of[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        for m in out_of[n]:
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in stack:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            group = []
            while True:
                m = stack.pop()
                group.append(m)
                if m == n:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for n in nodes:
        if n not in index:
            visit(n)
    return found


def check(repo: Path) -> list[str]:
    table = tomllib.loads((repo / TABLE).read_text())
    known = [sorted(c["files"]) for c in table.pop("known circle", [])]
    problems: list[str] = []
    seen_circles: list[list[str]] = []
    for root, floors in table.items():
        crate = Crate(repo / root)

        def name(p: Path) -> str:
            return str(p.relative_to(repo))

        floor_of: dict[str, int] = {}
        for level, floor in enumerate(floors):
            for f in floor["files"]:
                path = f"{root}/{f}"
                if path in floor_of:
                    problems.append(f'{TABLE}: {path} is on two floors of [["{root}"]]')
                floor_of[path] = level
                if not (repo / path).is_file():
                    problems.append(f"{TABLE}: {path} (floor '{floor['floor']}') does not exist")
        files = sorted(str(p.relative_to(repo)) for p in (repo / root).rglob("*.rs"))
        for f in files:
            if f not in floor_of:
                problems.append(
                    f'{f} is on no floor: add it to the files of one [["{root}"]] floor in {TABLE}'
                )
        unreached = set(files) - {name(p) for p in crate.code}
        for f in sorted(unreached):
            problems.append(
                f"{f} is not a module of the crate (no `mod` reaches it): delete it or declare it"
            )
        arrows = {(name(a), name(b)): names for (a, b), names in crate.arrows().items()}
        for (a, b), names in sorted(arrows.items()):
            if a in floor_of and b in floor_of and floor_of[b] > floor_of[a]:
                low, high = floors[floor_of[a]]["floor"], floors[floor_of[b]]["floor"]
                problems.append(
                    f"{a} (floor '{low}') imports {b}, on a floor above it ('{high}'): "
                    + ", ".join(sorted(names))
                )
        for group in circles(sorted(name(p) for p in crate.code), arrows):
            seen_circles.append(group)
            if group in known:
                continue
            ties = [
                f"  {a} -> {b}: {', '.join(sorted(n))}"
                for (a, b), n in sorted(arrows.items())
                if a in group and b in group
            ]
            problems.append(f"an import circle of {len(group)} files:\n" + "\n".join(ties))
    for group in known:
        if group not in seen_circles:
            problems.append(
                f"{TABLE} knows a circle the code does not have as listed (grown, shrunk, gone): "
                + ", ".join(group)
            )
    return problems


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    problems = check(repo)
    for p in problems:
        print(f"layers: {p}")
    if problems:
        print(f"layers: FAILED ({len(problems)} problems); the floors are in {TABLE}")
        return 1
    print(f"layers: every file on its floor of {TABLE}, none imports from above,")
    print("layers: no import circle but the ones the table knows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
