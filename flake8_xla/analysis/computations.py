"""Which nodes of a file surely compile and run a graph on the XLA device (a collective that always
computes, a sync after device operations, a host read of a computed value, a compiled function's
call, a loop over a device loader), and where each runs."""
from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from .callgraph import LocalFunctions
from .control import FlowFacts, within
from .loops import LOOPS, SYNCS, RegionKind, StepRegions
from .reads import READ_METHODS
from .semantic import QualifiedNames, SemanticModel
from .syntax import Fact, NodeIndex, argument, is_constant, walk
from .tensors import TensorFacts
from .values import DEVICE

XM = "torch_xla.core.xla_model."
# calls that compile and run a graph whatever came before (measured on 2.9, one CPU process)
ALWAYS_COMPUTE = frozenset(XM + n for n in ("rendezvous", "xla_rendezvous", "mesh_reduce", "broadcast_master_param"))
OPTIMIZER_STEP = XM + "optimizer_step"
STEP = frozenset({"torch_xla.step", "torch_xla.torch_xla.step"})
# reading a device value on the host runs the graph that computes it
_HOST_BUILTINS = frozenset({"float", "int", "bool", "print"})
# calls that put data on the device or view it without computing anything: a sync after them alone
# runs nothing (measured: `.to(device)` then torch_xla.sync() leaves the cache uninitialized)
_NOT_COMPUTING = frozenset({"to", "cuda", "clone", "detach", "contiguous", "requires_grad_", "pin_memory", "view",
                            "reshape", "expand", "permute", "transpose", "squeeze", "unsqueeze", "flatten", "t",
                            "narrow", "select", "type", "train", "eval", "parameters", "state_dict"})
_FACTORIES = frozenset("torch." + n for n in (
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "eye", "tensor",
    "as_tensor", "from_numpy", "zeros_like", "ones_like", "empty_like", "full_like", "scalar_tensor", "device"))


class DeviceComputations(Fact):
    """Nodes of the file that surely compile and run a graph on the device, with how the message names them
    and where they run."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.flow = ctx.get(FlowFacts)
        self.names = ctx.get(QualifiedNames)
        self.tensors = ctx.get(TensorFacts)
        self.regions = ctx.get(StepRegions)
        self.found: List[Tuple[ast.AST, str, object]] = []
        index = ctx.get(NodeIndex)
        operations: Optional[List[Tuple[ast.AST, object]]] = None
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None:
                continue
            spelled = ref.written_prefix(ref.qualname)
            if ref.qualname in ALWAYS_COMPUTE or (
                    ref.qualname == OPTIMIZER_STEP and is_constant(argument(call, 2, "barrier"), True)):
                self._add(call, f"{spelled}()")
            elif ref.qualname in SYNCS or (ref.qualname in STEP and self._with_item(call)):
                if operations is None:
                    operations = [(n, p) for n in index.of(ast.BinOp, ast.UnaryOp, ast.Call)
                                  if self._computes(n, 0) for p in [self.flow.place(n)] if p is not None]
                at = self.flow.place(call)
                if at is not None and any(
                        (n.lineno, n.col_offset) < (call.lineno, call.col_offset) and within(at, p)
                        for n, p in operations) or (ref.qualname in STEP and self._body_computes(call)):
                    label = f"with {spelled}()" if ref.qualname in STEP else f"{spelled}() after device operations"
                    self._add(call, label)
        for call in index.of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and func.attr in READ_METHODS and not call.args and \
                    self._computes(func.value, 0):
                self._add(call, f".{func.attr}()")
            elif type(func) is ast.Name and func.id in _HOST_BUILTINS and len(call.args) == 1 and \
                    self.names.qualname(func) is None and self._computes(call.args[0], 0):
                self._add(call, f"{func.id}()")
            elif self._compiled(call):
                self._add(call, f"the compiled {ast.unparse(func)}()")
        for loop in index.of(*LOOPS):
            iterable = getattr(loop, "iter", None)
            if iterable is not None and self.tensors.yields_device(iterable) and \
                    any(type(n) is ast.Call for n in walk(loop.body)):
                self._add(iterable, "the loop over a device loader")

    def _add(self, node: ast.AST, what: str) -> None:
        place = self.flow.place(node)
        if place is not None:
            self.found.append((node, what, place))

    def _with_item(self, call: ast.Call) -> bool:
        return any(type(w) in (ast.With, ast.AsyncWith) and any(i.context_expr is call for i in w.items)
                   for w in self.ctx.get(NodeIndex).of(ast.With, ast.AsyncWith))

    def _body_computes(self, call: ast.Call) -> bool:
        for w in self.ctx.get(NodeIndex).of(ast.With, ast.AsyncWith):
            if any(i.context_expr is call for i in w.items):
                return any(self._computes(n, 0) for n in walk(w.body)
                           if type(n) in (ast.BinOp, ast.UnaryOp, ast.Call))
        return False

    def _computes(self, node: ast.AST, depth: int) -> bool:
        """An operation on device tensors (not a transfer, a view or a factory), or a name given one."""
        if depth > 3:
            return False
        if type(node) is ast.Name:
            value = self.tensors.assigned_value(node)
            return value is not None and self._computes(value, depth + 1)
        if type(node) not in (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare) or self.tensors.kind(node) != DEVICE:
            return False
        if type(node) is ast.Call:
            func = node.func
            if type(func) is ast.Attribute and func.attr in _NOT_COMPUTING:
                return False
            if self.names.qualname(func) in _FACTORIES:
                return False
        return True

    def _compiled(self, call: ast.Call) -> bool:
        """A call of a function traced by torch_xla.compile: ``f = torch_xla.compile(fn)`` then ``f(x)``,
        or a function of the file decorated with it."""
        func = call.func
        if type(func) is ast.Name:
            value = self.tensors.assigned_value(func)
            if type(value) is ast.Call and self.regions.compile_kind(value) == RegionKind.COMPILED:
                return True
        compiled = self.regions.compiled_functions
        return any(compiled.get(id(fn)) == RegionKind.COMPILED and any(
            self.regions.compile_kind(d) == RegionKind.COMPILED for d in fn.decorator_list)
            for fn in self.ctx.get(LocalFunctions).targets(call))
