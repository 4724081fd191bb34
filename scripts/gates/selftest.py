"""The gates' self-test: each gate must fail on a violation planted in a
copy of the tree (made in a temporary folder; the tree is never touched).
`make lint-gates` runs it before the gates themselves run on the tree.

The layering plants are made from layers.toml, so a new layout needs no
change here: across every pair of neighbouring floors of each crate, the
lower floor's first file imports the upper floor's first file (by a `use`,
by a path in the code, by a `use` group, in turn); two files of one floor
import each other; a new file is on no floor; the table knows a circle the
code does not have. A small crate written here checks how imports are read
(re-exports, `super::`, inline modules, comments and strings).

Usage: python scripts/gates/selftest.py [REPO]   (cargo on PATH)
"""

import itertools
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import comment_paths
import layers
import rustdoc
import sizes
from rust_imports import Crate
from sources import tracked_files

Edit = Callable[[Path], object]


class Plant(NamedTuple):
    what: str
    gate: Callable[[Path], list[str]]
    edits: list[Edit]
    expect: str  # a fragment one of the gate's problems must contain


def appending(name: str, text: str) -> Edit:
    def edit(copy: Path) -> None:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        with open(copy / name, "a") as f:
            f.write(text)

    return edit


def emptying(name: str) -> Edit:
    return lambda copy: (copy / name).write_text("\n")


def module_path(file: str) -> str:
    """`ffi/context.rs` -> `crate::ffi::context`; `ffi/mod.rs` -> `crate::ffi`."""
    parts = file.removesuffix(".rs").split("/")
    return "::".join(["crate", *(parts[:-1] if parts[-1] in ("mod", "lib") else parts)])


def layer_plants(repo: Path) -> list[Plant]:
    table = tomllib.loads((repo / layers.TABLE).read_text())
    known = {f for circle in table.pop("known circle", []) for f in circle["files"]}
    forms = [
        "use {m}::planted;",
        "fn planted_here() {{ {m}::planted(); }}",
        "use {m}::{{planted}};",
    ]
    plants = []
    for root, floors in table.items():
        for n, (low, high) in enumerate(itertools.pairwise(floors)):
            a, b = f"{root}/{low['files'][0]}", f"{root}/{high['files'][0]}"
            line = "\n" + forms[n % len(forms)].format(m=module_path(high["files"][0])) + "\n"
            plants.append(Plant(
                f"{root}: floor '{low['floor']}' imports floor '{high['floor']}'",
                layers.check, [appending(a, line)], f"{a} (floor '{low['floor']}') imports {b}",
            ))  # fmt: skip
        a, b = next(f["files"][:2] for f in floors if f"{root}/{f['files'][0]}" not in known
                    and len(f["files"]) > 1)  # fmt: skip
        plants.append(Plant(
            f"{root}: two files of one floor import each other", layers.check,
            [appending(f"{root}/{a}", f"\nuse {module_path(b)}::planted;\n"),
             appending(f"{root}/{b}", f"\nuse {module_path(a)}::planted;\n")],
            "an import circle",
        ))  # fmt: skip
        plants.append(Plant(
            f"{root}: a new file on no floor", layers.check,
            [appending(f"{root}/planted.rs", "\n"),
             appending(f"{root}/lib.rs", "\nmod planted;\n")],
            f"{root}/planted.rs is on no floor",
        ))  # fmt: skip
    circle = '\n[["known circle"]]\nfiles = ["src/lib.rs", "src/errors.rs"]\nwhy = "planted"\n'
    plants.append(Plant(
        "the table knows a circle the code does not have", layers.check,
        [appending(layers.TABLE, circle)], "knows a circle the code does not have as listed",
    ))  # fmt: skip
    return plants


def other_plants(repo: Path) -> list[Plant]:
    big = "".join(f"// line {i}\n" for i in range(sizes.MAX_LINES + 1))
    plants = [
        Plant("a Java file over the limit", sizes.check,
              [appending("java/Planted.java", big)], "java/Planted.java has"),
        Plant("a test file over the limit", sizes.check,
              [appending("tests/planted.rs", big)], "tests/planted.rs has"),
        Plant("a Rust comment names a gone file", comment_paths.check,
              [appending("src/lib.rs", "\n// See `src/planted_gone.rs`.\n")], "planted_gone.rs"),
        Plant("a Makefile comment names a gone script", comment_paths.check,
              [appending("Makefile", "\n# See `scripts/planted-gone.sh`.\n")], "planted-gone.sh"),
        Plant("a Python comment names a gone file", comment_paths.check,
              [appending("scripts/gates/sizes.py", "\n# See `planted_gone.py`.\n")],
              "planted_gone.py"),
        Plant("a Java comment names a gone folder", comment_paths.check,
              [appending("java/Planted.java", "/** See `java/planted/`. */\nclass Planted {}\n")],
              "java/planted/"),
        # Documented alone (the workspace's other crates are the real run's),
        # and building on the tree's target/ so that only this crate is new.
        Plant("a broken doc link on a private item",
              lambda c: rustdoc.check(c, repo / "target", package="redis-lock-test-support"),
              [appending("test-support/src/reply.rs",
                         "\n/// Planted: [`NoSuchItem`].\n#[allow(dead_code)]\nfn planted() {}\n")],
              "NoSuchItem"),
    ]  # fmt: skip
    for name in [n for n in sizes.PENDING if (repo / n).exists()][:1]:
        plants.append(Plant(
            f"{name} left out but within the limit", sizes.check,
            [emptying(name)], "lines now",
        ))  # fmt: skip
    return plants


# A small crate, and the arrows the reader must see in it (no others).
READER_CRATE = {
    "lib.rs": "mod a;\nmod b;\nmod c;\npub use c::Thing;\n// use crate::a::x;\n",
    "a.rs": 'use crate::Thing;\nconst S: &str = "crate::b::nothing";\n',
    "b/mod.rs": "mod inner;\npub use inner::Deep;\npub(crate) fn helper() {}\n",
    "b/inner.rs": "pub struct Deep;\nfn f() { super::helper(); }\n"
    "#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    "c.rs": "pub struct Thing;\nfn g() { let _ = crate::b::Deep; }\n/* use crate::a::y; */\n",
}
READER_ARROWS = {("a.rs", "c.rs"), ("b/inner.rs", "b/mod.rs"), ("c.rs", "b/inner.rs")}


def check_reader(into: Path) -> str | None:
    root = into / "reader" / "src"
    for name, text in READER_CRATE.items():
        appending(name, text)(root)
    seen = {(str(a.relative_to(root)), str(b.relative_to(root))) for a, b in Crate(root).arrows()}
    return None if seen == READER_ARROWS else f"read {sorted(seen)}, not {sorted(READER_ARROWS)}"


def copy_of(repo: Path, into: Path) -> Path:
    """The tree's files (tracked, and untracked but not ignored), in a git
    repository of their own."""
    copy = into / "tree"
    for name in tracked_files(repo):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, copy / name)
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    return copy


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    failed = 0
    with tempfile.TemporaryDirectory(prefix="gates-selftest-") as tmp:
        wrong = check_reader(Path(tmp))
        failed += wrong is not None
        print(f"selftest: {'FAILED' if wrong else 'ok'}: the import reader, on a small crate")
        if wrong:
            print(f"selftest:   {wrong}")
        for n, plant in enumerate(layer_plants(repo) + other_plants(repo)):
            copy = copy_of(repo, Path(tmp) / str(n))
            for edit in plant.edits:
                edit(copy)
            problems = plant.gate(copy)
            caught = any(plant.expect in p for p in problems)
            failed += not caught
            print(f"selftest: {'ok' if caught else 'FAILED'}: {plant.what}")
            if not caught:
                print(f"selftest:   expected a problem with {plant.expect!r}; got {problems}")
            shutil.rmtree(copy)
    if failed:
        print(f"selftest: FAILED: {failed} planted violations went unnoticed")
        return 1
    print("selftest: every planted violation made its gate fail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
