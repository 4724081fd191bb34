"""Which file of a Rust crate imports which: the arrows the layering gate checks.

An arrow A -> B means that code in file A names an item that file B defines:
* through a `use` (`use crate::a::b::C;`, `use super::{x, y::z};`, a glob);
* or through a path written in the code (`crate::stats::count()`,
  `super::helper()`, `timers::look_at()` where `timers` is a child module).
A name is followed through re-exports to the file that defines it: with
`pub use context::Ctx;` in `ffi/mod.rs`, `use crate::ffi::Ctx` is an arrow to
`ffi/context.rs`. A path that ends on a module (`use crate::ffi::blocking::{self}`)
is an arrow to that module's file (`ffi/blocking.rs`, or a folder's mod.rs).
A `pub use` that only hands a name on (the name is used nowhere else in its
file) is no arrow of its own, and neither is `mod x;`: the tree is not an import.
Comments and string literals are not read (so neither are doc links);
`#[path]` attributes are not followed.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from sources import c_like_spans

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM = r"(?:fn|struct|enum|trait|type|const|static|union|mod|macro_rules!)"
PUBLIC_ITEM = rf"\bpub(?:\([^)]*\))?\s+(?:(?:async|const|unsafe)\s+)*{ITEM}\s+({IDENT})"

ModPath = tuple[str, ...]


def strip_comments_and_strings(text: str) -> str:
    """The code with its comments and literals blanked (newlines kept, so
    offsets and line numbers stay)."""
    out = list(text)
    for _, start, end in c_like_spans(text):
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def expand_use_tree(tree: str) -> list[tuple[list[str], str]]:
    """`a::{b, c::{self, d as e}, *}` -> [(path, name the import binds), ...];
    a glob binds '*', `self` binds the module's own last segment."""
    results: list[tuple[list[str], str]] = []

    def walk(prefix: list[str], s: str) -> None:
        s = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", s.strip())
        if "{" in s:
            head, _, rest = s.partition("{")
            base = prefix + [p for p in head.split("::") if p]
            for part in split_top(rest[: rest.rfind("}")]):
                walk(base, part)
            return
        m = re.fullmatch(rf"(?:::)?((?:{IDENT}::)*)({IDENT}|\*)(?:\s+as\s+({IDENT}))?", s)
        if not m:
            return
        segs = prefix + [p for p in m.group(1).split("::") if p]
        last, alias = m.group(2), m.group(3)
        if last == "self":
            results.append((segs, alias or segs[-1]))
        elif last == "*":
            results.append((segs, "*"))
        else:
            results.append((segs + [last], alias or last))

    walk([], tree)
    return results


def split_top(s: str) -> list[str]:
    """`a, b::{c, d}` -> ['a', 'b::{c, d}']: split at commas outside braces."""
    parts, depth, cur = [], 0, ""
    for c in s:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        cur += c
    return [p for p in parts + [cur] if p]


@dataclass
class Use:
    path: list[str]  # as written
    name: str  # the name it binds ('*' for a glob)
    public: bool


@dataclass
class Module:
    file: Path
    children: dict[str, ModPath] = field(default_factory=dict)
    uses: list[Use] = field(default_factory=list)
    span: tuple[int, int] = (0, 0)  # where it is in its file (inline modules)
    items: set[str] | None = None  # the names it defines, once looked for


class Crate:
    """The modules of one crate, read from its `lib.rs` down every `mod`."""

    def __init__(self, src: Path):
        self.modules: dict[ModPath, Module] = {}
        self.code: dict[Path, str] = {}
        self.read_file(src / "lib.rs", ())

    def read_file(self, file: Path, mod: ModPath) -> None:
        code = strip_comments_and_strings(file.read_text())
        self.code[file] = code
        self.modules[mod] = Module(file, span=(0, len(code)))
        # Inline modules (`mod tests { ... }`), innermost last.
        for m in re.finditer(rf"\bmod\s+({IDENT})\s*\{{", code):
            depth, end = 1, m.end()
            while end < len(code) and depth:
                depth += {"{": 1, "}": -1}.get(code[end], 0)
                end += 1
            parent = self.module_at(file, m.start())
            path = parent + (m.group(1),)
            self.modules[parent].children[m.group(1)] = path
            self.modules[path] = Module(file, span=(m.start(), end))
        for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
            uses = self.modules[self.module_at(file, m.start())].uses
            uses += [
                Use(path, name, bool(m.group(1))) for path, name in expand_use_tree(m.group(2))
            ]
        # Modules in files of their own: `mod x;` is x.rs or x/mod.rs, next to
        # lib.rs and mod.rs, under a folder named after any other file.
        for m in re.finditer(rf"\bmod\s+({IDENT})\s*;", code):
            parent = self.module_at(file, m.start())
            folder = file.parent if file.name in ("lib.rs", "mod.rs") else file.parent / file.stem
            folder = folder.joinpath(*parent[len(mod) :])
            child = next(
                (
                    f
                    for f in (folder / f"{m.group(1)}.rs", folder / m.group(1) / "mod.rs")
                    if f.exists()
                ),
                None,
            )
            if child is not None:
                self.modules[parent].children[m.group(1)] = parent + (m.group(1),)
                self.read_file(child, parent + (m.group(1),))

    def module_at(self, file: Path, offset: int) -> ModPath:
        """The innermost module of `file` that `offset` is in."""
        inside = [
            (m.span[0], p)
            for p, m in self.modules.items()
            if m.file == file and m.span[0] <= offset < m.span[1]
        ]
        return max(inside)[1]

    def defines(self, mod: ModPath, name: str) -> bool:
        module = self.modules[mod]
        if module.items is None:
            code = self.code[module.file][module.span[0] : module.span[1]]
            module.items = set(re.findall(rf"\b{ITEM}\s+({IDENT})", code))
        return name in module.items

    def binds(self, mod: ModPath, name: str) -> bool:
        """Whether module `mod` defines, declares or imports `name`."""
        module = self.modules[mod]
        return (
            name in module.children
            or self.defines(mod, name)
            or any(u.name == name for u in module.uses)
        )

    def resolve(self, mod: ModPath, path: list[str], seen: frozenset = frozenset()) -> Path | None:
        """The file that defines `path`, as written in module `mod`; None when
        the path leaves the crate (std, another crate)."""
        head = path[0]
        if head in ("crate", "$crate"):
            return self.lookup((), path[1:], seen)
        module = self.modules[mod]
        if (
            head in ("self", "super")
            or head in module.children
            or any(u.name == head for u in module.uses)
        ):
            return self.lookup(mod, path, seen)
        return None

    def lookup(self, mod: ModPath, rest: list[str], seen: frozenset) -> Path:
        """`rest` looked up inside module `mod`: the file that defines it."""
        while rest and rest[0] in ("self", "super"):
            mod, rest = (mod[:-1] if rest[0] == "super" else mod), rest[1:]
        module = self.modules[mod]
        if not rest:
            return module.file
        head = rest[0]
        if head in module.children:
            return self.lookup(module.children[head], rest[1:], seen)
        if self.defines(mod, head):
            return module.file
        for use in module.uses:
            if use.name == head and (mod, head) not in seen:
                if use.path == [head]:
                    return module.file  # `pub(crate) use api;`: a macro defined here
                return self.resolve(mod, use.path + rest[1:], seen | {(mod, head)}) or module.file
        for use in module.uses:
            if use.name == "*" and (mod, "*" + head) not in seen:
                target = self.module_named(mod, use.path)
                if target is not None and self.binds(target, head):
                    return self.lookup(target, rest, seen | {(mod, "*" + head)})
        return module.file  # not seen defined (made by a macro?): here

    def module_named(self, mod: ModPath, path: list[str]) -> ModPath | None:
        """The module a glob's path names, if it is one of this crate."""
        found: ModPath = ()
        if path[0] == "crate":
            path = path[1:]
        elif path[0] in ("self", "super") or path[0] in self.modules[mod].children:
            found = mod
        else:
            return None
        for segment in path:
            if segment == "super":
                found = found[:-1]
            elif segment != "self":
                child = self.modules[found].children.get(segment)
                if child is None:
                    return None
                found = child
        return found

    def hands_on_only(self, mod: ModPath, use: Use, code: str) -> bool:
        """Whether a `pub use` only hands its name on: `code` (its file
        without its `use`s) never names it (for a glob: no public item of
        the globbed module)."""
        names = [use.name]
        if use.name == "*":
            target = self.module_named(mod, use.path)
            if target is None:
                return False
            names = re.findall(PUBLIC_ITEM, self.code[self.modules[target].file])
        return use.public and not any(re.search(rf"\b{re.escape(n)}\b", code) for n in names)

    def arrows(self) -> dict[tuple[Path, Path], set[str]]:
        """(importer, imported) -> the paths that tie them."""
        arrows: dict[tuple[Path, Path], set[str]] = {}

        def add(src: Path, dst: Path | None, what: list[str]) -> None:
            if dst is not None and dst != src:
                arrows.setdefault((src, dst), set()).add("::".join(what))

        for file, code in self.code.items():
            without_uses = re.sub(r"\buse\s+[^;]+;", lambda m: " " * len(m.group(0)), code)
            for mod in [p for p, m in self.modules.items() if m.file == file]:
                for use in self.modules[mod].uses:
                    if not self.hands_on_only(mod, use, without_uses):
                        add(file, self.resolve(mod, use.path), use.path)
            for m in re.finditer(rf"(?<![\w:])(\$?{IDENT})((?:\s*::\s*{IDENT})+)", without_uses):
                path = [m.group(1)] + re.findall(IDENT, m.group(2))
                add(file, self.resolve(self.module_at(file, m.start()), path), path)
        return arrows
