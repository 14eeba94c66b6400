"""FSDP wraps: which expressions the file wraps with FSDP and into which name, which optimizers it
builds from which modules' parameters, and which wrapper a name holds where; the FSDP wrappers it
gets from helpers, of its own or of another module of the project (``model = shard_module_fsdp(model)``
where the helper returns ``XlaFullyShardedDataParallel(m)``), and the helpers that all-reduce an
optimizer's gradients (``xla_utils.optimizer_step(optim)``)."""
from __future__ import annotations

import ast
import functools
import re
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from .assignments import Assignments
from .calls import ProjectCalls
from .control import FlowFacts, Position
from .semantic import QualifiedNames, SemanticModel
from .syntax import Fact, NodeIndex, dotted, is_fallback_return, prefixes, walk, within_dotted

FSDP_V1 = frozenset({
    "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel",
    "torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel",
})
FSDP_V2 = frozenset({
    "torch_xla.experimental.spmd_fully_sharded_data_parallel.SpmdFullyShardedDataParallel",
})
FSDP_ANY = FSDP_V1 | FSDP_V2

# calls that all-reduce an optimizer's gradients across replicas (their first argument)
GRADIENT_REDUCERS = frozenset({"torch_xla.core.xla_model.optimizer_step", "torch_xla.core.xla_model.reduce_gradients",
                               "xla_compat.optimizer_step", "xla_compat.reduce_gradients"})
_OPTIMIZER_ARGUMENT = re.compile(r"(?i)optim|^opt(_|$)")
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

# optimizers: torch.optim.X and the usual third-party ones; the name must look like an optimizer
_OPTIMIZER_MODULES = ("torch.optim.", "transformers.", "bitsandbytes.optim.", "apex.optimizers.", "timm.optim.")
_OPTIMIZER_NAME = re.compile(r"(?i)(adam|sgd|adagrad|adadelta|rmsprop|lamb|lars|lion|adafactor|optimizer|lbfgs"
                             r"|nadam|radam|asgd|rprop|sophia|shampoo)")


@functools.lru_cache(maxsize=512)
def is_optimizer(qualname: str) -> bool:
    if qualname.startswith("torch.optim.lr_scheduler") or qualname.startswith("torch.optim.swa_utils"):
        return False
    leaf = qualname.rsplit(".", 1)[-1]
    return qualname.startswith(_OPTIMIZER_MODULES) and leaf[:1].isupper() and bool(_OPTIMIZER_NAME.search(leaf))


def parameter_owners(node: ast.AST) -> Iterator[str]:
    """Dotted names whose ``.parameters()`` (or ``named_parameters()``) are called in ``node``."""
    for sub in ast.walk(node):
        if type(sub) is ast.Call and type(sub.func) is ast.Attribute and \
                sub.func.attr in ("parameters", "named_parameters"):
            name = dotted(sub.func.value)
            if name:
                yield name


class Wrap(NamedTuple):
    call: ast.Call
    kind: str  # "v1" (XlaFullyShardedDataParallel) or "v2" (SpmdFullyShardedDataParallel)
    wrapped: Optional[str]  # dotted name of the module argument, when it is a name
    target: Optional[str]  # dotted name the wrapper is assigned to, when it is
    at: Position
    inner: Optional[ast.AST]  # the module argument expression

    @property
    def label(self) -> str:
        return "FSDP" if self.kind == "v1" else "FSDPv2"


class OptimizerBuild(NamedTuple):
    call: ast.Call
    target: Optional[str]
    params_of: Tuple[str, ...]  # dotted names whose .parameters()/.named_parameters() it takes
    param_groups: bool  # built from a list of parameter-group dicts
    at: Position


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


class FsdpWraps(Fact):
    """The file's own FSDP wraps and optimizer builds, and which of them a name is bound to where."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.flow: FlowFacts = ctx.get(FlowFacts)
        self.refs = [r for r in ctx.get(SemanticModel).references if r.qualname in FSDP_ANY and not r.is_import]
        self.wraps: List[Wrap] = []
        for ref in self.refs:
            call = ref.call
            at = self.flow.position(call) if call is not None else None
            if call is None or at is None:
                continue
            inner = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "module"), None)
            self.wraps.append(Wrap(call, "v1" if ref.qualname in FSDP_V1 else "v2", dotted(inner),
                                   _assigned_name(at.statement, call), at, inner))

    @functools.cached_property
    def optimizers(self) -> List[OptimizerBuild]:
        """The optimizers built from modules' parameters (``Adam(model.parameters())``), in reference order."""
        out: List[OptimizerBuild] = []
        for ref in self.ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or not is_optimizer(ref.qualname):
                continue
            at = self.flow.position(call)
            if at is None:
                continue
            params = tuple(parameter_owners(call))
            if params:
                groups = any(type(a) is ast.List and any(type(e) is ast.Dict for e in a.elts) for a in call.args)
                out.append(OptimizerBuild(call, _assigned_name(at.statement, call), params, groups, at))
        return out

    def wrapped_names(self, scope: ast.AST, before: int, wraps: Optional[List[Wrap]] = None) -> Dict[str, Wrap]:
        """Names bound to an FSDP wrapper at statement ``before`` of ``scope`` (last wrap wins,
        unless rebound to something else since); ``wraps``: others than the file's own FSDP calls."""
        out: Dict[str, Wrap] = {}
        for wrap in self.wraps if wraps is None else wraps:
            if wrap.at.scope is scope and wrap.at.order < before and wrap.target:
                if not self._bindings.rebound_between(wrap.target, scope, wrap.at.order, before):
                    out[wrap.target] = wrap
        return out

    def wrapper_at(self, name: Optional[str], node: ast.AST) -> Optional[Wrap]:
        """The FSDP wrap ``name`` is bound to where ``node`` is (same scope, earlier statement)."""
        at = self.flow.position(node)
        if not name or at is None:
            return None
        return self.wrapped_names(at.scope, at.order).get(name)

    def optimizer_named(self, name: Optional[str], node: ast.AST) -> Optional[OptimizerBuild]:
        """The optimizer build ``name`` is bound to where ``node`` is (same scope, not rebound)."""
        at = self.flow.position(node)
        if not name or at is None:
            return None
        found = None
        for build in self.optimizers:
            if build.target == name and build.at.scope is at.scope and build.at.order < at.order:
                found = build
        if found and self._bindings.rebound_between(name, at.scope, found.at.order, at.order):
            return None
        return found

    def outer_wraps(self, kind: str) -> Dict[int, Wrap]:
        """id(call) of each ``kind`` wrap that is nested into another ``kind`` wrap -> the first such one
        (see :meth:`nested_in`)."""
        wraps = [w for w in self.wraps if w.kind == kind]
        out: Dict[int, Wrap] = {}
        if len(wraps) < 2:
            return out
        for inner in wraps:
            outer = next((o for o in wraps if o is not inner and self.nested_in(inner, o)), None)
            if outer is not None:
                out[id(inner.call)] = outer
        return out

    def nested_in(self, inner: Wrap, outer: Wrap) -> bool:
        """Whether the wrapper bound by ``inner`` is, for sure, part of the module ``outer`` wraps:
        assigned onto it (``m.layer = FSDP(m.layer)`` then ``FSDP(m)``), passed to its constructor
        (``FSDP(Net(inner))``, or ``m = Net(inner)`` then ``FSDP(m)``), or stored on it
        (``m.block = inner`` then ``FSDP(m)``)."""
        name, parent = inner.target, outer.wrapped
        scope = inner.at.scope
        if not name or outer.at.scope is not scope or not self.flow.runs_before(inner.at, outer.at):
            return False
        start, end = inner.at.order, outer.at.order
        if parent and name.startswith(parent + "."):
            chain = [n for n in prefixes(name) if within_dotted(n, parent)] + [name]
            return not any(self._bindings.rebound_between(n, scope, start, end) for n in chain)
        if self._bindings.rebound_between(name, scope, start, end):
            return False
        if name in _passed_names(outer.inner):
            return True
        if not parent:
            return False
        for binding in reversed(self._bindings.bindings):
            at = binding.at
            if at.scope is not scope or not start < at.order < end:
                continue
            if binding.name == parent:
                # the last binding of the parent before the wrap: it must surely run and take the wrapper
                return self.flow.runs_before(at, outer.at) and name in _passed_names(binding.value) and \
                    not self._bindings.rebound_between(name, scope, start, at.order)
            if binding.name.startswith(parent + ".") and dotted(binding.value) == name and \
                    self.flow.runs_before(at, outer.at) and \
                    not self._bindings.rebound_between(parent, scope, at.order, end):
                return True
        return False

    @property
    def _bindings(self) -> Assignments:
        return self.ctx.get(Assignments)


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
        if type(func) is ast.Name and func.id in self._local and self.ctx.get(QualifiedNames).qualname(func) is None:
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
        bindings = self.ctx.get(Assignments)
        bound = bindings.bindings_before(name, at)
        value = bound[-1].value if bound else None
        if type(value) is not ast.Call:
            return None
        found = self.callee(value)
        if found is None:
            return None
        local, summary = found
        qualname = self.ctx.get(QualifiedNames).qualname
        kind = returned_wrapper(local, qualname, bindings.value_of) if local is not None else summary.returns_fsdp
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
        flow, qualname = self.ctx.get(FlowFacts), self.ctx.get(QualifiedNames).qualname
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
            kind = returned_wrapper(local, qualname, self._value_of) if local is not None else \
                summary.returns_fsdp
            at = flow.position(stmt) if kind else None
            if at is not None:
                out.append(Wrap(value, kind, dotted(value.args[0]), dotted(stmt.targets[0]), at, value.args[0]))
        return out

    def _value_of(self, name: ast.Name) -> Optional[ast.AST]:
        return self.ctx.get(Assignments).value_of(name)

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
            positions = reduced_parameters(local, self.ctx.get(QualifiedNames).qualname, False) if local is not None \
                else summary.reduces
            if positions and positions[0] in given:
                out.append((call, positions[0]))
        return out


def _assigned_name(stmt: ast.stmt, call: ast.Call) -> Optional[str]:
    """``x`` in ``x = <call>`` / ``x: T = <call>`` (the call itself, not nested in it)."""
    if type(stmt) is ast.Assign and stmt.value is call and len(stmt.targets) == 1:
        return dotted(stmt.targets[0])
    if type(stmt) is ast.AnnAssign and stmt.value is call:
        return dotted(stmt.target)
    return None


def _passed_names(expr: Optional[ast.AST]) -> Iterator[str]:
    """Dotted names handed to a constructor call as arguments (``Net(inner)``,
    ``nn.Sequential(a, b)``, ``Net(layers=[a, b])``, ``Net(Block(a))``)."""
    if type(expr) is not ast.Call:
        return
    stack = list(expr.args) + [k.value for k in expr.keywords]
    while stack:
        node = stack.pop()
        name = dotted(node)
        if name:
            yield name
        elif type(node) in (ast.List, ast.Tuple, ast.Set):
            stack.extend(node.elts)
        elif type(node) is ast.Call:
            stack.extend(list(node.args) + [k.value for k in node.keywords])


__all__ = ["FSDP_ANY", "FSDP_V1", "FSDP_V2", "FsdpWraps", "GRADIENT_REDUCERS", "HelperWraps", "OptimizerBuild", "Wrap",
           "is_optimizer", "parameter_owners", "reduced_parameters", "returned_wrapper"]
