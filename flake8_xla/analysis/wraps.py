"""FSDP wrappers a file gets from helpers, of its own or of another module of the project
(``model = shard_module_fsdp(model)`` where the helper returns ``XlaFullyShardedDataParallel(m)``), and
the helpers that all-reduce an optimizer's gradients (``xla_utils.optimizer_step(optim)``)."""
from __future__ import annotations

import ast
import functools
from typing import Callable, List, Optional, Tuple

from .calls import ProjectCalls
from .flow import FSDP_V1, FSDP_V2, FlowFacts, Wrap, _assigned_name, dotted
from .syntax import NodeIndex, is_fallback_return, walk
from .tensors import TensorFacts

# calls that all-reduce an optimizer's gradients across replicas (their first argument)
GRADIENT_REDUCERS = frozenset({"torch_xla.core.xla_model.optimizer_step", "torch_xla.core.xla_model.reduce_gradients",
                               "xla_compat.optimizer_step", "xla_compat.reduce_gradients"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def returned_wrapper(fn: ast.AST, qualname: Callable[[ast.AST], Optional[str]],
                     assigned_value: Callable[[ast.Name], Optional[ast.expr]]) -> str:
    """``"v1"`` / ``"v2"`` when a return of ``fn`` gives an FSDP wrapper it builds (``return FSDP(m)``,
    or a name given one), else ``""``. One such return is enough: the others are the other backends'
    (``if not is_xla(): return module``)."""
    for node in walk(fn.body, _NESTED):
        if type(node) is not ast.Return or node.value is None or is_fallback_return(node.value):
            continue
        value = node.value
        if type(value) is ast.Name:
            value = assigned_value(value) or value
        if type(value) is ast.Call:
            built = qualname(value.func)
            if built in FSDP_V1:
                return "v1"
            if built in FSDP_V2:
                return "v2"
    return ""


def reduced_parameters(fn: ast.AST, qualname: Callable[[ast.AST], Optional[str]], method: bool) -> Tuple[int, ...]:
    """The positions (``self`` not counted) of the parameters of ``fn`` whose gradients it all-reduces:
    passed as the optimizer to ``xm.optimizer_step`` / ``xm.reduce_gradients``."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][1 if method else 0:]
    out = set()
    for node in walk(fn.body, _NESTED):
        if type(node) is ast.Call and node.args and type(node.args[0]) is ast.Name and \
                node.args[0].id in params and qualname(node.func) in GRADIENT_REDUCERS:
            out.add(params.index(node.args[0].id))
    return tuple(sorted(out))


class HelperWraps:
    """The calls of the file that get an FSDP wrapper from a helper, as wraps bound to the name they are
    assigned to."""

    @classmethod
    def from_context(cls, ctx) -> "HelperWraps":
        return cls(ctx)

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def _callee(self, call: ast.Call):
        """(the file's function, or the summary of another module's) a call runs, or None."""
        tensors = self.ctx.get(TensorFacts)
        local = tensors.local_callee(call)
        if local is not None:
            return local, None
        summary = self.ctx.get(ProjectCalls).callee(call, tensors.assigned_value)
        return (None, summary) if summary is not None else None

    @functools.cached_property
    def _helper_calls(self) -> List[Tuple[ast.Call, Optional[ast.AST], object]]:
        """The calls of the file that run a function of the file or of another module of the project."""
        out = []
        for call in self.ctx.get(NodeIndex).of(ast.Call):
            found = self._callee(call)
            if found is not None:
                out.append((call, found[0], found[1]))
        return out

    @functools.cached_property
    def wraps(self) -> List[Wrap]:
        flow, tensors = self.ctx.get(FlowFacts), self.ctx.get(TensorFacts)
        out: List[Wrap] = []
        for call, local, summary in self._helper_calls:
            kind = returned_wrapper(local, flow.qualname, tensors.assigned_value) if local is not None else \
                summary.returns_fsdp
            at = flow.position(call) if kind else None
            if at is None:
                continue
            inner = call.args[0] if call.args else None
            out.append(Wrap(call, kind, dotted(inner), _assigned_name(at.statement, call), at, inner))
        return out

    def wrapper_at(self, name: Optional[str], node: ast.AST) -> Optional[Wrap]:
        """The wrap from a helper that ``name`` is bound to where ``node`` is (same scope, earlier)."""
        flow = self.ctx.get(FlowFacts)
        at = flow.position(node)
        if not name or at is None or not self.wraps:
            return None
        flow.collect()  # the bindings that may rebind the name since
        return flow.wrapped_names(at.scope, at.order, self.wraps).get(name)

    @functools.cached_property
    def reductions(self) -> List[Tuple[ast.Call, int]]:
        """Calls of helpers that all-reduce the gradients of an optimizer they are given, with the position
        of that argument."""
        qualname = self.ctx.get(FlowFacts).qualname
        out = []
        for call, local, summary in self._helper_calls:
            positions = reduced_parameters(local, qualname, type(call.func) is ast.Attribute) \
                if local is not None else summary.reduces
            if positions and positions[0] < len(call.args):
                out.append((call, positions[0]))
        return out


__all__ = ["GRADIENT_REDUCERS", "HelperWraps", "reduced_parameters", "returned_wrapper"]
