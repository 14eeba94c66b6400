"""Which code surely runs on the XLA device: whether a node runs whenever its scope does there (no
branch, handler or short-circuit between them, not after a branch that leaves on XLA), and what makes
a scope run on XLA (the device taken, a sync, a device loader, ``"xla"`` as a device)."""
from __future__ import annotations

import ast
import functools
from typing import Dict, List, NamedTuple, Optional

from .backends import on_xla
from .device_values import DeviceValues
from .devices import XLA_DEVICE_CALLS
from .control import FlowFacts
from .loops import STEP_MARKERS, SYNCS
from .off_xla import OffXla
from .semantic import QualifiedNames
from .syntax import Fact, NodeIndex, Parents, leaves, walk

# what makes a scope run on XLA: the device, a sync, an XLA optimizer step, a device loader
XLA_ONLY_CALLS = XLA_DEVICE_CALLS | SYNCS | STEP_MARKERS | frozenset({
    "torch_xla.distributed.parallel_loader.MpDeviceLoader", "torch_xla.distributed.parallel_loader.ParallelLoader"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class Evidence(NamedTuple):
    node: ast.AST
    label: str


class XlaScopes(Fact):
    """Where code surely runs in its scope, and which scopes surely run on the XLA device."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.flow: FlowFacts = ctx.get(FlowFacts)
        self.names = ctx.get(QualifiedNames)
        self.index: NodeIndex = ctx.get(NodeIndex)
        self._evidence: Dict[int, Optional[Evidence]] = {}

    @property
    def parents(self) -> Dict[int, ast.AST]:
        return self.ctx.get(Parents).map

    @functools.cached_property
    def never(self) -> set:
        return self.ctx.get(OffXla).nodes

    @functools.cached_property
    def statements(self) -> Dict[int, ast.AST]:
        return {id(n): n for n in self.index.of(ast.If, ast.Try, getattr(ast, "TryStar", ast.Try), ast.Match)
                if n is not None}

    def unconditional(self, node: ast.AST, xla_branches: bool = False, periodic: bool = False) -> bool:
        """Whether ``node`` runs whenever its scope does and the scope runs on XLA: no branch,
        handler, guarded try, conditional expression, ``and``/``or`` or lambda between them, except
        (``xla_branches``) the body of a test that holds on XLA (``if xm.xla_device_hw(d) == 'TPU':``)
        and (``periodic``) of ``if step % n == 0:``; not after a branch that leaves the scope on XLA
        (``if args.tpu: ...; return``); and never in code that does not run on XLA."""
        if id(node) in self.never:
            return False
        place = self.flow.place(node)
        if place is None:
            return False
        for key, block in place.branches:
            stmt = self.statements.get(key)
            if type(stmt) is not ast.If or not (xla_branches and _holds_on_xla(stmt, block, periodic)):
                return False
        child, parent = node, self.parents.get(id(node))
        while parent is not None and type(parent) not in _DEFS:
            kind = type(parent)
            if isinstance(child, ast.stmt) and _left_on_xla(_block_before(parent, child)):
                return False  # `if args.tpu: ... return` (or `assert torch.cuda.is_available()`) before it
            if kind is ast.IfExp and child is not parent.test or kind is ast.BoolOp and child is not parent.values[0]:
                return False
            if kind is ast.comprehension and child in parent.ifs:
                return False
            if kind in (ast.Try, getattr(ast, "TryStar", ast.Try)) and parent.handlers and \
                    any(child is s for s in parent.body):
                return False
            child, parent = parent, self.parents.get(id(parent))
        return parent is None or not _left_on_xla(_block_before(parent, child))

    def evidence(self, scope: ast.AST) -> Optional[Evidence]:
        """What makes ``scope`` run on the XLA device, found once per scope: an XLA-only call in it
        (the device, a sync, xm.optimizer_step, a device loader), ``"xla"`` as a device, or a name
        given the XLA device, each running whenever the scope does."""
        key = id(scope)
        if key not in self._evidence:
            self._evidence[key] = self._find(scope)
        return self._evidence[key]

    def _find(self, scope: ast.AST) -> Optional[Evidence]:
        devices = self.ctx.get(DeviceValues)
        body = scope.body if type(scope) is not ast.Lambda else [scope.body]
        nodes = [n for n in walk(body, _DEFS) if type(n) in (ast.Call, ast.Name)]
        for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):
            kind = type(node)
            if kind is ast.Call:
                if _names_xla(self.names.qualname(node.func), node, devices) and self.unconditional(node):
                    return Evidence(node, _spelled(node))
            elif kind is ast.Name and type(node.ctx) is ast.Load and self.names.qualname(node) is None:
                value = devices.xla_device_value(node)
                if value is not None and self.unconditional(node) and self.unconditional(value):
                    return Evidence(value, _spelled(value))
        return None


def _names_xla(qualname: Optional[str], call: ast.Call, devices: DeviceValues) -> bool:
    """An XLA-only call, ``torch.device("xla")``, ``.to("xla")`` or ``torch.<factory>(..., device="xla")``."""
    if qualname in XLA_ONLY_CALLS:
        return True
    first = call.args[0] if call.args else None
    moved = qualname is None and type(call.func) is ast.Attribute and call.func.attr == "to"
    if (qualname == "torch.device" or moved) and type(first) is ast.Constant and \
            devices.xla_device_value(first) is not None:
        return True
    # device="xla" given to torch (a factory); the project's own functions may take either device on purpose
    return (qualname or "").startswith("torch.") and any(
        k.arg == "device" and type(k.value) is ast.Constant and devices.xla_device_value(k.value) is not None
        for k in call.keywords)


def _holds_on_xla(stmt: ast.If, block: object, periodic: bool) -> bool:
    """Whether the block of ``stmt`` runs on XLA whenever the ``if`` is reached there: the body of a
    test that holds on XLA, the ``else`` of one that never does, or (``periodic``) the body of
    ``if step % n == 0:``."""
    xla = on_xla(stmt.test)
    if xla is True and block == "body" or xla is False and block == "orelse":
        return True
    return periodic and block == "body" and any(type(n) is ast.BinOp and type(n.op) is ast.Mod
                                                for n in walk([stmt.test]))


def _block_before(parent: ast.AST, child: ast.stmt) -> List[ast.stmt]:
    """The statements before ``child`` in the block of ``parent`` that holds it."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if type(block) is list:
            for position, stmt in enumerate(block):
                if stmt is child:
                    return block[:position]
    return []


def _left_on_xla(before: List[ast.stmt]) -> bool:
    """Whether one of ``before`` leaves the block on XLA: ``if <holds on XLA>: ... return`` (raise,
    continue, break, sys.exit()), or ``assert torch.cuda.is_available()``."""
    for stmt in before:
        if type(stmt) is ast.If and on_xla(stmt.test) is True and not stmt.orelse and leaves(stmt.body[-1]):
            return True
        if type(stmt) is ast.Assert and on_xla(stmt.test) is False:
            return True
    return False


def _spelled(call: ast.AST) -> str:
    text = ast.unparse(call)
    if len(text) > 40 or "\n" in text:
        text = ast.unparse(call.func) + "(...)" if type(call) is ast.Call else "..."
    return text

