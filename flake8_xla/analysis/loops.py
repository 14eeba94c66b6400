"""Step regions: which code runs once per step. Part of the shared semantic layer.

A training loop is a ``for``/``while`` loop whose own body (nested functions and inner loops
excluded) calls ``.backward()``, an optimizer's ``.step()`` or ``xm.optimizer_step``, itself or
through a function of this file (``loss = train_one_step(model, batch)``). Code inside it (inner
loops included) runs once per step, and so does the body of every function of this file it calls;
code after it, in an epoch loop around it, or in an evaluation loop (no backward, no optimizer
step) does not count. A statement under ``if step % N == 0`` (any test using ``%``, or a name
assigned one: ``log_now = step % 100 == 0`` ... ``if log_now:``) is throttled: it runs every N
steps, which the rules accept for logging and checkpoints; so is one that runs once (under
``if step == 0:``, or in a branch that leaves the loop) or never on XLA (``if torch.cuda.is_available():``).
"""
from __future__ import annotations

import ast
import enum
import functools
import os
import re
from typing import Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Sequence, Set

from .callgraph import LocalFunctions
from .off_xla import OffXla
from .syntax import LOOPS, SCOPES, Fact, dotted, walk
from .semantic import QualifiedNames, SemanticModel
from .tensors import TensorFacts
from .syntax import NodeIndex
from .calls import ProjectCalls
from .project import OTHER_DEVICE, is_test_file
from .hooks import EVALUATION, TRAINING, FrameworkHooks

# calls that mark a loop body as one training step
STEP_MARKERS: FrozenSet[str] = frozenset({"torch_xla.core.xla_model.optimizer_step", "xla_compat.optimizer_step"})
# calls that cut the graph and hand it to the device
SYNCS: FrozenSet[str] = frozenset({"torch_xla.sync", "torch_xla.core.xla_model.mark_step", "xla_compat.sync"})
_BACKWARD_KEYWORDS = frozenset({"gradient", "retain_graph", "create_graph", "inputs"})


class StepLoop(NamedTuple):
    loop: ast.AST  # the For/While node


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
    # method name with autograd's arguments (a turtle's backward(100) has a distance) is the signal;
    # accelerator.backward(loss) (Accelerate, Fabric, DeepSpeed) takes the loss as its argument
    return type(func) is ast.Attribute and (
        (func.attr == "backward" and all(k.arg in _BACKWARD_KEYWORDS for k in node.keywords) and
         (not node.args or (len(node.args) == 1 and type(node.args[0]) in (ast.Name, ast.Attribute)))) or
        (func.attr == "step" and len(node.args) <= 1 and "optim" in ast.unparse(func.value).lower()))


def _uses_mod(test: ast.AST) -> bool:
    return any(type(n) is ast.BinOp and type(n.op) is ast.Mod for n in walk([test]))


def _is_throttle(node: ast.AST, periodic: FrozenSet[str] = frozenset()) -> bool:
    """``if step % N == 0:`` (any test using ``%``), or ``if log_now:`` where ``log_now`` was
    assigned such a test."""
    if type(node) is not ast.If:
        return False
    if _uses_mod(node.test):
        return True
    if not periodic:
        return False
    for n in walk([node.test]):
        if type(n) is ast.Name and n.id in periodic:
            return True
        if type(n) is ast.Compare and any(type(side) is ast.Name and "%" + side.id in periodic
                                          for side in [n.left] + n.comparators):
            return True  # report = step % R ... if report == R - 1:
    return False


def _leaves_at_once(loop: ast.AST) -> bool:
    """A loop whose body always leaves on its first pass (a ``break``, ``return`` or ``raise`` at its
    top level): a probe of the first batch, not a step."""
    return any(type(stmt) in (ast.Break, ast.Return, ast.Raise) for stmt in loop.body)


def _over_constants(loop: ast.AST) -> bool:
    """``for flag in (True, False):``: a loop over a few settings, not over steps."""
    items = getattr(loop, "iter", None)
    return type(items) in (ast.Tuple, ast.List, ast.Set) and all(type(e) is ast.Constant for e in items.elts)


# -- step regions: every place whose code runs once per step -------------------------------------
class RegionKind(str, enum.Enum):
    """What makes a step region run once per step. Where a kind becomes text it is ``kind.value``:
    format() of a str-valued Enum differs across Python versions."""
    TRAINING_LOOP = "training loop"  # a loop whose body calls backward / an optimizer step
    MODEL_LOOP = "model loop"  # a loop whose body runs a model on device tensors (evaluation, generation)
    # a loop over a device loader's batches (it syncs after every batch), one that syncs the graph in its
    # own body, or one that makes device tensors (torch.zeros(..., device=device)) on every iteration
    DEVICE_LOOP = "device loop"
    COMPILED = "torch_xla.compile"  # a function (or with block) traced by torch_xla.compile / torch_xla.step
    DYNAMO = "openxla"  # a function compiled by torch.compile(backend="openxla")
    FORWARD = "forward"  # forward() of an nn.Module subclass: runs on every forward pass
    CALLBACK = "callback"  # a per-iteration callback given to a library (output_transform=lambda out: ...)
    # a framework's per-batch hook (Lightning training_step, Trainer.compute_loss, ignite's process
    # function): the region's ``hook`` says which
    HOOK = "hook"
    # a function of this file that the project's code in another module calls once per step (with the XLA
    # device, a device loader, a device tensor or a model): the region's ``caller`` says where
    CALLED = "called"


XLA_COMPILE = frozenset({"torch_xla.compile", "torch_xla.step", "torch_xla.torch_xla.compile",
                         "torch_xla.torch_xla.step"})
_OPENXLA = frozenset({"openxla", "openxla_eval"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# keyword arguments whose callable a library runs on every iteration (pytorch-ignite metrics and handlers)
_PER_STEP_CALLBACKS = frozenset({"output_transform"})


class HookKind(NamedTuple):
    phase: str  # hooks.TRAINING or hooks.EVALUATION
    framework: str
    name: str


class StepRegion(NamedTuple):
    node: ast.AST  # the loop, function or with statement
    kind: RegionKind
    hook: Optional[HookKind] = None  # which hook, for a HOOK region
    caller: Optional[str] = None  # ``file:line`` of the per-step call, for a CALLED region


def _inside(nodes: Sequence[ast.AST]) -> List[ast.AST]:
    """Like :func:`_own_nodes`, but entering inner loops (a compiled step runs them all)."""
    return walk(nodes, SCOPES)


class StepRegions(Fact):
    """Which region, if any, runs a node once per step. Code under ``if ... % ...:`` (throttled),
    code that runs once or never on XLA, and nested functions and lambdas (callbacks such as
    add_step_closure's) belong to none, except the functions of this file that a region calls (they
    run in it) and a library's per-iteration callbacks. Training loops are found on first use; the
    other regions, which need the tensor layer, only when a rule asks where a node runs."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    @functools.cached_property
    def periodic(self) -> FrozenSet[str]:
        """Names assigned a test that uses ``%`` (``log_now = (step + 1) % 100 == 0``), and, marked
        ``%name``, names assigned a remainder (``report = step % R``: a comparison with it is periodic)."""
        out = set()
        for node in self.ctx.get(NodeIndex).of(ast.Assign):
            if type(node.value) in (ast.Compare, ast.BoolOp, ast.UnaryOp) and _uses_mod(node.value):
                out.update(t.id for t in node.targets if type(t) is ast.Name)
            elif type(node.value) is ast.BinOp and type(node.value.op) is ast.Mod and \
                    not (type(node.value.left) is ast.Constant and isinstance(node.value.left.value, str)):
                out.update("%" + t.id for t in node.targets if type(t) is ast.Name)
        return frozenset(out)

    @functools.cached_property
    def stepping_functions(self) -> Set[int]:
        """id() of the file's functions that run a training step once per call (their own body,
        outside loops, calls backward / an optimizer step, itself or through another one)."""
        qualnames, index = self.ctx.get(QualifiedNames).by_node, self.ctx.get(NodeIndex)
        holders = {id(index.scope_of(call)) for call in self._markers}
        direct = {id(fn) for fn in self.ctx.get(NodeIndex).of(*_DEFS)
                  if id(fn) in holders and any(_marks_a_step(n, qualnames) for n in _own_nodes(fn.body))}
        return self.ctx.get(LocalFunctions).reaching(direct, enter_loops=False)

    @functools.cached_property
    def _markers(self) -> List[ast.Call]:
        """Every call that marks a training step (most files have none, and then no training loop)."""
        qualnames = self.ctx.get(QualifiedNames).by_node
        return [n for n in self.ctx.get(NodeIndex).of(ast.Call) if _marks_a_step(n, qualnames)]

    @functools.cached_property
    def hooks_only(self) -> bool:
        """Only the framework's hooks are step code here (a file linted for its hooks alone)."""
        return bool(getattr(self.ctx.project, "hooks_only", False))

    @functools.cached_property
    def training_loops(self) -> List[StepLoop]:
        if not self._markers or self.hooks_only:
            return []
        qualnames = self.ctx.get(QualifiedNames).by_node
        stepping = self.stepping_functions
        targets = self.ctx.get(LocalFunctions).targets
        out = []
        for node in self.ctx.get(NodeIndex).of(*LOOPS):
            if _over_constants(node) or _leaves_at_once(node):
                continue
            own = list(_own_nodes(node.body))
            if any(_marks_a_step(n, qualnames) for n in own) or stepping and any(
                    type(n) is ast.Call and any(id(fn) in stepping for fn in targets(n)) for n in own):
                out.append(StepLoop(node))
        return out

    def region_of(self, node: ast.AST) -> Optional[StepRegion]:
        return self._regions.get(id(node))

    @functools.cached_property
    def _regions(self) -> Dict[int, StepRegion]:
        ctx, qualnames = self.ctx, self.ctx.get(QualifiedNames).by_node
        regions: Dict[int, StepRegion] = {}
        calls: List[tuple] = []  # (call, region): the file's functions they run belong to the region too

        never, asserts = ctx.get(OffXla).nodes | self._debug_only, is_test_file(ctx.filename)

        def claim(region: StepRegion, nodes: List[ast.AST]) -> None:
            calls.extend((n, region) for n in _claim(regions, region, nodes, self.periodic, never, asserts)
                         if type(n) is ast.Call)

        compiled = {} if self.hooks_only else self.compiled_functions
        for node in ctx.get(NodeIndex).of(*_DEFS):
            if id(node) in compiled:
                claim(StepRegion(node, compiled[id(node)]), _inside(node.body))
        for node in ctx.get(NodeIndex).of(ast.With, ast.AsyncWith):
            if any(type(item.context_expr) is ast.Call and qualnames.get(id(item.context_expr.func)) in XLA_COMPILE
                   for item in node.items):
                claim(StepRegion(node, RegionKind.COMPILED), _inside(node.body))
        for step in self.training_loops:
            claim(StepRegion(step.loop, RegionKind.TRAINING_LOOP), _loop_nodes(step.loop, SCOPES))
        tensors = ctx.get(TensorFacts)
        for node in ctx.get(NodeIndex).of(*LOOPS) if not self.hooks_only else ():
            if id(node) in regions or _leaves_at_once(node):
                continue
            own = list(_own_nodes(node.body))
            if tensors.may_have_modules and (self._runs_model(own) or self._calls_model_runner(own)):
                claim(StepRegion(node, RegionKind.MODEL_LOOP), _loop_nodes(node))
            elif self._works_on_device(node, own):
                claim(StepRegion(node, RegionKind.DEVICE_LOOP), _loop_nodes(node))
        for cls in tensors.module_classes.values() if not self.hooks_only else ():
            for fn in cls.body:
                if type(fn) in _DEFS and fn.name == "forward":
                    claim(StepRegion(fn, RegionKind.FORWARD), _inside(fn.body))
        hooks = ctx.get(FrameworkHooks).hooks
        if hooks:
            stepping = self.stepping_functions
            for fn in ctx.get(NodeIndex).of(*_DEFS):
                hook = hooks.get(id(fn))
                if hook is not None:
                    phase = hook.phase or (TRAINING if id(fn) in stepping else EVALUATION)
                    claim(StepRegion(fn, RegionKind.HOOK, hook=HookKind(phase, hook.framework, hook.name)),
                          _inside(fn.body))
        for fn, site in self._called_per_step:
            claim(StepRegion(fn, RegionKind.CALLED, caller=f"{os.path.basename(site.path)}:{site.line}"),
                  _inside(fn.body))
        for keyword in ctx.get(NodeIndex).of(ast.keyword):
            if keyword.arg in _PER_STEP_CALLBACKS:
                value = keyword.value
                if type(value) is ast.Lambda:
                    claim(StepRegion(value, RegionKind.CALLBACK), _inside([value.body]))
                elif type(value) is ast.Name:
                    for fn in self.ctx.get(LocalFunctions).functions.get(value.id, ()):
                        claim(StepRegion(fn, RegionKind.CALLBACK), _inside(fn.body))
        done: Set[int] = set(compiled)
        targets, origins = self.ctx.get(LocalFunctions).targets, self._origins
        while calls:
            call, region = calls.pop()
            for fn in targets(call):
                if id(fn) not in done:
                    done.add(id(fn))
                    origins[id(fn)] = origins.get(id(region.node), region.node)
                    claim(region._replace(node=fn), _inside(fn.body))
        allowed = self.entry_defs
        if allowed is not None:
            index = ctx.get(NodeIndex)

            def entered(node: ast.AST) -> bool:
                scope = index.scope_of(node)
                return any(id(s) in allowed for s in [node, scope] + index.enclosing(scope))

            regions = {key: region for key, region in regions.items() if entered(region.node)}
        return regions

    @functools.cached_property
    def entry_defs(self) -> Optional[Set[int]]:
        """When the file is linted only for the functions that the project's XLA code calls (it never
        names torch_xla): id() of those defs (every method of a class whose constructor it calls)
        and of the file's functions they call, directly or through others; else None."""
        entries = getattr(self.ctx.project, "entry_functions", None)
        if entries is None:
            return None
        local, index = self.ctx.get(LocalFunctions), self.ctx.get(NodeIndex)
        start = []
        for fn in local.defs():
            owner = local.owner.get(id(fn))
            if owner is None and type(index.scope_of(fn)) is ast.Module and fn.name in entries:
                start.append(fn)
            elif owner is not None and (owner.name in entries or f"{owner.name}.{fn.name}" in entries):
                start.append(fn)
        allowed, stack = {id(fn) for fn in start}, start
        while stack:
            for node in walk(stack.pop().body):
                if type(node) is ast.Call:
                    for fn in local.targets(node):
                        if id(fn) not in allowed:
                            allowed.add(id(fn))
                            stack.append(fn)
        return allowed

    @functools.cached_property
    def _origins(self) -> Dict[int, ast.AST]:
        """id() of a function that runs in a region because the region calls it -> the region's
        own loop, hook or compiled function (filled in by :attr:`_regions`)."""
        return {}

    def origin(self, region: StepRegion) -> ast.AST:
        """The loop, hook or function a region starts from: for a helper the region calls, the
        caller's region, not the helper."""
        self._regions  # noqa: B018 - fills the origins
        return self._origins.get(id(region.node), region.node)

    def over_batches(self, region: StepRegion) -> bool:
        """Whether a region runs once per batch of data: a framework's hook, or a ``for`` loop over a
        loader (a device loader, a DataLoader, or a name that says so: ``val_loader``, ``test_dl``),
        also under enumerate()/tqdm()/zip(). A ``while`` or ``range()`` loop (generation, sampling)
        is not."""
        node = self.origin(region)
        if region.hook is not None:
            return True
        if type(node) not in (ast.For, ast.AsyncFor):
            return False
        tensors = self.ctx.get(TensorFacts)
        iterable = _unwrapped(node.iter)
        if tensors.yields_device(iterable):
            return True
        for _ in range(3):  # tk0 = tqdm(data_loader): follow the name to what it was given
            if tensors.loader(iterable) is not None or _LOADER_NAME.search((dotted(iterable) or "").rsplit(".", 1)[-1]):
                return True
            value = tensors.assigned_value(iterable) if type(iterable) is ast.Name else None
            if value is None:
                return False
            iterable = _unwrapped(value)
        return False

    @functools.cached_property
    def _called_per_step(self) -> List[tuple]:
        """(def, its first per-step call site) for each function or method of this file that the project's
        XLA code in another module calls inside a step region, passing something on XLA."""
        if self.hooks_only or getattr(self.ctx.project, "call_sites", None) is None:
            return []
        calls, index, out = self.ctx.get(ProjectCalls), self.ctx.get(NodeIndex), []
        local = self.ctx.get(LocalFunctions)
        for fn in local.defs():
            owner = local.owner.get(id(fn))
            if owner is None and type(index.scope_of(fn)) is not ast.Module or \
                    owner is not None and type(index.scope_of(owner)) is not ast.Module:
                continue  # nested: no other module calls it
            key = fn.name if owner is None else f"{owner.name}.{fn.name}"
            site = next((s for s in calls.incoming(key) if s.per_step and
                         any(fact != OTHER_DEVICE for _, fact in s.arguments)), None)
            if site is not None:
                out.append((fn, site))
        return out

    @functools.cached_property
    def _debug_only(self) -> Set[int]:
        """id() of the nodes under ``if debug:`` / ``if args.debug_mode:``: a switch that is off in a real
        run, also around a whole loop (a dump of the first batches)."""
        out: Set[int] = set()
        for node in self.ctx.get(NodeIndex).of(ast.If):
            if _is_debug_flag(node.test) and id(node) not in out:
                out.update(id(n) for n in walk(node.body))
        return out

    def _works_on_device(self, loop: ast.AST, own: List[ast.AST]) -> bool:
        """A loop over a device loader; or an innermost loop (an epoch loop has the step loop in it)
        whose body syncs the graph or makes a device tensor with a torch factory
        (``torch.rand(n, device=device)``): every iteration is device work."""
        tensors, qualnames = self.ctx.get(TensorFacts), self.ctx.get(QualifiedNames).by_node
        if type(loop) in (ast.For, ast.AsyncFor) and tensors.yields_device(loop.iter):
            return True
        if any(type(node) in LOOPS for node in own):
            return False
        # a factory counts in a loop that counts steps (range(), while), not one over a few keys
        counts = type(loop) is ast.While or (type(loop.iter) is ast.Call and type(loop.iter.func) is ast.Name and
                                             loop.iter.func.id == "range")
        batches = type(loop) in (ast.For, ast.AsyncFor) and not counts
        for node in own:
            if type(node) is ast.Call:
                name = qualnames.get(id(node.func))
                if name in SYNCS or (counts and name and name.startswith("torch.") and
                                     any(k.arg == "device" for k in node.keywords) and tensors.is_device(node)):
                    return True
                # for batch in loader: x = batch["x"].to(device) -- each batch moved to the device
                if batches and type(node.func) is ast.Attribute and node.func.attr == "to" and \
                        node.args and tensors.is_device(node) and _from_target(node.func.value, loop):
                    return True
        return False

    def _calls_model_runner(self, own: List[ast.AST]) -> bool:
        """Whether a loop's own body calls a function of this file that runs the model
        (``loss, metrics = self.validate_one_step(batch)``), itself or through another one, and
        steps no optimizer (that makes a training loop)."""
        targets = self.ctx.get(LocalFunctions).targets
        return any(type(n) is ast.Call and any(self._runs_model_when_called(fn, 0) for fn in targets(n)) for n in own)

    def _runs_model_when_called(self, fn: ast.AST, depth: int) -> bool:
        known = self._model_runners.get(id(fn))
        if known is not None:
            return known
        if depth > 4 or id(fn) in self.stepping_functions:
            return False
        self._model_runners[id(fn)] = False  # recursion: not through itself
        own, targets = list(_own_nodes(fn.body)), self.ctx.get(LocalFunctions).targets
        found = self._runs_model(own) or any(
            type(n) is ast.Call and any(self._runs_model_when_called(g, depth + 1) for g in targets(n)) for n in own)
        self._model_runners[id(fn)] = found
        return found

    @functools.cached_property
    def _model_runners(self) -> Dict[int, bool]:
        """id() of a function of the file -> whether calling it runs a model (filled on demand)."""
        return {}

    def _runs_model(self, own: List[ast.AST]) -> bool:
        """Whether a loop's own body (``own``) calls a model (a name or ``self.x`` known to hold a
        module) on inputs not all known to be on the host."""
        kind = self.ctx.get(TensorFacts).kind
        for node in own:
            func = getattr(node, "func", None)
            # model(x) or self.model(x), or self(x) in a module's method: a method call on anything
            # else is not a module call
            if type(node) is ast.Call and ((type(func) is ast.Name or type(func) is ast.Attribute and
                                            type(func.value) is ast.Name and func.value.id == "self") and
                                           kind(func) == "module" or
                                           type(func) is ast.Name and func.id == "self" and kind(node) == "device"):
                inputs = [kind(a.value if type(a) is ast.Starred else a) for a in node.args] + \
                    [kind(k.value) for k in node.keywords]
                if inputs and not all(k in ("host", "host-tensor") for k in inputs):
                    return True
        return False

    def compile_kind(self, call_or_name: ast.AST) -> Optional[RegionKind]:
        """COMPILED for torch_xla.compile / torch_xla.step (a call or a bare decorator), DYNAMO for
        torch.compile(backend="openxla"), else None."""
        func = call_or_name.func if type(call_or_name) is ast.Call else call_or_name
        qualname = self.ctx.get(QualifiedNames).by_node.get(id(func))
        if qualname in XLA_COMPILE:
            return RegionKind.COMPILED
        if qualname == "torch.compile" and type(call_or_name) is ast.Call:
            backend = next((k.value for k in call_or_name.keywords if k.arg == "backend"), None)
            if type(backend) is ast.Constant and backend.value in _OPENXLA:
                return RegionKind.DYNAMO
        return None

    @functools.cached_property
    def compiled_functions(self) -> Dict[int, RegionKind]:
        """id() of each function traced as one step -> COMPILED or DYNAMO: decorated, or passed
        to torch_xla.compile / torch.compile(backend="openxla") by name."""
        compiler = self.compile_kind

        out: Dict[int, RegionKind] = {}
        by_name: Dict[str, List[ast.AST]] = {}
        for node in self.ctx.get(NodeIndex).of(*_DEFS):
            by_name.setdefault(node.name, []).append(node)
            for decorator in node.decorator_list:
                how = compiler(decorator)
                if how:
                    out[id(node)] = how
        for ref in self.ctx.get(SemanticModel).references:
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


def compiled_callables(ctx, kind: RegionKind) -> Dict[str, ast.AST]:
    """Names that call a step traced by ``kind`` (COMPILED or DYNAMO) -> the def or compile call:
    decorated functions, and names assigned ``torch.compile(f, backend="openxla")`` (or
    ``torch_xla.compile(f)``), also as ``self.name``."""
    regions: StepRegions = ctx.get(StepRegions)
    qualnames = ctx.get(QualifiedNames).by_node
    out: Dict[str, ast.AST] = {}
    for fn in ctx.get(NodeIndex).of(*_DEFS):
        if regions.compiled_functions.get(id(fn)) == kind and any(
                qualnames.get(id(d.func if type(d) is ast.Call else d)) for d in fn.decorator_list):
            out[fn.name] = fn
    for assign in ctx.get(NodeIndex).of(ast.Assign):
        value = assign.value
        if type(value) is ast.Call and regions.compile_kind(value) == kind:
            for target in assign.targets:
                name = target.id if type(target) is ast.Name else \
                    f"self.{target.attr}" if type(target) is ast.Attribute and type(target.value) is ast.Name \
                    and target.value.id == "self" else None
                if name:
                    out[name] = value
    return out


def _loop_nodes(loop: ast.AST, stop: tuple = SCOPES + LOOPS) -> List[ast.AST]:
    """A loop's body (inner loops included only when ``stop`` lets the walk enter them) and, for a
    ``while`` loop, its test (evaluated before every step)."""
    nodes = walk(loop.body, stop)
    if type(loop) is ast.While:
        nodes += walk([loop.test], stop)
    return nodes


_DEBUG_FLAG = re.compile(r"(?i)_?(debug|verbose)\w*")
# the name of an iterable of batches (``val_loader``, ``test_dl``, ``eval_dataloader``)
_LOADER_NAME = re.compile(r"(?i)(loader|(^|_)dl|batches)$")
_WRAPPING_ITERATORS = frozenset({"enumerate", "tqdm", "iter", "zip", "progress_bar", "track"})


def _is_assertion(call: ast.Call) -> bool:
    """``torch.testing.assert_close(...)``, ``self.assertEqual(...)``: a test's check."""
    func = call.func
    name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
    return name.startswith("assert")


def _is_debug_flag(test: ast.AST) -> bool:
    """``if debug:`` / ``if self.verbose:``: a switch that is off in a real run."""
    name = dotted(test)
    return name is not None and bool(_DEBUG_FLAG.fullmatch(name.rsplit(".", 1)[-1]))


def _unwrapped(iterable: ast.AST) -> ast.AST:
    """What ``enumerate(pbar := tqdm(loader))`` iterates over: ``loader``."""
    while type(iterable) is ast.NamedExpr or type(iterable) is ast.Call and iterable.args and \
            (dotted(iterable.func) or "").rsplit(".", 1)[-1] in _WRAPPING_ITERATORS:
        iterable = iterable.value if type(iterable) is ast.NamedExpr else iterable.args[0]
    return iterable


def _from_target(node: ast.AST, loop: ast.AST) -> bool:
    """``batch["x"]`` / ``x`` / ``batch.x`` where the loop's target binds the name."""
    while type(node) in (ast.Subscript, ast.Attribute):
        node = node.value
    return type(node) is ast.Name and node.id in {n.id for n in walk([loop.target]) if type(n) is ast.Name}


def _counters(loop: ast.AST) -> Set[str]:
    """The loop's step counters: a ``for`` loop's target names, and the names the loop's own body
    increments (``step += 1``; ``if warmup == 2:`` on such a counter runs once)."""
    counted = {n.target.id for n in walk(loop.body, SCOPES + LOOPS)
               if type(n) is ast.AugAssign and type(n.op) is ast.Add and type(n.target) is ast.Name}
    if type(loop) is ast.While:
        return counted
    return counted | {n.id for n in walk([loop.target]) if type(n) is ast.Name}


def _runs_once(node: ast.If, loop: ast.AST, own: Set[int], counters: Set[str]) -> bool:
    """A branch of a loop region that runs on one iteration only: it ends by leaving the loop
    (``return``/``raise``, or ``break`` in the loop's own body), it tests the loop counter for
    equality with something else (``if step == 0:``, ``if step == profile_step and trace:``), or it
    fills a name left empty before the loop (``if preds is None: preds = ...``)."""
    last = node.body[-1]
    if type(last) in (ast.Return, ast.Raise) or (type(last) is ast.Break and id(node) in own):
        return True
    test = node.test
    if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Is and \
            type(test.left) is ast.Name and type(test.comparators[0]) is ast.Constant and \
            test.comparators[0].value is None and any(
                type(t) is ast.Name and t.id == test.left.id for n in node.body if type(n) is ast.Assign
                for t in n.targets):
        return True  # `if preds is None: preds = ...`: the first iteration fills it
    tests = node.test.values if type(node.test) is ast.BoolOp and type(node.test.op) is ast.And else [node.test]
    for test in tests:
        if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Eq:
            sides = (test.left, test.comparators[0])
            for a, b in (sides, sides[::-1]):
                if type(a) is ast.Name and a.id in counters and \
                        not any(type(n) is ast.Name and n.id in counters for n in walk([b])):
                    return True
    return False


def _once_branch(test: ast.AST, counters: Set[str]) -> Optional[bool]:
    """For a conditional expression on the loop counter, which branch runs on one iteration only:
    True (its body) for ``i == 0``, False (its else) for ``i < n - 1`` / ``i != n - 1``, else None."""
    if type(test) is not ast.Compare or len(test.ops) != 1 or type(test.left) is not ast.Name or \
            test.left.id not in counters or any(type(n) is ast.Name and n.id in counters
                                                for n in walk(test.comparators)):
        return None
    op = type(test.ops[0])
    return True if op is ast.Eq else False if op in (ast.Lt, ast.NotEq) else None


def _skips_to_periodic(node: ast.AST, periodic: FrozenSet[str]) -> bool:
    """``if step % n: continue`` (or ``if not log_now: continue``): what follows runs every n steps."""
    if type(node) is not ast.If or type(node.body[-1]) is not ast.Continue:
        return False
    test = node.test
    if type(test) is ast.BinOp and type(test.op) is ast.Mod:
        return True
    if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.NotEq and _uses_mod(test):
        return True
    return type(test) is ast.UnaryOp and type(test.op) is ast.Not and type(test.operand) is ast.Name and \
        test.operand.id in periodic


def _claim(regions: Dict[int, StepRegion], region: StepRegion, nodes: List[ast.AST],
           periodic: FrozenSet[str] = frozenset(), never: Set[int] = frozenset(),
           asserts: bool = False) -> List[ast.AST]:
    """Give ``region`` the nodes no other region has and that run on every step; return them.
    Left out: code that never runs on XLA (``never``), throttled code, code that runs once, and
    (``asserts``: in a test file) assertions."""
    excluded = set()
    loop = region.node if type(region.node) in LOOPS else None
    own: Optional[Set[int]] = None
    counters: Set[str] = set()
    blocks = [loop.body] if loop is not None else []
    for node in nodes:
        kind = type(node)
        if kind is ast.If:
            if loop is not None and own is None:
                own, counters = {id(n) for n in _loop_nodes(loop)}, _counters(loop)
            if _is_throttle(node, periodic) or _is_debug_flag(node.test) or \
                    (loop is not None and _runs_once(node, loop, own, counters)):
                excluded.update(id(n) for n in _inside(node.body))
            blocks.append(node.body)
            blocks.append(node.orelse)
        elif kind is ast.IfExp and loop is not None:
            if own is None:
                own, counters = {id(n) for n in _loop_nodes(loop)}, _counters(loop)
            once = _once_branch(node.test, counters)
            if once is not None:  # `a if i < steps - 1 else b`: b runs on the last step only
                excluded.update(id(n) for n in _inside([node.body if once else node.orelse]))
        elif asserts and (kind is ast.Assert or kind is ast.Call and _is_assertion(node)):
            excluded.update(id(n) for n in _inside([node]))
        elif kind in (ast.With, ast.AsyncWith, ast.Try) or kind in LOOPS:
            blocks.append(node.body)
    for block in blocks:  # `if step % n: continue` leaves the rest of its block periodic
        for position, stmt in enumerate(block[:-1]):
            if _skips_to_periodic(stmt, periodic):
                excluded.update(id(n) for n in _inside(block[position + 1:]))
                break
    out = []
    for node in nodes:
        key = id(node)
        if key not in excluded and key not in never and key not in regions:
            regions[key] = region
            out.append(node)
    return out
