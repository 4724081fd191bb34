"""The comment-path gate: every file a comment names exists.

What counts as naming a file: a backticked word in a comment of a source
file (see sources.py) that looks like a path, i.e. made of letters, digits,
`_`, `-`, `.` and `/`, and either ending in one of PATH_SUFFIXES (`lock.rs`,
`scripts/gates/sizes.py`, `README.md`) or being a folder, ending in `/`
(`src/ffi/`, `ffi/`). A `:line` after it (`src/lib.rs:12`) is ignored.
Globs and patterns (`*`, `{`, `<`) are not paths, and neither are URLs or
absolute paths (`/etc/...`, `~/...`). A name written without backticks is
not checked: that is the way to mention a file that is gone.

A named path exists if it does relative to the commenting file's folder or
any folder above it up to the repository's root, or to the `src/` of any
of those (the crate's sources: `lock.rs` in a test means `src/lock.rs`),
or to a Python package's folder under `python/src/`.

Usage: python scripts/gates/comment_paths.py [REPO]
"""

import re
import sys
from pathlib import Path

from sources import comments, source_files

PATH_SUFFIXES = (
    "rs", "py", "pyi", "md", "sh", "toml", "lua", "java", "txt", "patch", "png", "json", "yml",
    "yaml",
)  # fmt: skip
PATH = re.compile(
    rf"`((?:[\w.-]+/)*[\w.-]+\.(?:{'|'.join(PATH_SUFFIXES)})|(?:[\w.-]+/)+)(?::\d+(?:-\d+)?)?`"
)


def bases(repo: Path, name: str) -> list[Path]:
    """The folders a path named in file `name` may be relative to."""
    found = []
    folder = (repo / name).parent
    while True:
        found += [folder, folder / "src"]
        if folder == repo:
            break
        folder = folder.parent
    found += [p for p in (repo / "python" / "src").glob("*") if p.is_dir()]
    return found


def check(repo: Path) -> list[str]:
    problems = []
    for name in source_files(repo):
        text = (repo / name).read_text(errors="replace")
        for line, comment in comments(name, text):
            for m in PATH.finditer(comment):
                path = m.group(1)
                if path.startswith(("/", "~", ".")) and not path.startswith(("./", "../")):
                    continue
                if not any((base / path).exists() for base in bases(repo, name)):
                    at = line + comment[: m.start()].count("\n")
                    problems.append(f"{name}:{at}: a comment names `{path}`, which does not exist")
    return problems


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    problems = check(repo)
    for p in problems:
        print(f"comment paths: {p}")
    if problems:
        print(f"comment paths: FAILED ({len(problems)}): name a file that exists")
        return 1
    print("comment paths: every file a comment names exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
