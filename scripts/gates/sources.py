"""The repository's source files, and the comments in them: what the
file-size and comment-path gates read.

A source file is a file git tracks (or would: untracked and not ignored)
whose name ends in one of SOURCE_SUFFIXES, or that is named `Makefile`, or
that starts with `#!` (a script without a suffix, such as `.ci/run`).
"""

import io
import re
import subprocess
import tokenize
from pathlib import Path

SOURCE_SUFFIXES = {
    ".rs",
    ".py",
    ".pyi",
    ".java",
    ".kt",
    ".sh",
    ".bash",
    ".lua",
    ".c",
    ".h",
    ".go",
    ".js",
    ".ts",
}


def tracked_files(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=repo,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted(f for f in set(out.split("\0")) if f and (repo / f).is_file())


def is_source(repo: Path, name: str) -> bool:
    path = repo / name
    if path.suffix in SOURCE_SUFFIXES or path.name == "Makefile":
        return True
    if path.suffix:
        return False
    with open(path, "rb") as f:
        return f.read(2) == b"#!"


def source_files(repo: Path) -> list[str]:
    return [f for f in tracked_files(repo) if is_source(repo, f)]


def comments(name: str, text: str) -> list[tuple[int, str]]:
    """(line number, text) of every comment in a file: `//` and `/* */` in
    C-like languages, `#` in Python (and its docstrings), shell and
    Makefiles, `--` in Lua."""
    suffix = Path(name).suffix
    if suffix in (".py", ".pyi"):
        return python_comments(text)
    if suffix == ".lua":
        return [
            (i + 1, line[line.index("--") :])
            for i, line in enumerate(text.splitlines())
            if "--" in line
        ]
    if suffix in (".sh", ".bash") or Path(name).name == "Makefile" or not suffix:
        found = []
        for i, line in enumerate(text.splitlines()):
            m = re.search(r"(?:^|\s)#(?!!)", line)
            if m:
                found.append((i + 1, line[m.end() :]))
        return found
    return c_like_comments(text)


def python_comments(text: str) -> list[tuple[int, str]]:
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.append((tok.start[0], tok.string))
            elif tok.type == tokenize.STRING and re.match(r"[rRbBuU]*('''|\"\"\")", tok.string):
                found.append((tok.start[0], tok.string))  # docstrings, and other long texts
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def c_like_comments(text: str) -> list[tuple[int, str]]:
    """Comments of Rust, Java, C...: (line number, text)."""
    return [
        (text.count("\n", 0, a) + 1, text[a:b])
        for kind, a, b in c_like_spans(text)
        if kind == "comment"
    ]


LITERAL_START = re.compile(r"""//|/\*|(?<!\w)b?r#*"|"|'""")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
CHAR = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\x..|\\.|[^\\'])'")


def c_like_spans(text: str) -> list[tuple[str, int, int]]:
    """Where the comments (`//`, nested `/* */`) and the string and char
    literals (raw and byte strings too) of C-like code are: (kind, start,
    end). A lifetime (`'a`) is not a literal."""
    spans, i = [], 0
    while m := LITERAL_START.search(text, i):
        start, token = m.start(), m.group(0)
        if token == "//":
            end = text.find("\n", start)
            spans.append(("comment", start, len(text) if end < 0 else end))
        elif token == "/*":
            depth, end = 0, start
            for d in re.finditer(r"/\*|\*/", text[start:]):
                depth += 1 if d.group(0) == "/*" else -1
                if depth == 0:
                    end = start + d.end()
                    break
            spans.append(("comment", start, end if end > start else len(text)))
        elif token.endswith('"') and token != '"':
            end = text.find('"' + token[token.index("r") + 1 : -1], m.end())
            spans.append(
                ("string", start, len(text) if end < 0 else end + len(token) - token.index("r") - 1)
            )
        elif token == '"':
            s = STRING.match(text, start)
            spans.append(("string", start, s.end() if s else len(text)))
        elif c := CHAR.match(text, start):
            spans.append(("string", start, c.end()))
        else:
            i = m.end()  # a lifetime
            continue
        i = spans[-1][2]
    return spans
