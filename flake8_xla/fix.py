"""The fix engine: range edits applied to a fixpoint, imports added once and removed when unused.

A rule offers, per diagnostic, a function that builds a :class:`Fix` (edits in character offsets
of the current source, a safety, and the modules its new text refers to). Each pass applies the
non-overlapping fixes, adds the imports they need, removes torch_xla imports the pass left unused,
and re-parses; a pass whose result does not parse is dropped and the loop stops.
"""
from __future__ import annotations

import ast
import functools
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

MAX_PASSES = 10

# conventional aliases for modules a fix imports (reused when already bound to that module)
_ALIASES = {"torch_xla.runtime": "xr", "torch_xla.core.xla_model": "xm", "torch_xla.distributed.spmd": "xs"}


@dataclass(frozen=True)
class Edit:
    start: int  # character offsets into the source
    end: int
    text: str


@dataclass(frozen=True)
class Fix:
    title: str
    edits: Tuple[Edit, ...]
    safe: bool
    imports: Tuple[str, ...] = ()  # modules whose binding (from the Importer) the edits' text uses

    def span(self) -> Tuple[int, int]:
        return min(e.start for e in self.edits), max(e.end for e in self.edits)


class FixSite:
    """What fix builders need about the file being fixed (one per pass)."""

    def __init__(self, source: str, tree: ast.Module, target, ctx) -> None:
        self.source = source
        self.tree = tree
        self.target = target  # the torch_xla Version the fixed code must run on
        self.ctx = ctx  # the FileContext (semantic model) of this source

    # built on first use: most files have no diagnostic, and so never need them
    @functools.cached_property
    def locator(self) -> "Locator":
        return Locator(self.source)

    @functools.cached_property
    def importer(self) -> "Importer":
        return Importer(self.tree, self.locator)

    @property
    def references(self) -> Sequence:
        return self.ctx.model.references

    @functools.cached_property
    def parents(self) -> Dict[int, ast.AST]:
        return {id(child): node for node in ast.walk(self.tree) for child in ast.iter_child_nodes(node)}


FixBuilder = Callable[[FixSite], Optional[Fix]]


def split_lines(source: str) -> List[str]:
    """Lines as Python's tokenizer sees them (keeps their endings)."""
    return io.StringIO(source, newline=None).readlines() if "\r" in source else source.splitlines(True)


class Locator:
    """Converts ast positions (1-based lines, UTF-8 byte columns) to character offsets."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, byte_col: int) -> int:
        if lineno > len(self.lines):
            return len(self.source)
        line = self.lines[lineno - 1]
        col = byte_col if line.isascii() else len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return self.starts[lineno - 1] + col

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        return self.source[self.start(node):self.end(node)]

    def line_start(self, lineno: int) -> int:
        return self.starts[min(lineno, len(self.lines)) - 1] if self.lines else 0

    def line_end(self, lineno: int) -> int:
        """Offset just past the newline of ``lineno``."""
        return self.starts[min(lineno, len(self.lines))]


def _module_bindings(tree: ast.Module) -> Dict[str, str]:
    """Module-level import bindings: bound name -> module it names (only whole-module bindings)."""
    bound: Dict[str, str] = {}
    for stmt in tree.body:
        if type(stmt) is ast.Import:
            for alias in stmt.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    bound.setdefault(root, root)
        elif type(stmt) is ast.ImportFrom and stmt.module and not stmt.level:
            for alias in stmt.names:
                bound[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return bound


class Importer:
    """Decides how fixed code refers to a module, reusing a binding the file already has
    (``import torch_xla.runtime as xr``) and otherwise planning one import per module."""

    def __init__(self, tree: ast.Module, locator: Locator) -> None:
        self.tree = tree
        self.locator = locator
        self.bindings = _module_bindings(tree)
        self._planned: Dict[str, Tuple[str, str]] = {}  # module -> (import line, prefix)

    def _rebound(self, name: str) -> bool:
        """Whether the file may bind ``name`` to something else (an assignment, def, class or
        `as name`); a guess that errs towards yes, which only means no fix."""
        pattern = rf"(?<![.\w]){re.escape(name)}\s*(?::[^=\n]*)?=(?!=)|\b(?:def|class|as)\s+{re.escape(name)}\b"
        return re.search(pattern, self.locator.source) is not None

    def _appears(self, name: str) -> bool:
        """Whether ``name`` occurs anywhere in the file as a word (strings and comments count:
        erring towards "taken" only costs a longer spelling)."""
        return re.search(rf"\b{re.escape(name)}\b", self.locator.source) is not None

    def _existing(self, module: str) -> Optional[str]:
        for name, bound in self.bindings.items():
            if bound == module:
                return name
        # `import torch_xla.runtime` binds torch_xla and makes torch_xla.runtime.x reachable
        for stmt in self.tree.body:
            if type(stmt) is ast.Import and any(a.asname is None and a.name == module for a in stmt.names):
                return module if self.bindings.get(module.split(".")[0]) == module.split(".")[0] else None
        return None

    def prefix(self, module: str) -> Optional[str]:
        """The text to put before ``.attr`` to reach ``module``, or None when no binding is possible."""
        existing = self._existing(module)
        if existing:
            return existing
        if module in self._planned:
            return self._planned[module][1]
        alias = _ALIASES.get(module)
        if alias and not self._appears(alias):
            plan = (f"import {module} as {alias}", alias)
        else:
            root = module.split(".")[0]
            if self.bindings.get(root) != root and self._rebound(root):
                return None  # the package name is bound to something else here
            plan = (f"import {module}", module)
        self._planned[module] = plan
        return plan[1]

    def import_edit(self, modules: Iterable[str]) -> Optional[Edit]:
        lines = sorted({self._planned[m][0] for m in modules if m in self._planned})
        if not lines:
            return None
        return Edit(*([self._insertion_point()] * 2), "".join(line + "\n" for line in lines))

    def _insertion_point(self) -> int:
        """After the last top-level torch_xla import, else the last top-level import, else after
        the docstring and __future__ imports."""
        body = self.tree.body
        imports = [s for s in body if type(s) in (ast.Import, ast.ImportFrom)]
        xla = [s for s in imports if any(n.startswith("torch_xla") for n in _imported_modules(s))]
        anchor = (xla or imports or [None])[-1]
        if anchor is None:
            anchor = body[0] if body and _is_docstring(body[0]) else None
        if anchor is None:
            return 0
        return self.locator.line_end(anchor.end_lineno)


def _is_docstring(stmt: ast.stmt) -> bool:
    return type(stmt) is ast.Expr and type(stmt.value) is ast.Constant and type(stmt.value.value) is str


def _imported_modules(stmt: ast.stmt) -> List[str]:
    if type(stmt) is ast.Import:
        return [a.name for a in stmt.names]
    return [stmt.module or ""]


def apply_edits(source: str, edits: Sequence[Edit]) -> str:
    out, pos = [], 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        out.append(source[pos:edit.start])
        out.append(edit.text)
        pos = edit.end
    out.append(source[pos:])
    return "".join(out)


def choose(fixes: Sequence[Fix]) -> List[Fix]:
    """Non-overlapping fixes, earliest first (the rest wait for the next pass)."""
    chosen: List[Fix] = []
    taken: List[Tuple[int, int]] = []
    for fix in sorted(fixes, key=lambda f: f.span()):
        if all(e.end <= s or e.start >= t for e in fix.edits for s, t in taken) and not any(
                e.start == e.end == s for e in fix.edits for s, _ in taken):
            chosen.append(fix)
            taken.extend((e.start, e.end) for e in fix.edits)
    return chosen


# --- imports that a fix left unused --------------------------------------------------------------

def _import_bindings(tree: ast.AST) -> List[Tuple[ast.stmt, ast.alias, str]]:
    """(statement, alias, bound name) of every aliased or from-import of a torch_xla module."""
    out = []
    for node in ast.walk(tree):
        if type(node) is ast.Import:
            out.extend((node, a, a.asname) for a in node.names if a.asname and a.name.startswith("torch_xla"))
        elif type(node) is ast.ImportFrom and (node.module or "").startswith("torch_xla") and not node.level:
            out.extend((node, a, a.asname or a.name) for a in node.names if a.name != "*")
    return out


def _loaded_names(tree: ast.AST) -> Counter:
    used: Counter = Counter()
    for node in ast.walk(tree):
        if type(node) is ast.Name:
            used[node.id] += 1
        elif type(node) is ast.Constant and type(node.value) is str and node.value.isidentifier():
            used[node.value] += 1  # __all__ entries and string references keep an import
    return used


def remove_aliases(source: str, tree: ast.AST, doomed: Set[int]) -> Optional[str]:
    """Remove the import aliases whose id() is in ``doomed``; None when it cannot be done cleanly."""
    locator = Locator(source)
    edits: List[Edit] = []
    statements: Dict[int, Tuple[ast.stmt, List[ast.alias]]] = {}
    for stmt, alias, _ in _import_bindings(tree):
        if id(alias) in doomed:
            statements.setdefault(id(stmt), (stmt, []))[1].append(alias)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for stmt, aliases in statements.values():
        edit = removal_edit(locator, stmt, aliases, parents.get(id(stmt)))
        if edit is None:
            return None
        edits.append(edit)
    return apply_edits(source, edits)


def removal_edit(locator: Locator, stmt: ast.stmt, aliases: Sequence[ast.alias],
                 parent: Optional[ast.AST]) -> Optional[Edit]:
    """Remove ``aliases`` from the import ``stmt``: the whole statement when none remain."""
    first, last = locator.line_start(stmt.lineno), locator.line_end(stmt.end_lineno)
    before, after = locator.source[first:locator.start(stmt)], locator.source[locator.end(stmt):last]
    if before.strip() or after.split("#")[0].strip():
        return None  # shares a line with another statement
    keep = [a for a in stmt.names if a not in aliases]
    indent = locator.source[first:locator.start(stmt)]
    if not keep:
        siblings = getattr(parent, "body", None) if parent is not None else None
        for block in ("body", "orelse", "finalbody"):
            body = getattr(parent, block, None)
            if body and stmt in body:
                siblings = body
        if siblings is not None and len(siblings) == 1 and type(parent) is not ast.Module:
            return Edit(first, last, f"{indent}pass\n")
        return Edit(first, last, "")
    if "#" in locator.text(stmt):
        return None  # a comment inside a multi-line import would be lost
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
    if type(stmt) is ast.Import:
        text = f"import {names}"
    else:
        text = f"from {'.' * stmt.level}{stmt.module or ''} import {names}"
    return Edit(locator.start(stmt), locator.end(stmt), text)


def remove_newly_unused(before: ast.AST, source: str) -> str:
    """Remove torch_xla imports that were used in ``before`` and are unused in ``source``."""
    used_before = _loaded_names(before)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    used_now = _loaded_names(tree)
    doomed = {id(alias) for _, alias, name in _import_bindings(tree) if used_before[name] and not used_now[name]}
    if not doomed:
        return source
    return remove_aliases(source, tree, doomed) or source


@dataclass
class FixOutcome:
    source: str
    fixed: Counter = field(default_factory=Counter)  # code -> fixes applied
    passes: int = 0
    error: Optional[str] = None  # why fixing stopped early (the last good source is kept)


Candidate = Tuple[str, Fix]  # (code, fix)


def fix_to_fixpoint(source: str, candidates_for: Callable[[str, ast.Module], Tuple[FixSite, Sequence[Candidate]]]
                    ) -> FixOutcome:
    """Apply the fixes ``candidates_for(source, tree)`` offers until none is left or MAX_PASSES."""
    outcome = FixOutcome(source)
    for _ in range(MAX_PASSES):
        tree = ast.parse(outcome.source)
        site, built = candidates_for(outcome.source, tree)
        chosen = choose([fix for _, fix in built])
        if not chosen:
            return outcome
        chosen_ids = {id(f) for f in chosen}
        edits = [e for fix in chosen for e in fix.edits]
        add = site.importer.import_edit({m for fix in chosen for m in fix.imports})
        new = apply_edits(outcome.source, edits + ([add] if add else []))
        new = remove_newly_unused(tree, new)
        try:
            ast.parse(new)
        except SyntaxError as exc:
            outcome.error = f"a fix produced invalid code ({exc.msg} at line {exc.lineno}); it was not applied"
            return outcome
        outcome.source = new
        outcome.passes += 1
        outcome.fixed.update(code for code, fix in built if id(fix) in chosen_ids)
    outcome.error = f"still changing after {MAX_PASSES} passes; stopped"
    return outcome
