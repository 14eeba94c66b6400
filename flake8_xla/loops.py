"""Per-step loop detection for the graph rules (XLA3xx), part of the shared semantic layer.

A training loop is a ``for``/``while`` loop whose own body (nested functions and inner loops
excluded) calls ``.backward()``, an optimizer's ``.step()`` or ``xm.optimizer_step``. Code inside
it runs once per step; code after it, in an epoch loop around it, or in an evaluation loop (no
backward, no optimizer step) does not count. A statement under ``if step % N == 0`` (or any
test using ``%``) is throttled: it runs every N steps, which the rules accept for logging and
checkpoints.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence

from .syntax import walk
from .semantic import Reference

# calls that mark a loop body as one training step
STEP_MARKERS: FrozenSet[str] = frozenset({"torch_xla.core.xla_model.optimizer_step", "xla_compat.optimizer_step"})
# calls that cut the graph and hand it to the device
SYNCS: FrozenSet[str] = frozenset({"torch_xla.sync", "torch_xla.core.xla_model.mark_step", "xla_compat.sync"})
LOOPS = (ast.For, ast.AsyncFor, ast.While)
_BACKWARD_KEYWORDS = frozenset({"gradient", "retain_graph", "create_graph", "inputs"})
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass(frozen=True)
class StepLoop:
    loop: ast.AST  # the For/While node
    throttled: FrozenSet[int]  # id() of the nodes under an `if ... % ...:` inside it


def _own_nodes(nodes: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Nodes under ``nodes`` without entering nested functions, classes, lambdas or loops (an
    inner loop is its own step loop; an epoch loop around it is not one)."""
    return iter(walk(nodes, SCOPES + LOOPS))


def _marks_a_step(node: ast.AST, qualnames: Dict[int, str]) -> bool:
    if type(node) is not ast.Call:
        return False
    func = node.func
    if qualnames.get(id(func)) in STEP_MARKERS:
        return True
    # loss.backward() / optimizer.step() / opt.step(closure): the receiver's type is unknown, so the
    # method name with autograd's arguments (a turtle's backward(100) has a distance) is the signal
    return type(func) is ast.Attribute and (
        (func.attr == "backward" and not node.args and all(k.arg in _BACKWARD_KEYWORDS for k in node.keywords)) or
        (func.attr == "step" and len(node.args) <= 1 and "optim" in ast.unparse(func.value).lower()))


def _is_throttle(node: ast.AST) -> bool:
    """``if step % N == 0:`` (any test using ``%``)."""
    return type(node) is ast.If and any(type(n) is ast.BinOp and type(n.op) is ast.Mod for n in walk([node.test]))


def _throttled(body: Sequence[ast.stmt]) -> FrozenSet[int]:
    out = set()
    for node in _own_nodes(body):
        if _is_throttle(node):
            out.update(id(n) for n in _own_nodes(node.body))
    return frozenset(out)


def step_loops(loops: Sequence[ast.AST], references: Sequence[Reference]) -> List[StepLoop]:
    """The loops (of those given) that run a training step per iteration."""
    qualnames = {id(r.node): r.qualname for r in references if not r.is_import}
    return [StepLoop(node, _throttled(node.body)) for node in loops
            if not _over_constants(node) and any(_marks_a_step(n, qualnames) for n in _own_nodes(node.body))]


def _over_constants(loop: ast.AST) -> bool:
    """``for flag in (True, False):``: a loop over a few settings, not over steps."""
    items = getattr(loop, "iter", None)
    return type(items) in (ast.Tuple, ast.List, ast.Set) and all(type(e) is ast.Constant for e in items.elts)


def in_step(node: ast.AST, loops: Sequence[StepLoop]) -> bool:
    """Whether ``node`` runs on every step of a training loop (not throttled, not in a nested def)."""
    for step in loops:
        body = step.loop.body
        if any(n is node for n in _own_nodes(body)) and id(node) not in step.throttled:
            return True
    return False


# -- step regions: every place whose code runs once per step -------------------------------------
TRAINING_LOOP = "training loop"  # a loop whose body calls backward / an optimizer step
MODEL_LOOP = "model loop"  # a loop whose body runs a model on device tensors (evaluation, generation)
COMPILED = "torch_xla.compile"  # a function (or with block) traced by torch_xla.compile / torch_xla.step
DYNAMO = "openxla"  # a function compiled by torch.compile(backend="openxla")
FORWARD = "forward"  # forward() of an nn.Module subclass: runs on every forward pass

XLA_COMPILE = frozenset({"torch_xla.compile", "torch_xla.step", "torch_xla.torch_xla.compile",
                         "torch_xla.torch_xla.step"})
_OPENXLA = frozenset({"openxla", "openxla_eval"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class StepRegion:
    node: ast.AST  # the loop, function or with statement
    kind: str  # TRAINING_LOOP, MODEL_LOOP, COMPILED, DYNAMO or FORWARD


def _inside(nodes: Sequence[ast.AST]) -> List[ast.AST]:
    """Like :func:`_own_nodes`, but entering inner loops (a compiled step runs them all)."""
    return walk(nodes, SCOPES)


class StepRegions:
    """Which region, if any, runs a node once per step. Code under ``if ... % ...:`` (throttled),
    in nested functions and lambdas (callbacks such as add_step_closure's) belongs to none.
    Training loops are found on first use; the other regions, which need the tensor layer, only
    when a rule asks where a node runs."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    @functools.cached_property
    def qualnames(self) -> Dict[int, str]:
        return {id(r.node): r.qualname for r in self.ctx.model.references if not r.is_import}

    @functools.cached_property
    def training_loops(self) -> List[StepLoop]:
        return step_loops(self.ctx.nodes_of(*LOOPS), self.ctx.model.references)

    def region_of(self, node: ast.AST) -> Optional[StepRegion]:
        return self._regions.get(id(node))

    @functools.cached_property
    def _regions(self) -> Dict[int, StepRegion]:
        ctx, qualnames = self.ctx, self.qualnames
        regions: Dict[int, StepRegion] = {}
        compiled = self.compiled_functions
        for node in ctx.nodes_of(*_DEFS):
            if id(node) in compiled:
                _claim(regions, StepRegion(node, compiled[id(node)]), _inside(node.body))
        for node in ctx.nodes_of(ast.With, ast.AsyncWith):
            if any(type(item.context_expr) is ast.Call and qualnames.get(id(item.context_expr.func)) in XLA_COMPILE
                   for item in node.items):
                _claim(regions, StepRegion(node, COMPILED), _inside(node.body))
        for step in self.training_loops:
            _claim(regions, StepRegion(step.loop, TRAINING_LOOP), _loop_nodes(step.loop))
        for node in ctx.nodes_of(*LOOPS) if ctx.tensors.may_have_modules else ():
            if id(node) not in regions and self._runs_model(node):
                _claim(regions, StepRegion(node, MODEL_LOOP), _loop_nodes(node))
        for cls in ctx.tensors.module_classes.values():
            for fn in cls.body:
                if type(fn) in _DEFS and fn.name == "forward":
                    _claim(regions, StepRegion(fn, FORWARD), _inside(fn.body))
        return regions

    def _runs_model(self, loop: ast.AST) -> bool:
        kind = self.ctx.tensors.kind
        for node in _own_nodes(loop.body):
            func = getattr(node, "func", None)
            # model(x) or self.model(x): a method call on anything else is not a module call
            if type(node) is ast.Call and (type(func) is ast.Name or type(func) is ast.Attribute and
                                           type(func.value) is ast.Name and func.value.id == "self") and \
                    kind(func) == "module" and \
                    any(kind(a) == "device" for a in list(node.args) + [k.value for k in node.keywords]):
                return True
        return False

    def compile_kind(self, call_or_name: ast.AST) -> Optional[str]:
        """COMPILED for torch_xla.compile / torch_xla.step (a call or a bare decorator), DYNAMO for
        torch.compile(backend="openxla"), else None."""
        func = call_or_name.func if type(call_or_name) is ast.Call else call_or_name
        qualname = self.qualnames.get(id(func))
        if qualname in XLA_COMPILE:
            return COMPILED
        if qualname == "torch.compile" and type(call_or_name) is ast.Call:
            backend = next((k.value for k in call_or_name.keywords if k.arg == "backend"), None)
            if type(backend) is ast.Constant and backend.value in _OPENXLA:
                return DYNAMO
        return None

    @functools.cached_property
    def compiled_functions(self) -> Dict[int, str]:
        """id() of each function traced as one step -> COMPILED or DYNAMO: decorated, or passed
        to torch_xla.compile / torch.compile(backend="openxla") by name."""
        compiler = self.compile_kind

        out: Dict[int, str] = {}
        by_name: Dict[str, List[ast.AST]] = {}
        for node in self.ctx.nodes_of(*_DEFS):
            by_name.setdefault(node.name, []).append(node)
            for decorator in node.decorator_list:
                how = compiler(decorator)
                if how:
                    out[id(node)] = how
        for ref in self.ctx.model.references:
            call = ref.call
            if call is None or not call.args or ref.qualname not in XLA_COMPILE | {"torch.compile"}:
                continue
            how, target = compiler(call), call.args[0]
            name = target.id if type(target) is ast.Name else \
                target.attr if type(target) is ast.Attribute and type(target.value) is ast.Name \
                and target.value.id == "self" else None
            if how and name:
                for fn in by_name.get(name, ()):
                    out.setdefault(id(fn), how)
        return out


def compiled_callables(ctx, kind: str) -> Dict[str, ast.AST]:
    """Names that call a step traced by ``kind`` (COMPILED or DYNAMO) -> the def or compile call:
    decorated functions, and names assigned ``torch.compile(f, backend="openxla")`` (or
    ``torch_xla.compile(f)``), also as ``self.name``."""
    regions: StepRegions = ctx.step_regions
    out: Dict[str, ast.AST] = {}
    for fn in ctx.nodes_of(*_DEFS):
        if regions.compiled_functions.get(id(fn)) == kind and any(
                regions.qualnames.get(id(d.func if type(d) is ast.Call else d)) for d in fn.decorator_list):
            out[fn.name] = fn
    for assign in ctx.nodes_of(ast.Assign):
        value = assign.value
        if type(value) is ast.Call and regions.compile_kind(value) == kind:
            for target in assign.targets:
                name = target.id if type(target) is ast.Name else \
                    f"self.{target.attr}" if type(target) is ast.Attribute and type(target.value) is ast.Name \
                    and target.value.id == "self" else None
                if name:
                    out[name] = value
    return out


def _loop_nodes(loop: ast.AST) -> List[ast.AST]:
    nodes = walk(loop.body, SCOPES + LOOPS)
    if type(loop) is ast.While:
        nodes += walk([loop.test], SCOPES + LOOPS)  # evaluated before every step
    return nodes


_XLA_WORD = re.compile(r"(?i)xla|tpu")


def on_xla(test: ast.AST) -> Optional[bool]:
    """True for a test that holds only on XLA (``is_torch_xla_available()``, ``device.type == "xla"``),
    False for its negation, None for anything else."""
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        inner = on_xla(test.operand)
        return None if inner is None else not inner
    if type(test) is ast.BoolOp:
        found = [on_xla(v) for v in test.values]
        if type(test.op) is ast.And and False in found:
            return False  # ``... and not on_xla and ...`` never holds on XLA
        return True if type(test.op) is ast.And and True in found else None
    if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) in (ast.Eq, ast.NotEq):
        if any(type(side) is ast.Constant and isinstance(side.value, str) and _XLA_WORD.fullmatch(side.value)
               for side in (test.left, test.comparators[0])):
            return type(test.ops[0]) is ast.Eq
        return None
    if type(test) in (ast.Call, ast.Name, ast.Attribute):
        text = ast.unparse(test.func if type(test) is ast.Call else test)
        return True if _XLA_WORD.search(text) else None
    return None


def _claim(regions: Dict[int, StepRegion], region: StepRegion, nodes: List[ast.AST]) -> None:
    throttled = set()  # throttled, or in a branch that never runs on XLA
    for node in nodes:
        if _is_throttle(node):
            throttled.update(id(n) for n in _inside(node.body))
        if type(node) in (ast.If, ast.IfExp):
            xla = on_xla(node.test)
            if xla is False:
                throttled.update(id(n) for n in _inside(node.body if type(node) is ast.If else [node.body]))
            elif xla is True:
                throttled.update(id(n) for n in _inside(node.orelse if type(node) is ast.If else [node.orelse]))
    for node in nodes:
        if id(node) not in throttled:
            regions.setdefault(id(node), region)
