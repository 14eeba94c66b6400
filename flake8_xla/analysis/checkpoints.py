"""Checkpoint managers and what is around a save: which checkpoint managers a file builds and which
receiver holds one, which models are SPMD-sharded in a scope, and which loops are training loops or
hold one.

Same-scope evidence only, like the FSDP facts: a manager or a model that comes from a parameter, a
factory or another module stays unknown and the rules stay silent. ``self.<attr>`` is followed
across the methods of one class when every assignment of the attribute in them builds a manager
(or copies another attribute that does).
"""
from __future__ import annotations

import ast
import functools
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from .assignments import Assignments
from .control import FlowFacts, Position
from .fsdp import spmd_api
from .loops import LOOPS, SCOPES, StepRegions
from .semantic import QualifiedNames, SemanticModel
from .syntax import Fact, NodeIndex, Parents, argument, dotted, walk, within_dotted
from .wraps import FsdpWraps

# torch_xla's manager over torch.distributed.checkpoint (SPMD), and the companion's
MANAGERS = frozenset({"torch_xla.experimental.distributed_checkpoint.CheckpointManager",
                      "torch_xla.experimental.distributed_checkpoint.manager.CheckpointManager"})
COMPAT_MANAGERS = frozenset({"xla_compat.CheckpointManager", "xla_compat.resume.CheckpointManager"})
DCP_SAVES = frozenset({"torch.distributed.checkpoint.save", "torch.distributed.checkpoint.save_state_dict",
                       "torch.distributed.checkpoint.async_save",
                       "torch.distributed.checkpoint.state_dict_saver.save"})
DCP_LOADS = frozenset({"torch.distributed.checkpoint.load", "torch.distributed.checkpoint.load_state_dict",
                       "torch.distributed.checkpoint.state_dict_loader.load"})
# chkpt_on_preemption is the 7th parameter since num_of_threads came (2.5); the 6th before it
_PREEMPTION_KEYWORD = "chkpt_on_preemption"


class ManagerBuild(NamedTuple):
    call: ast.Call
    qualname: str
    # chkpt_on_preemption: True (given True or left to the default), False, or None (unknown)
    preemption: Optional[bool]
    at: Position

    @property
    def upstream(self) -> bool:
        return self.qualname in MANAGERS


class Sharding(NamedTuple):
    name: str  # dotted name of what is sharded: ``model.fc1.weight``, or ``model`` (every parameter)
    call: ast.AST  # the mark_sharding call, or the FSDPv2 wrap
    at: Position


def _preemption(call: ast.Call) -> Optional[bool]:
    if any(k.arg is None for k in call.keywords) or any(type(a) is ast.Starred for a in call.args):
        return None
    value = argument(call, 99, _PREEMPTION_KEYWORD)
    if value is None:
        return None if len(call.args) > 5 else True
    return value.value if type(value) is ast.Constant and type(value.value) is bool else None


def _replicated(spec: Optional[ast.AST]) -> bool:
    """A partition spec of only ``None``: the tensor is replicated, not sharded."""
    return type(spec) in (ast.Tuple, ast.List) and all(
        type(e) is ast.Constant and e.value is None for e in spec.elts)


class Checkpointing(Fact):
    """Checkpoint managers and SPMD-sharded models of one file."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.flow: FlowFacts = ctx.get(FlowFacts)
        self.builds: List[ManagerBuild] = []
        self.shardings: List[Sharding] = []
        refs = [r for r in ctx.get(SemanticModel).references if not r.is_import and r.call is not None]
        wanted = [r for r in refs if r.qualname in MANAGERS or r.qualname in COMPAT_MANAGERS or
                  spmd_api(r.qualname, "mark_sharding", "mark_sharding_with_gradients")]
        wraps = ctx.get(FsdpWraps).wraps
        if not wanted and not any(w.kind == "v2" for w in wraps):
            return
        for ref in wanted:
            at = self.flow.position(ref.call)
            if at is None:
                continue
            if ref.qualname in MANAGERS or ref.qualname in COMPAT_MANAGERS:
                preemption = _preemption(ref.call) if ref.qualname in MANAGERS else True
                self.builds.append(ManagerBuild(ref.call, ref.qualname, preemption, at))
                continue
            tensor = argument(ref.call, 0, "t")
            if _replicated(argument(ref.call, 2, "partition_spec")):
                continue
            name = dotted(tensor)
            if name is not None:
                self.shardings.append(Sharding(name, ref.call, at))
        for wrap in wraps:
            if wrap.kind == "v2" and wrap.target:
                self.shardings.append(Sharding(wrap.target, wrap.call, wrap.at))

    @property
    def _bindings(self) -> Assignments:
        return self.ctx.get(Assignments)

    # -- managers -------------------------------------------------------------------------------
    @functools.cached_property
    def _by_call(self) -> Dict[int, ManagerBuild]:
        return {id(b.call): b for b in self.builds}

    def managers(self, receiver: ast.AST) -> List[ManagerBuild]:
        """The manager builds ``receiver`` may hold where it is used: the value of its last plain
        assignment in the same scope, or for ``self.<attr>`` every assignment of it in the methods
        of the class (each must build a manager or copy an attribute that does). Empty: unknown."""
        if not self.builds:
            return []
        value = self._bindings.value_of(receiver)
        if value is not None:
            build = self._by_call.get(id(value))
            return [build] if build is not None else []
        name, at = dotted(receiver), self.flow.position(receiver)
        if name is None or at is None or not name.startswith("self.") or name.count(".") != 1:
            return []
        return self._attribute_builds(at.scope, name, set())

    def _attribute_builds(self, method: ast.AST, name: str, seen: Set[str]) -> List[ManagerBuild]:
        cls = self._class_of.get(id(method))
        if cls is None or name in seen:
            return []
        seen.add(name)
        methods = {id(stmt) for stmt in cls.body}
        values = [b.value for b in self._bindings.bindings if b.name == name and id(b.at.scope) in methods]
        found: List[ManagerBuild] = []
        for value in values:
            build = self._by_call.get(id(value))
            other = dotted(value)
            if build is not None:
                found.append(build)
            elif other is not None and other.startswith("self.") and other.count(".") == 1:
                more = self._attribute_builds(method, other, seen)
                if not more:
                    return []
                found.extend(more)
            else:
                return []
        return found

    @functools.cached_property
    def _class_of(self) -> Dict[int, ast.ClassDef]:
        """id(method) -> its class."""
        out: Dict[int, ast.ClassDef] = {}
        for cls in self.ctx.get(NodeIndex).of(ast.ClassDef):
            out.update((id(stmt), cls) for stmt in cls.body if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef))
        return out

    # -- SPMD-sharded models ----------------------------------------------------------------------
    def sharded(self, name: str, at: Position) -> Optional[Sharding]:
        """Evidence that the module ``name`` has sharded parameters where ``at`` runs: in the same
        scope, before it, an FSDPv2 wrap bound to it (or to what it is part of), a mark_sharding of
        one of its tensors (``model.fc1.weight``), or a mark_sharding of every parameter in a loop
        over ``name.parameters()`` / ``name.named_parameters()``; and nothing rebinds ``name`` since."""
        for sharding in self.shardings:
            if sharding.at.scope is not at.scope or not sharding.at.order < at.order:
                continue
            owner = self._loop_owner(sharding) or sharding.name
            related = within_dotted(owner, name) or within_dotted(name, owner)
            root = min(owner, name, key=len)
            if related and not self._bindings.rebound_between(root, at.scope, sharding.at.order, at.order):
                return sharding
        return None

    def _loop_owner(self, sharding: Sharding) -> Optional[str]:
        """``model`` for ``xs.mark_sharding(p, ...)`` in ``for n, p in model.named_parameters():``."""
        statement = sharding.at.statement
        loop = self._enclosing_loops(statement)
        for node in loop:
            iterator = getattr(node, "iter", None)
            if type(iterator) is ast.Call and type(iterator.func) is ast.Attribute and \
                    iterator.func.attr in ("parameters", "named_parameters"):
                targets = {dotted(t) for t in walk([node.target]) if type(t) is ast.Name}
                if sharding.name in targets:
                    return dotted(iterator.func.value)
        return None

    # -- loops ------------------------------------------------------------------------------------
    @property
    def _parents(self) -> Dict[int, ast.AST]:
        return self.ctx.get(Parents).map

    def _enclosing_loops(self, node: ast.AST) -> List[ast.AST]:
        """The loops around ``node`` in its own scope, innermost first."""
        out, parent = [], self._parents.get(id(node))
        while parent is not None and type(parent) not in SCOPES:
            if type(parent) in LOOPS and not _in_header(node, parent, self._parents):
                out.append(parent)
            parent = self._parents.get(id(parent))
        return out

    @functools.cached_property
    def _training_loops(self) -> Set[int]:
        return {id(loop.loop) for loop in self.ctx.get(StepRegions).training_loops}

    def training_loop_around(self, node: ast.AST) -> Optional[ast.AST]:
        """The innermost training loop around ``node`` in its scope, if any."""
        return next((loop for loop in self._enclosing_loops(node) if id(loop) in self._training_loops), None)

    def training_loops_in(self, loop: ast.AST) -> List[ast.AST]:
        """The training loops nested in ``loop``'s body (same scope), in source order."""
        inner = [n for n in walk(loop.body, SCOPES) if type(n) in LOOPS and id(n) in self._training_loops]
        return sorted(inner, key=lambda n: (n.lineno, n.col_offset))

    def method_calls(self, *methods: str) -> List[ast.Call]:
        """Calls ``<dotted name>.<method>(...)`` of the file, for one of ``methods``."""
        return [n for n in self.ctx.get(NodeIndex).of(ast.Call) if type(n.func) is ast.Attribute and
                n.func.attr in methods and dotted(n.func.value) is not None]

    def loop_over_steps(self, node: ast.AST) -> Optional[Tuple[ast.AST, bool]]:
        """The innermost loop around ``node`` that is a training loop or holds one (an epoch loop),
        and whether it is the training loop itself."""
        for loop in self._enclosing_loops(node):
            if id(loop) in self._training_loops:
                return loop, True
            if self.training_loops_in(loop):
                return loop, False
        return None

    def guards(self, node: ast.AST, loop: ast.AST) -> List[ast.If]:
        """The ``if`` statements between ``loop`` and ``node`` whose branch holds ``node``, outermost first."""
        out: List[ast.If] = []
        child, parent = node, self._parents.get(id(node))
        while parent is not None and parent is not loop:
            if type(parent) is ast.If and child is not parent.test:
                out.append(parent)
            child, parent = parent, self._parents.get(id(parent))
        return list(reversed(out))

    def every_step(self, loop: ast.AST) -> Iterator[ast.AST]:
        """Nodes of ``loop``'s body that run on every iteration as far as ``if`` statements tell:
        not inside an if/else branch or an except handler (an ``if`` test itself runs). Inner
        loops, ``try`` and ``with`` bodies count as running."""
        stack: List[ast.AST] = list(loop.body)
        while stack:
            node = stack.pop()
            yield node
            if type(node) in SCOPES:
                continue
            if type(node) is ast.If:
                stack.append(node.test)
                continue
            if type(node) is ast.Try or type(node) is getattr(ast, "TryStar", None):
                stack.extend(node.body + node.finalbody)
                continue
            for child in ast.iter_child_nodes(node):
                stack.append(child)


def _in_header(node: ast.AST, loop: ast.AST, parents_of: Dict[int, ast.AST]) -> bool:
    """Whether ``node`` sits in the loop's iterator or test, not its body."""
    header = [getattr(loop, "iter", None), getattr(loop, "test", None), getattr(loop, "target", None)]
    child = node
    while child is not None and child is not loop:
        if any(child is h for h in header if h is not None):
            return True
        child = parents_of.get(id(child))
    return False


def names_in(node: ast.AST) -> Set[str]:
    """Dotted names read in ``node``."""
    return {n for n in (dotted(sub) for sub in walk([node]) if type(sub) in (ast.Name, ast.Attribute)) if n}


def loop_variables(loop: ast.AST, body: Sequence[ast.AST]) -> Set[str]:
    """Names that change from one iteration to the next: the loop's targets and the names its
    body assigns (``step += 1``, ``global_step = ...``)."""
    out = {dotted(t) for t in walk([loop.target]) if type(t) in (ast.Name, ast.Attribute)} \
        if hasattr(loop, "target") else set()
    for node in walk(list(body), SCOPES):
        if type(node) in (ast.Assign, ast.AugAssign, ast.AnnAssign):
            targets = node.targets if type(node) is ast.Assign else [node.target]
            out.update(dotted(t) for t in walk(targets) if type(t) in (ast.Name, ast.Attribute))
    out.discard(None)
    return out  # type: ignore[return-value]


def state_dict_owners(ctx, expr: Optional[ast.AST], depth: int = 3) -> List[str]:
    """Dotted receivers of the ``.state_dict()`` calls ``expr`` is or carries (in a dict, list or
    tuple, or through a name bound in the same scope)."""
    if expr is None or depth < 0:
        return []
    kind = type(expr)
    if kind is ast.Call:
        func = expr.func
        if type(func) is ast.Attribute and func.attr == "state_dict" and not expr.args:
            name = dotted(func.value)
            return [name] if name else []
        if type(func) is ast.Name and func.id == "dict" and ctx.get(QualifiedNames).reference(func) is None:
            return [o for p in list(expr.args) + [k.value for k in expr.keywords] for o in
                    state_dict_owners(ctx, p, depth)]
        return []
    if kind is ast.Dict:
        return [o for v in expr.values for o in state_dict_owners(ctx, v, depth)]
    if kind in (ast.List, ast.Tuple):
        return [o for e in expr.elts for o in state_dict_owners(ctx, e, depth)]
    value = ctx.get(Assignments).value_of(expr)
    return state_dict_owners(ctx, value, depth - 1) if value is not None else []
