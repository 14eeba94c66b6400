"""The call graph inside one file: its own functions and methods, which of them a call runs, and which
defs reach a given one through calls."""
from __future__ import annotations

import ast
import functools
from typing import Dict, List, Optional, Set

from .bindings import Bindings
from .semantic import QualifiedNames
from .syntax import LOOPS, SCOPES, Fact, NodeIndex, walk
from .tensors import TensorFacts
from .values import MODULE

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class LocalFunctions(Fact):
    """The file's own functions and methods, and which of them a call runs. Resolution is strict
    (for facts that make a rule speak): a plain name that is no import, ``self.m()`` / ``cls.m()``
    in a method (the class and its bases in this file), ``Class.m()``, and ``obj.m()`` on a module
    whose class is the file's only nn.Module defining ``m``. ``loose`` (for facts that make a rule
    stay silent, such as a sync in a helper) also takes ``anything.m()`` for every ``m`` of the file."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.functions: Dict[str, List[ast.AST]] = {}  # plain (non-method) defs by name
        self.methods: Dict[str, List[ast.AST]] = {}  # methods by name
        self.classes: Dict[str, ast.ClassDef] = {}
        self.owner: Dict[int, ast.ClassDef] = {}  # id(method) -> its class
        for cls in ctx.get(NodeIndex).of(ast.ClassDef):
            self.classes.setdefault(cls.name, cls)
            for stmt in cls.body:
                if type(stmt) in _DEFS:
                    self.owner[id(stmt)] = cls
                    self.methods.setdefault(stmt.name, []).append(stmt)
        for fn in ctx.get(NodeIndex).of(*_DEFS):
            if id(fn) not in self.owner:
                self.functions.setdefault(fn.name, []).append(fn)
        self._callers: Dict[tuple, Dict[int, List[ast.AST]]] = {}

    def defs(self) -> List[ast.AST]:
        return self.ctx.get(NodeIndex).of(*_DEFS)

    def targets(self, call: ast.Call, loose: bool = False) -> List[ast.AST]:
        func = call.func
        if type(func) is ast.Name:
            if self.ctx.get(QualifiedNames).by_node.get(id(func)) is not None:
                return []  # an imported function
            return self.functions.get(func.id, [])
        if type(func) is not ast.Attribute or func.attr not in self.methods and not loose:
            return []
        name, value = func.attr, func.value
        found: List[ast.AST] = []
        if type(value) is ast.Name and value.id in ("self", "cls"):
            cls = self._class_around(call)
            if cls is not None:
                found = self._methods_of(cls, name)
        elif type(value) is ast.Name and value.id in self.classes:
            found = self._methods_of(self.classes[value.id], name)
        elif name in self.methods:
            is_module_class = self.ctx.get(Bindings).is_module_class
            owners = {id(self.owner[id(m)]) for m in self.methods[name] if is_module_class(self.owner[id(m)])}
            if len(owners) == 1 and self.ctx.get(TensorFacts).kind(value) == MODULE:
                found = [m for m in self.methods[name] if id(self.owner[id(m)]) in owners]
        if loose and not found:
            found = self.methods.get(name, []) + self.functions.get(name, [])
        return found

    def _class_around(self, node: ast.AST) -> Optional[ast.ClassDef]:
        index = self.ctx.get(NodeIndex)
        scope = index.scope_of(node)
        for candidate in [scope] + index.enclosing(scope):
            cls = self.owner.get(id(candidate))
            if cls is not None:
                return cls
        return None

    def _methods_of(self, cls: ast.ClassDef, name: str, seen: Optional[Set[int]] = None) -> List[ast.AST]:
        seen = seen if seen is not None else set()
        if id(cls) in seen:
            return []
        seen.add(id(cls))
        own = [m for m in self.methods.get(name, ()) if self.owner[id(m)] is cls]
        if own:
            return own
        for base in cls.bases:
            if type(base) is ast.Name and base.id in self.classes:
                found = self._methods_of(self.classes[base.id], name, seen)
                if found:
                    return found
        return []

    def reaching(self, direct: Set[int], loose: bool = False, enter_loops: bool = True) -> Set[int]:
        """id() of the defs in ``direct`` and of every def that calls one of them, directly or
        through others (a call inside a loop of the caller counts only with ``enter_loops``)."""
        if not direct:
            return set()
        callers = self._caller_graph(loose, enter_loops)
        out, stack = set(direct), list(direct)
        while stack:
            for caller in callers.get(stack.pop(), ()):
                if id(caller) not in out:
                    out.add(id(caller))
                    stack.append(id(caller))
        return out

    def _caller_graph(self, loose: bool, enter_loops: bool) -> Dict[int, List[ast.AST]]:
        """id(def) -> the defs whose own body calls it (one pass over the file's calls)."""
        key = (loose, enter_loops)
        graph = self._callers.get(key)
        if graph is None:
            graph = self._callers[key] = {}
            index, in_loops = self.ctx.get(NodeIndex), set() if enter_loops else self._calls_in_loops
            defs = set(map(id, self.defs()))
            for call in self.ctx.get(NodeIndex).of(ast.Call):
                if id(call) in in_loops:
                    continue
                caller = index.scope_of(call)
                if id(caller) in defs:
                    for target in self.targets(call, loose):
                        graph.setdefault(id(target), []).append(caller)
        return graph

    @functools.cached_property
    def _calls_in_loops(self) -> Set[int]:
        """id() of the calls inside a loop of their own scope."""
        out: Set[int] = set()
        for loop in self.ctx.get(NodeIndex).of(*LOOPS):
            if id(loop) not in out:
                out.update(id(n) for n in walk(loop.body + loop.orelse, SCOPES))
        return out
