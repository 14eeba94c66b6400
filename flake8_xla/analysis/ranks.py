"""Which code of a file runs on every rank: functions launched once per process, functions that build
FSDP, and what they call without a check of the rank; and which statements a rank check restricts to
one process."""
from __future__ import annotations

import ast
import builtins
from typing import Dict, List, Optional, Set, Tuple

from .fsdp import MASTER_WORD
from .launches import Launch, Launches
from .semantic import QualifiedNames, Reference, SemanticModel
from .syntax import PARTIAL, Fact, NodeIndex, Parents, dotted, leaves, walk
from .wraps import FSDP_V1

_BUILTINS = frozenset(dir(builtins))
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class EveryRank(Fact):
    """Which functions of a file run on every rank, and which statements only one rank reaches."""

    def __init__(self, ctx) -> None:
        self.tree = ctx.tree
        self.parents: Dict[int, ast.AST] = ctx.get(Parents).map
        self.defs: Dict[str, List[ast.AST]] = {}
        for node in ctx.get(NodeIndex).of(*_FUNCTIONS):
            self.defs.setdefault(node.name, []).append(node)
        self.rank_index: Set[Tuple[int, str]] = set()  # (function, parameter) holding the launch index
        self.reasons: Dict[int, str] = {}
        self.launching: Set[int] = set()  # functions (or the module) that start the processes: the parent
        self._locals: Dict[int, Dict[str, List[Optional[ast.AST]]]] = {}
        names = ctx.get(QualifiedNames)
        for ref in ctx.get(SemanticModel).references:
            if ref.qualname in FSDP_V1 and not ref.is_import and builds_fsdp(ref, names):
                self._mark_builder(ref.node)
        launches = ctx.get(Launches)
        for launch in launches.all:
            self._mark_launched(launch, launches.single_process(launch))
        for owner in self.launching:  # code around a launch runs once, in the parent process
            self.reasons.pop(owner, None)
        self._propagate()

    # -- what runs on every rank ----------------------------------------------------------
    def owner(self, node: ast.AST) -> ast.AST:
        """The function (not lambda) whose body holds ``node``, or the module."""
        parent = self.parents.get(id(node))
        while parent is not None and not isinstance(parent, _FUNCTIONS):
            parent = self.parents.get(id(parent))
        return parent if parent is not None else self.tree

    def reason(self, owner: ast.AST) -> Optional[str]:
        return self.reasons.get(id(owner))

    def _mark_builder(self, node: ast.AST) -> None:
        owner = self.owner(node)
        if owner is self.tree:
            self.reasons.setdefault(id(owner), f"module code that builds FSDP, line {node.lineno}")
        while owner is not self.tree:  # an FSDP built in a nested function is part of the outer one's work
            self.reasons.setdefault(id(owner), f"`{owner.name}` builds FSDP, line {node.lineno}")
            owner = self.owner(owner)

    def _mark_launched(self, launch: Launch, single: bool) -> None:
        call = launch.call
        self.launching.add(id(self.owner(call)))
        if launch.target is None or single:
            return
        for fn in self.defs.get(launch.target.id, ()):
            self.reasons[id(fn)] = f"`{fn.name}` is launched on every rank by {launch.spelled}, line {call.lineno}"
            params = fn.args.posonlyargs + fn.args.args
            if params:
                self.rank_index.add((id(fn), params[0].arg))

    def _propagate(self) -> None:
        """A function called, without a master check, from one that runs on every rank runs there too."""
        pending = [fn for fn in [self.tree] + [d for defs in self.defs.values() for d in defs]
                   if id(fn) in self.reasons]
        while pending:
            caller = pending.pop()
            label = f"`{caller.name}`" if isinstance(caller, _FUNCTIONS) else "the module code"
            for node in walk([caller]):
                if type(node) is not ast.Call or type(node.func) is not ast.Name or \
                        self.owner(node) is not caller or self.guarded(node, caller):
                    continue
                for fn in self.defs.get(node.func.id, ()):
                    if id(fn) not in self.reasons and id(fn) not in self.launching:
                        self.reasons[id(fn)] = (f"`{fn.name}` is called from {label}, line {node.lineno}, "
                                                "which runs on every rank")
                        pending.append(fn)

    # -- master checks ----------------------------------------------------------------------
    def guarded(self, node: ast.AST, owner: ast.AST) -> bool:
        """Whether an enclosing ``if`` (or conditional expression, ``and``/``or``), or an earlier
        ``if ...: return`` in an enclosing block, may restrict ``node`` to one rank. Inside a lambda
        it is whoever calls the lambda (``xm.do_on_ordinals``...) that decides: unknown."""
        child, parent = node, self.parents.get(id(node))
        while parent is not None:
            kind = type(parent)
            if kind is ast.Lambda:
                return True
            if kind in (ast.If, ast.IfExp) and child is not parent.test and self._master_test(parent.test, owner):
                return True
            if kind is ast.BoolOp and any(self._master_test(v, owner) for v in parent.values if v is not child):
                return True
            if isinstance(child, ast.stmt):
                for block in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")):
                    if block and child in block and any(
                            type(s) is ast.If and s.body and leaves(s.body[-1]) and self._master_test(s.test, owner)
                            for s in block[:block.index(child)]):
                        return True
            if parent is owner:
                break
            child, parent = parent, self.parents.get(id(parent))
        return False

    def _master_test(self, test: ast.AST, owner: ast.AST) -> bool:
        """Whether ``test`` may check which rank this is. A name the rule cannot read (a parameter, a
        global) may hold such a check, so it counts; an attribute of a configuration object
        (``flags.consolidate``) does not, unless its name speaks of the master or the rank."""
        stack = [test]
        while stack:
            node = stack.pop()
            if type(node) in (ast.Name, ast.Attribute) and dotted(node) is not None:
                text = dotted(node)
                if MASTER_WORD.search(text):
                    return True
                if type(node) is ast.Name and self._may_hold_rank(node.id, owner):
                    return True
                continue
            stack.extend(ast.iter_child_nodes(node))
        return False

    def _may_hold_rank(self, name: str, owner: ast.AST) -> bool:
        if (id(owner), name) in self.rank_index:
            return True
        if name in _BUILTINS:
            return False
        values = self._assigned(owner).get(name)
        if values is None:  # a parameter or a global: unknown
            return True
        return any(v is None or any(type(n) in (ast.Name, ast.Attribute) and MASTER_WORD.search(dotted(n) or "")
                                    for n in walk([v])) for v in values)

    def _assigned(self, owner: ast.AST) -> Dict[str, List[Optional[ast.AST]]]:
        """Names stored in ``owner`` (not in nested functions) -> the values assigned (None when
        stored another way: loop target, ``with ... as``, augmented assignment)."""
        found = self._locals.get(id(owner))
        if found is None:
            found = self._locals[id(owner)] = {}
            for node in walk([owner]):
                if type(node) is ast.Name and type(node.ctx) is not ast.Load and self.owner(node) is owner:
                    parent = self.parents.get(id(node))
                    value = parent.value if type(parent) is ast.Assign and node in parent.targets else None
                    found.setdefault(node.id, []).append(value)
        return found


def builds_fsdp(ref: Reference, names: QualifiedNames) -> bool:
    """``FSDP(...)`` or ``functools.partial(FSDP, ...)``, not ``isinstance(m, FSDP)``."""
    if ref.call is not None:
        return True
    parent = ref.parent
    return type(parent) is ast.Call and bool(parent.args) and parent.args[0] is ref.node and \
        names.qualname(parent.func) == PARTIAL
