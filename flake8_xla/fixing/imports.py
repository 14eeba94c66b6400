"""How fixed code reaches a module: reuse a binding the use already sees, or import it where the old
API's module was imported, under a name that is free.

A torch_xla module is imported exactly beside the old import (same guard, same function): a library
that imports torch_xla under ``try/except ImportError``, an availability check or inside a function
must still import without torch_xla after a fix. A module that is there wherever the file runs
(``torch``, the standard library) goes out of every guard instead, to the other imports of the same
scope: inside a guard on torch_xla it would never run once torch_xla is gone (TorchTPU).
"""
from __future__ import annotations

import ast
import functools
import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from .lines import LineModel, line_ending
from ..analysis.semantic import Reference, Scope
from .edits import Edit, alone_on_its_lines

# conventional aliases for modules a fix imports (used only when the name appears nowhere in the file)
# modules present wherever code that imports torch_xla runs: never left inside a guard
ALWAYS_THERE = ("os", "sys", "torch")
ALIASES = {"torch_xla.runtime": "xr", "torch_xla.core.xla_model": "xm", "torch_xla.distributed.spmd": "xs"}

_WORD = re.compile(r"(?!\d)\w+")


class PlannedImport(NamedTuple):
    """One import statement to add: ``line`` goes at the earliest anchor in statement list ``block``."""

    block: int  # id() of the statement list that receives it
    module: str
    line: str


class _Anchor(NamedTuple):
    """Where an added import goes: after ``statement`` (before it when ``before``)."""

    statement: ast.stmt
    before: bool = False

    def order(self, importer: "Importer") -> float:
        return importer.position(self.statement)[1] - (0.5 if self.before else 0)


class _Binding(NamedTuple):
    name: str  # the name the import binds
    value: str  # what the semantic model says that name holds
    prefix: str  # how code reaches the module through it
    statement: ast.stmt
    scope: Optional[Scope]


def _inside(scope: Optional[Scope], outer: Scope) -> bool:
    while scope is not None:
        if scope is outer:
            return True
        scope = scope.parent
    return False


class Importer:
    def __init__(self, tree: ast.Module, lines: LineModel, parents: Dict[int, ast.AST],
                 references: Iterable[Reference]) -> None:
        self.tree = tree
        self.lines = lines
        self.parents = parents
        self.references = references
        self._anchors: Dict[PlannedImport, _Anchor] = {}
        self._positions: Dict[int, Optional[Tuple[int, int]]] = {}

    # -- indexes, built once per pass --------------------------------------------------------------
    @functools.cached_property
    def words(self) -> frozenset:
        """Every identifier-like word of the file, strings and comments included: a name found here
        is treated as taken, which only costs a longer spelling."""
        return frozenset(_WORD.findall(self.lines.source))

    def position(self, node: ast.AST) -> Optional[Tuple[int, int]]:
        """(id of its statement list, index in it) of a statement, found from its parent when first
        asked; None for anything else."""
        if not isinstance(node, ast.stmt):
            return None
        key = id(node)
        if key not in self._positions:
            self._positions[key] = _place_in_parent(node, self.parents.get(key))
        return self._positions[key]

    @functools.cached_property
    def bindings(self) -> Dict[str, List[_Binding]]:
        """module -> the import bindings that reach it."""
        out: Dict[str, List[_Binding]] = {}
        for ref in self.references:
            if not ref.is_import or type(ref.node) is not ast.alias:
                continue
            alias, stmt = ref.node, ref.statement
            if type(stmt) is ast.ImportFrom or alias.asname:
                name = alias.asname or alias.name
                out.setdefault(ref.qualname, []).append(_Binding(name, ref.qualname, name, stmt, ref.scope))
                continue
            root = alias.name.split(".")[0]
            # `import a.b` binds `a` and makes `a.b` reachable
            for module in {alias.name, root}:
                out.setdefault(module, []).append(_Binding(root, root, module, stmt, ref.scope))
        return out

    def dominates(self, stmt: ast.stmt, node: ast.AST) -> bool:
        """Whether ``stmt`` runs before ``node`` whenever ``node``'s enclosing code runs: a later
        statement of the same list contains ``node`` (a function defined there counts)."""
        place = self.position(stmt)
        if place is None:
            return False
        current: Optional[ast.AST] = node
        while current is not None:
            where = self.position(current)
            if where is not None and where[0] == place[0] and where[1] > place[1]:
                return True
            current = self.parents.get(id(current))
        return False

    # -- the decision ------------------------------------------------------------------------------
    def reach(self, module: str, ref: Reference) -> Optional[Tuple[str, Optional[PlannedImport]]]:
        """The text that reaches ``module`` where ``ref`` is, and the import it needs (None when a
        binding the use already sees is reused); None when no placement keeps the program's meaning."""
        scope = ref.scope
        if scope is None or ref.is_import:
            return None
        for binding in self.bindings.get(module, ()):
            if (scope.lookup(binding.name) == binding.value and scope.owner_of(binding.name) is binding.scope
                    and self.dominates(binding.statement, ref.node)):
                return binding.prefix, None
        root = ref.written[0]
        owner = scope.owner_of(root)
        if owner is None:
            return None
        # the old import runs before the use whenever the use works at all: the new one goes beside it
        candidates = owner.imports.get(root, [])
        anchor = candidates[0] if len(candidates) == 1 else \
            next((s for s in reversed(candidates) if self.dominates(s, ref.node)), None)
        if anchor is None:
            return None
        place = self.position(anchor)
        if place is None:
            return None
        at = _Anchor(anchor)
        if module.split(".")[0] in ALWAYS_THERE:
            at = self._out_of_guards(anchor)
            place = self.position(at.statement)
        alias = ALIASES.get(module)
        if alias and alias not in self.words:
            line, prefix = f"import {module} as {alias}", alias
        elif self._package_name_free(module.split(".")[0], owner, scope):
            line, prefix = f"import {module}", module
        else:
            return None
        return prefix, self._planned(PlannedImport(place[0], module, line), at)

    def plan(self, module: str, stmt: ast.stmt, scope: Scope) -> Optional[Tuple[str, Optional[PlannedImport]]]:
        """How code at ``stmt`` (in ``scope``) reaches ``module``, a module that is there wherever the file
        runs: a binding that runs before it, else a new ``import module`` out of the guards around ``stmt``."""
        for binding in self.bindings.get(module, ()):
            if scope.lookup(binding.name) == binding.value and self.dominates(binding.statement, stmt):
                return binding.prefix, None
        if module.split(".")[0] not in ALWAYS_THERE or not self._package_name_free(module.split(".")[0], scope, scope):
            return None
        at = self._out_of_guards(stmt, inclusive=True)
        place = self.position(at.statement)
        if place is None:
            return None
        return module, self._planned(PlannedImport(place[0], module, f"import {module}"), at)

    def _planned(self, planned: PlannedImport, at: _Anchor) -> PlannedImport:
        """Record where ``planned`` goes: the earliest anchor any use asked for in its statement list."""
        earlier = self._anchors.get(planned)
        if earlier is None or earlier.order(self) > at.order(self):
            self._anchors[planned] = at
        return planned

    def _out_of_guards(self, anchor: ast.stmt, inclusive: bool = False) -> _Anchor:
        """The place in the anchor's own scope, outside every compound statement around it (``inclusive``:
        and before the anchor itself): after the last import before that statement, else right before it."""
        top = anchor
        parent = self.parents.get(id(anchor))
        while parent is not None and not isinstance(parent, _SCOPES):
            if isinstance(parent, ast.stmt):
                top = parent
            parent = self.parents.get(id(parent))
        if top is anchor and not inclusive:
            return _Anchor(anchor)
        block, index = self.position(top)
        body = next(b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody"))
                    if type(b) is list and id(b) == block)
        earlier = [s for s in body[:index] if type(s) in (ast.Import, ast.ImportFrom)]
        return _Anchor(earlier[-1]) if earlier else _Anchor(top, before=True)

    def _package_name_free(self, package: str, owner: Scope, use: Scope) -> bool:
        """Whether ``import package.x`` in ``owner`` binds ``package`` without changing what any
        code means: nothing else holds the name where it is bound or where it is used."""
        fine = (None, package)
        if use.lookup(package) not in fine or owner.bindings.get(package) not in fine:
            return False
        if owner.kind == "module" or package in owner.bindings:
            return True
        # a new local of a function would hide the global of that name for the whole function
        return not any(not ref.is_import and ref.written[0] == package and _inside(ref.scope, owner)
                       for ref in self.references)

    def import_edits(self, planned: Iterable[PlannedImport]) -> List[Edit]:
        edits = []
        # two imports that go to the same place go in isort's order
        for key in sorted(set(planned), key=lambda p: _planned_key(p.line)):
            anchor, before = self._anchors[key]
            if not before and alone_on_its_lines(self.lines, anchor):
                anchor, before = self._among_neighbours(anchor, _planned_key(key.line))
            if before:  # nothing is imported before it in its scope: the import opens the statement's line
                first = self.lines.line_start(anchor.lineno)
                indent = self.lines.source[first:self.lines.start(anchor)]
                ending = line_ending(self.lines.lines[anchor.lineno - 1]) or self.lines.default_ending()
                edits.append(Edit(first, first, indent + key.line + ending))
            elif alone_on_its_lines(self.lines, anchor):
                first = self.lines.line_start(anchor.lineno)
                indent = self.lines.source[first:self.lines.start(anchor)]
                own = line_ending(self.lines.lines[anchor.end_lineno - 1])
                text = indent + key.line + own if own else self.lines.default_ending() + indent + key.line
                edits.append(Edit(self.lines.line_end(anchor.end_lineno), self.lines.line_end(anchor.end_lineno), text))
            else:  # the anchor shares its line: the import joins it, so it still runs right after it
                end = self.lines.end(anchor)
                edits.append(Edit(end, end, f"; {key.line}"))
        return edits

    def _among_neighbours(self, anchor: ast.stmt, new: "_Key") -> Tuple[ast.stmt, bool]:
        """Where isort (profile black) would put an import that sorts as ``new`` in the run of imports
        holding ``anchor`` (adjacent lines, one statement each): (statement, before it). When the run is
        not in isort's order, right after ``anchor``, as the fixes always placed it."""
        place = self.position(anchor)
        body = _statement_list(self.parents.get(id(anchor)), place[0]) if place else None
        if body is None:
            return anchor, False
        first = last = place[1]
        while first > 0 and self._adjacent(body[first - 1], body[first]):
            first -= 1
        while last + 1 < len(body) and self._adjacent(body[last], body[last + 1]):
            last += 1
        run = body[first:last + 1]
        keys = [key for key in map(_statement_key, run) if key is not None]
        if len(keys) < len(run) or keys != sorted(keys):
            return anchor, False
        after = next((stmt for stmt, key in zip(run, keys) if key > new), None)
        return (after, True) if after is not None else (run[-1], False)

    def _adjacent(self, earlier: ast.stmt, later: ast.stmt) -> bool:
        """Two import statements on consecutive lines (no blank or comment line between), each alone on its lines."""
        return all(type(s) in (ast.Import, ast.ImportFrom) and alone_on_its_lines(self.lines, s)
                   for s in (earlier, later)) and later.lineno == earlier.end_lineno + 1


__all__ = ["ALIASES", "ALWAYS_THERE", "Importer", "PlannedImport"]

_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _statement_list(parent: Optional[ast.AST], block: int) -> Optional[List[ast.stmt]]:
    """The statement list of ``parent`` whose id() is ``block``."""
    return next((body for body in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody"))
                 if type(body) is list and id(body) == block), None)


# isort's order, profile black (force_sort_within_sections false): `from __future__` first, then every
# `import x` by module (`import x` before `import x as y`), then every `from x import y` by module; names
# compare without case, numbers by value (isort's natural sort: xla2 before xla10)
_DIGITS = re.compile(r"(\d+)")
_Key = Tuple[int, Tuple, Tuple]


def _natural(text: str) -> Tuple:
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(text.lower()))


def _straight_key(module: str, alias: Optional[str]) -> _Key:
    return 1, _natural(module), (1,) + _natural(alias) if alias else ()


def _planned_key(line: str) -> _Key:
    """Where an added ``import module`` or ``import module as alias`` line sorts."""
    module, _, alias = line[len("import "):].partition(" as ")
    return _straight_key(module, alias or None)


def _statement_key(stmt: ast.stmt) -> Optional[_Key]:
    """Where an import statement sorts; None for one isort would rewrite (``import a, b``)."""
    if type(stmt) is ast.Import:
        return _straight_key(stmt.names[0].name, stmt.names[0].asname) if len(stmt.names) == 1 else None
    assert type(stmt) is ast.ImportFrom
    if stmt.module == "__future__":
        return 0, (), ()
    dots = "." * stmt.level
    return 2, _natural(f"{dots}_{stmt.module or ''}" if dots else stmt.module or ""), ()


def _place_in_parent(stmt: ast.stmt, parent: Optional[ast.AST]) -> Optional[Tuple[int, int]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if type(block) is list:
            for index, item in enumerate(block):
                if item is stmt:
                    return id(block), index
    return None
