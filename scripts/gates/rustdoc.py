"""The rustdoc gate: the workspace's documentation, private items included,
builds without a warning (a broken intra-doc link is one).

Usage: python scripts/gates/rustdoc.py [REPO]   (cargo on PATH)
"""

import os
import subprocess
import sys
from pathlib import Path

COMMAND = ["cargo", "doc", "--workspace", "--no-deps", "--document-private-items"]


def check(repo: Path, target_dir: Path | None = None, package: str | None = None) -> list[str]:
    """The warnings of COMMAND in `repo`; with `package`, of that package
    alone (the self-test's plant, without documenting the whole workspace)."""
    env = dict(os.environ, RUSTDOCFLAGS="-D warnings")
    command = (
        COMMAND if package is None else [a for a in COMMAND if a != "--workspace"] + ["-p", package]
    )
    if target_dir is not None:
        env["CARGO_TARGET_DIR"] = str(target_dir)
    done = subprocess.run(command, check=False, cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode == 0:
        return []
    wrong = [
        line for line in done.stderr.splitlines() if line.startswith(("error", "warning", "  -->"))
    ]
    return wrong or done.stderr.splitlines()[-20:]


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    problems = check(repo)
    for p in problems:
        print(f"rustdoc: {p}")
    if problems:
        print(f"rustdoc: FAILED: RUSTDOCFLAGS='-D warnings' {' '.join(COMMAND)} says why")
        return 1
    print("rustdoc: the workspace's documentation (private items too) builds without a warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
