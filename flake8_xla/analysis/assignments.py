"""Name bindings: where each dotted name (``model``, ``self.model``, ``model.layer``) is assigned
within its scope, what it is given, where it occurs at all, and where a module is moved in place
(``model.to(device)``). Names are compared as dotted text, so the facts never cross scopes: a name
that comes from a parameter, a factory or another function stays unknown.

Built on the control flow's numbering: the first fact that asks numbers every statement of the file.
Two other modules answer a neighbouring question: analysis/bindings.py which assignments reach a
use, scope by scope, for the kinds of values; semantic.py what an imported name refers to.
"""
from __future__ import annotations

import ast
from typing import Dict, List, NamedTuple, Optional, Tuple

from .control import FlowFacts, Position
from .syntax import dotted


class Assignment(NamedTuple):
    name: str  # dotted name assigned
    value: ast.AST
    at: Position


class Move(NamedTuple):
    name: str  # dotted name of a module moved in place: ``model.to(device)``
    at: Position


class Assignments:
    """The assignments and in-place moves of one file, in statement order."""

    @classmethod
    def from_context(cls, ctx) -> "Assignments":
        return cls(ctx.get(FlowFacts))

    def __init__(self, flow: FlowFacts) -> None:
        self.flow = flow
        self.bindings: List[Assignment] = []
        self.moves: List[Move] = []
        self._names: Dict[int, Dict[str, List[Tuple[int, bool]]]] = {}
        for at in flow.statements():
            stmt = at.statement
            if type(stmt) is ast.Expr and type(stmt.value) is ast.Call and type(stmt.value.func) is ast.Attribute \
                    and stmt.value.func.attr == "to":
                name = dotted(stmt.value.func.value)
                if name:
                    self.moves.append(Move(name, at))
            if type(stmt) in (ast.Assign, ast.AnnAssign, ast.AugAssign) and getattr(stmt, "value", None) is not None:
                targets = stmt.targets if type(stmt) is ast.Assign else [stmt.target]
                for target in targets:
                    for element in (target.elts if type(target) in (ast.Tuple, ast.List) else [target]):
                        name = dotted(element)
                        if name:
                            self.bindings.append(Assignment(name, stmt.value, at))
        self.bindings.sort(key=lambda b: b.at.order)
        self._by_name: Dict[Tuple[int, str], List[Assignment]] = {}
        for binding in self.bindings:  # sorted by order
            self._by_name.setdefault((id(binding.at.scope), binding.name), []).append(binding)

    def bindings_between(self, name: Optional[str], scope: ast.AST, start: int, end: int) -> List[Assignment]:
        """Assignments to ``name`` in ``scope`` by statements strictly between two orders, in order."""
        return [b for b in self._by_name.get((id(scope), name), ()) if start < b.at.order < end]

    def bindings_before(self, name: Optional[str], at: Position) -> List[Assignment]:
        """Assignments to ``name`` in the scope of ``at`` by earlier statements, in order."""
        return [b for b in self._by_name.get((id(at.scope), name), ()) if b.at.order < at.order]

    def rebound_between(self, name: str, scope: ast.AST, start: int, end: int) -> bool:
        """Whether ``name`` is assigned in ``scope`` by a statement strictly between two orders."""
        return any(start < b.at.order < end for b in self._by_name.get((id(scope), name), ()))

    def last_binding(self, name: Optional[str], at: Position) -> Optional[Assignment]:
        """``name``'s last assignment before ``at`` in its scope, if it surely runs before ``at``."""
        bound = self.bindings_before(name, at)
        return bound[-1] if bound and self.flow.runs_before(bound[-1].at, at) else None

    def binding_of(self, expr: ast.AST) -> Optional[Assignment]:
        """The plain assignment (``name = value``) a dotted name was last given in its scope, when
        it runs whenever ``expr`` does and nothing else stores the name in between; else None."""
        name, at = dotted(expr), self.flow.position(expr)
        if name is None or at is None:
            return None
        bound = self.bindings_before(name, at)
        binding = bound[-1] if bound else None
        if binding is None or not _plain_assignment(binding.at.statement, name):
            return None
        if not self.flow.dominates(binding.at, at) or self.occurs_between(name, at.scope, binding.at.order, at.order,
                                                                          stores_only=True):
            return None
        return binding

    def value_of(self, expr: ast.AST) -> Optional[ast.AST]:
        """The value of :meth:`binding_of`."""
        binding = self.binding_of(expr)
        return binding.value if binding is not None else None

    def occurs_between(self, name: str, scope: ast.AST, start: int, end: int, stores_only: bool = False) -> bool:
        """Whether ``name`` is stored (or, unless ``stores_only``, used at all) in ``scope`` by a
        statement strictly between two orders."""
        names = self._names.get(id(scope))
        if names is None:
            names = self._names[id(scope)] = self._occurrences(scope)
        return any(start < order < end and (store or not stores_only) for order, store in names.get(name, ()))

    def _occurrences(self, scope: ast.AST) -> Dict[str, List[Tuple[int, bool]]]:
        """Dotted name -> (statement order, is a store) of each of its occurrences in ``scope``."""
        out: Dict[str, List[Tuple[int, bool]]] = {}
        for node in ast.walk(scope):
            if type(node) is ast.Name or type(node) is ast.Attribute:
                at = self.flow.position(node)
                name = dotted(node) if at is not None and at.scope is scope else None
                if name is not None:
                    out.setdefault(name, []).append((at.order, type(node.ctx) is not ast.Load))
        return out


def _plain_assignment(stmt: ast.stmt, name: str) -> bool:
    """``name = value`` (or ``a = name = value`` / ``name: T = value``), not unpacking or ``+=``."""
    if type(stmt) is ast.Assign:
        return any(dotted(t) == name for t in stmt.targets)
    return type(stmt) is ast.AnnAssign and dotted(stmt.target) == name


__all__ = ["Assignment", "Assignments", "Move"]
