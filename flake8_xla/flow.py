"""Flow facts for the FSDP rules (part of the shared semantic layer).

Within one scope (a function body, or the module's top level, nested blocks included and nested
functions excluded) statements are numbered in source order. On that order the layer records
which expressions are wrapped with FSDP (and into which name), which optimizers are built from
which modules' parameters, where names are rebound, and where modules are moved to a device.
Names are compared as dotted text (``model``, ``self.model``, ``model.layer``), so facts never
cross scopes: a model that comes from a parameter, a factory or another function stays unknown
and the rules stay silent.

Computed only for files that reference an FSDP wrapper; everything else pays one set lookup per
resolved reference.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from .semantic import Reference

FSDP_V1 = frozenset({
    "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel",
    "torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel",
})
FSDP_V2 = frozenset({
    "torch_xla.experimental.spmd_fully_sharded_data_parallel.SpmdFullyShardedDataParallel",
})
FSDP_ANY = FSDP_V1 | FSDP_V2

# optimizers: torch.optim.X and the usual third-party ones; the name must look like an optimizer
_OPTIMIZER_MODULES = ("torch.optim.", "transformers.", "bitsandbytes.optim.", "apex.optimizers.", "timm.optim.")
_OPTIMIZER_NAME = re.compile(r"(?i)(adam|sgd|adagrad|adadelta|rmsprop|lamb|lars|lion|adafactor|optimizer|lbfgs"
                             r"|nadam|radam|asgd|rprop|sophia|shampoo)")


def dotted(node: Optional[ast.AST]) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain (``self.model``), else None."""
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


@dataclass(frozen=True)
class Position:
    scope: ast.AST  # the function (or module) whose body holds the statement
    order: int  # statement number within the scope, in source order
    statement: ast.stmt


@dataclass(frozen=True)
class Wrap:
    call: ast.Call
    kind: str  # "v1" (XlaFullyShardedDataParallel) or "v2" (SpmdFullyShardedDataParallel)
    wrapped: Optional[str]  # dotted name of the module argument, when it is a name
    target: Optional[str]  # dotted name the wrapper is assigned to, when it is
    at: Position
    inner: Optional[ast.AST]  # the module argument expression


@dataclass(frozen=True)
class OptimizerBuild:
    call: ast.Call
    target: Optional[str]
    params_of: Tuple[str, ...]  # dotted names whose .parameters()/.named_parameters() it takes
    param_groups: bool  # built from a list of parameter-group dicts
    at: Position


@dataclass(frozen=True)
class Move:
    name: str  # dotted name of a module moved in place: ``model.to(device)``
    at: Position


@dataclass(frozen=True)
class Binding:
    name: str  # dotted name assigned
    value: ast.AST
    at: Position


class FlowFacts:
    """FSDP-related facts of one file."""

    def __init__(self, tree: ast.AST, references: Sequence[Reference]) -> None:
        self.references = references
        self.fsdp_refs = [r for r in references if r.qualname in FSDP_ANY and not r.is_import]
        self.wraps: List[Wrap] = []
        self.optimizers: List[OptimizerBuild] = []
        self.bindings: List[Binding] = []
        self.moves: List[Move] = []
        self._positions: Dict[int, Position] = {}
        if self.fsdp_refs:
            self._number(tree)
            self._collect()

    # -- numbering ----------------------------------------------------------------------
    def _number(self, tree: ast.AST) -> None:
        """Give every node the Position of its statement; functions and classes are scopes of
        their own (lambda bodies are not numbered: nothing is known inside them)."""
        scopes: List[ast.AST] = [tree]
        while scopes:
            scope = scopes.pop()
            for order, stmt in enumerate(_statements(scope.body)):
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    scopes.append(stmt)
                    continue
                position = Position(scope, order, stmt)
                for node in _own_nodes(stmt):
                    self._positions[id(node)] = position

    def position(self, node: ast.AST) -> Optional[Position]:
        return self._positions.get(id(node))

    # -- facts ----------------------------------------------------------------------------
    def _collect(self) -> None:
        for ref in self.fsdp_refs:
            call = ref.call
            at = self.position(call) if call is not None else None
            if call is None or at is None:
                continue
            inner = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "module"), None)
            self.wraps.append(Wrap(call, "v1" if ref.qualname in FSDP_V1 else "v2", dotted(inner),
                                   _assigned_name(at.statement, call), at, inner))
        for ref in self.references:
            call = ref.call
            if call is None or not _is_optimizer(ref.qualname):
                continue
            at = self.position(call)
            if at is None:
                continue
            params = tuple(_parameters_of(call))
            if params:
                groups = any(type(a) is ast.List and any(type(e) is ast.Dict for e in a.elts) for a in call.args)
                self.optimizers.append(OptimizerBuild(call, _assigned_name(at.statement, call), params, groups, at))
        for at in {id(p.statement): p for p in self._positions.values()}.values():
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
                            self.bindings.append(Binding(name, stmt.value, at))
        self.bindings.sort(key=lambda b: b.at.order)

    # -- queries -------------------------------------------------------------------------
    def rebound_between(self, name: str, scope: ast.AST, start: int, end: int) -> bool:
        """Whether ``name`` is assigned in ``scope`` by a statement strictly between two orders."""
        return any(b.at.scope is scope and start < b.at.order < end and b.name == name for b in self.bindings)

    def wrapped_names(self, scope: ast.AST, before: int) -> Dict[str, Wrap]:
        """Names bound to an FSDP wrapper at statement ``before`` of ``scope`` (last wrap wins,
        unless rebound to something else since)."""
        out: Dict[str, Wrap] = {}
        for wrap in self.wraps:
            if wrap.at.scope is scope and wrap.at.order < before and wrap.target:
                if not self.rebound_between(wrap.target, scope, wrap.at.order, before):
                    out[wrap.target] = wrap
        return out

    def wrapper_at(self, name: Optional[str], node: ast.AST) -> Optional[Wrap]:
        """The FSDP wrap ``name`` is bound to where ``node`` is (same scope, earlier statement)."""
        at = self.position(node)
        if not name or at is None:
            return None
        return self.wrapped_names(at.scope, at.order).get(name)

    def optimizer_named(self, name: Optional[str], node: ast.AST) -> Optional[OptimizerBuild]:
        """The optimizer build ``name`` is bound to where ``node`` is (same scope, not rebound)."""
        at = self.position(node)
        if not name or at is None:
            return None
        found = None
        for build in self.optimizers:
            if build.target == name and build.at.scope is at.scope and build.at.order < at.order:
                found = build
        if found and self.rebound_between(name, at.scope, found.at.order, at.order):
            return None
        return found


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a block in source order, descending into compound statements (not defs)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, field, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            yield from _statements(handler.body)
        for case in getattr(stmt, "cases", None) or []:
            yield from _statements(case.body)


def _own_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of ``stmt`` itself: not its nested statements (numbered on their own), and not
    the insides of nested functions, classes and lambdas (other scopes)."""
    yield stmt
    stack = [child for _, child in _own_children(stmt)]
    while stack:
        node = stack.pop()
        yield node
        if type(node) is not ast.Lambda:
            stack.extend(ast.iter_child_nodes(node))


def _own_children(stmt: ast.stmt) -> Iterator[Tuple[str, ast.AST]]:
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        if isinstance(value, list):
            yield from ((field, v) for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            yield field, value


def _assigned_name(stmt: ast.stmt, call: ast.Call) -> Optional[str]:
    """``x`` in ``x = <call>`` / ``x: T = <call>`` (the call itself, not nested in it)."""
    if type(stmt) is ast.Assign and stmt.value is call and len(stmt.targets) == 1:
        return dotted(stmt.targets[0])
    if type(stmt) is ast.AnnAssign and stmt.value is call:
        return dotted(stmt.target)
    return None


@functools.lru_cache(maxsize=512)
def _is_optimizer(qualname: str) -> bool:
    if qualname.startswith("torch.optim.lr_scheduler") or qualname.startswith("torch.optim.swa_utils"):
        return False
    leaf = qualname.rsplit(".", 1)[-1]
    return qualname.startswith(_OPTIMIZER_MODULES) and leaf[:1].isupper() and bool(_OPTIMIZER_NAME.search(leaf))


def _parameters_of(call: ast.Call) -> Iterator[str]:
    """Dotted names whose ``.parameters()`` (or ``named_parameters()``) feed the optimizer."""
    for node in ast.walk(call):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in ("parameters", "named_parameters") and node is not call:
            name = dotted(node.func.value)
            if name:
                yield name
