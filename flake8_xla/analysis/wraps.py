"""FSDP wrappers a file gets from helpers, of its own or of another module of the project
(``model = shard_module_fsdp(model)`` where the helper returns ``XlaFullyShardedDataParallel(m)``), and
the helpers that all-reduce an optimizer's gradients (``xla_utils.optimizer_step(optim)``)."""
from __future__ import annotations

import ast
import functools
import re
from typing import Callable, Dict, List, Optional, Tuple

from .calls import ProjectCalls
from .flow import FSDP_V1, FSDP_V2, FlowFacts, Wrap, dotted
from .syntax import Fact, NodeIndex, is_fallback_return, walk

# calls that all-reduce an optimizer's gradients across replicas (their first argument)
GRADIENT_REDUCERS = frozenset({"torch_xla.core.xla_model.optimizer_step", "torch_xla.core.xla_model.reduce_gradients",
                               "xla_compat.optimizer_step", "xla_compat.reduce_gradients"})
_OPTIMIZER_ARGUMENT = re.compile(r"(?i)optim|^opt(_|$)")
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


class HelperWraps(Fact):
    """The calls of the file that get an FSDP wrapper from a helper, as wraps bound to the name they are
    assigned to."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    @functools.cached_property
    def _local(self) -> Dict[str, ast.AST]:
        """The file's functions by name, those defined once (a plain ``f(...)`` call runs it)."""
        found: Dict[str, List[ast.AST]] = {}
        for fn in self.ctx.get(NodeIndex).of(ast.FunctionDef, ast.AsyncFunctionDef):
            found.setdefault(fn.name, []).append(fn)
        return {name: defs[0] for name, defs in found.items() if len(defs) == 1}

    def callee(self, call: ast.Call):
        """(the file's function, or the summary of another module's) a call runs, or None. By name
        only: this is asked of every call of a file that reduces gradients or wraps in FSDP."""
        func = call.func
        if type(func) is ast.Name and func.id in self._local and self.ctx.get(FlowFacts).qualname(func) is None:
            return self._local[func.id], None
        summary = self.ctx.get(ProjectCalls).callee(call)
        return (None, summary) if summary is not None else None

    def wrapper_at(self, name: Optional[str], node: ast.AST) -> Optional[Wrap]:
        """The FSDP wrapper from a helper that ``name`` is bound to where ``node`` is: its last assignment
        before ``node`` in the same scope is a call of a helper that returns one (``model = shard(model)``)."""
        flow = self.ctx.get(FlowFacts)
        at = flow.position(node)
        if not name or at is None:
            return None
        flow.collect()
        bound = flow.bindings_before(name, at)
        value = bound[-1].value if bound else None
        if type(value) is not ast.Call:
            return None
        found = self.callee(value)
        if found is None:
            return None
        local, summary = found
        kind = returned_wrapper(local, flow.qualname, flow.value_of) if local is not None else summary.returns_fsdp
        if not kind:
            return None
        inner = value.args[0] if value.args else None
        return Wrap(value, kind, dotted(inner), name, bound[-1].at, inner)

    @functools.cached_property
    def assigned(self) -> List[Wrap]:
        """FSDP wrappers from helpers assigned to a name: ``model = shard(model)``, ``fsdp = wrap(net)``."""
        return self.assigned_to(None)

    def assigned_to(self, names: Optional[frozenset]) -> List[Wrap]:
        """:attr:`assigned`, of the assignments to ``names`` only (None: all): asking a helper of another
        module means reading that module, which a cold run pays for."""
        flow = self.ctx.get(FlowFacts)
        out: List[Wrap] = []
        for stmt in self.ctx.get(NodeIndex).of(ast.Assign):
            value = stmt.value
            if type(value) is not ast.Call or not value.args or len(stmt.targets) != 1:
                continue
            if names is not None and dotted(stmt.targets[0]) not in names:
                continue
            found = self.callee(value)
            if found is None:
                continue
            local, summary = found
            kind = returned_wrapper(local, flow.qualname, flow.value_of) if local is not None else \
                summary.returns_fsdp
            at = flow.position(stmt) if kind else None
            if at is not None:
                out.append(Wrap(value, kind, dotted(value.args[0]), dotted(stmt.targets[0]), at, value.args[0]))
        return out

    @functools.cached_property
    def reductions(self) -> List[Tuple[ast.Call, int]]:
        """Calls of helpers that all-reduce the gradients of an optimizer they are given (an argument named
        like one: ``optim``, ``optimizer``, ``opt``), with the position of that argument."""
        out = []
        for call in self.ctx.get(NodeIndex).of(ast.Call):
            given = [i for i, a in enumerate(call.args) if type(a) is ast.Name and _OPTIMIZER_ARGUMENT.search(a.id)]
            found = self.callee(call) if given else None
            if found is None:
                continue
            local, summary = found
            positions = reduced_parameters(local, self.ctx.get(FlowFacts).qualname, False) if local is not None \
                else summary.reduces
            if positions and positions[0] in given:
                out.append((call, positions[0]))
        return out


__all__ = ["GRADIENT_REDUCERS", "HelperWraps", "reduced_parameters", "returned_wrapper"]
