"""How fixed code reaches a module: reuse a binding the use already sees, or import it exactly where
the old API's module was imported (same guard, same function), under a name that is free.

An import is never hoisted: a library that imports torch_xla under ``try/except ImportError``, an
availability check or inside a function must still import without torch_xla after a fix.
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
ALIASES = {"torch_xla.runtime": "xr", "torch_xla.core.xla_model": "xm", "torch_xla.distributed.spmd": "xs"}

_WORD = re.compile(r"(?!\d)\w+")


class PlannedImport(NamedTuple):
    """One import statement to add: ``line`` goes after the earliest anchor in statement list ``block``."""

    block: int  # id() of the statement list that receives it
    module: str
    line: str


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
        self._anchors: Dict[PlannedImport, ast.stmt] = {}
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
        alias = ALIASES.get(module)
        if alias and alias not in self.words:
            line, prefix = f"import {module} as {alias}", alias
        elif self._package_name_free(module.split(".")[0], owner, scope):
            line, prefix = f"import {module}", module
        else:
            return None
        planned = PlannedImport(place[0], module, line)
        earlier = self._anchors.get(planned)
        if earlier is None or self.position(earlier)[1] > place[1]:
            self._anchors[planned] = anchor
        return prefix, planned

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
        for key in sorted(set(planned), key=lambda p: p.line):
            anchor = self._anchors[key]
            if alone_on_its_lines(self.lines, anchor):
                first = self.lines.line_start(anchor.lineno)
                indent = self.lines.source[first:self.lines.start(anchor)]
                own = line_ending(self.lines.lines[anchor.end_lineno - 1])
                text = indent + key.line + own if own else self.lines.default_ending() + indent + key.line
                edits.append(Edit(self.lines.line_end(anchor.end_lineno), self.lines.line_end(anchor.end_lineno), text))
            else:  # the anchor shares its line: the import joins it, so it still runs right after it
                end = self.lines.end(anchor)
                edits.append(Edit(end, end, f"; {key.line}"))
        return edits


__all__ = ["ALIASES", "Importer", "PlannedImport"]


def _place_in_parent(stmt: ast.stmt, parent: Optional[ast.AST]) -> Optional[Tuple[int, int]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if type(block) is list:
            for index, item in enumerate(block):
                if item is stmt:
                    return id(block), index
    return None
