"""What the calls of a function pass for one of its parameters: the arguments of its calls in this
file, when the file shows every call and each passes it, and the facts the calls from other modules
of the project pass (:mod:`flake8_xla.analysis.project`)."""
from __future__ import annotations

import ast
import functools
from typing import Dict, List, Optional, Tuple

from .bindings import ARGUMENT, Bindings
from .calls import ProjectCalls
from .project import NO_PROJECT, CallSite


class CallArguments:
    """Arguments of the calls of the file's functions, parameter by parameter."""

    @classmethod
    def from_context(cls, ctx) -> "CallArguments":
        calls = ctx.get(ProjectCalls)
        return cls(ctx.get(Bindings), calls if calls.project is not NO_PROJECT else None)

    def __init__(self, bindings: Bindings, project: Optional[ProjectCalls] = None) -> None:
        self.bindings = bindings
        self.index = bindings.index
        self.project = project  # the calls from the project's other modules

    def passed(self, fn: ast.AST, where: Tuple[int, str]) -> List[ast.expr]:
        """What the calls of a function pass for one parameter (position, name), when the file shows every
        call and each passes it, else []: a plain function never used other than called by name, or a
        method (the only one of that name in the file) called only as ``self.name(...)``."""
        position, name = where[0], where[1]
        bindings = self.bindings
        if id(fn) in bindings.method_class:
            sites = self._self_calls.get(fn.name)
            if not sites or len(bindings.methods.get(fn.name, ())) != 1 or \
                    self._attribute_loads.get(fn.name) != len(sites):
                return []
            position -= 1  # self
        else:
            sites = self._call_sites.get(fn.name)
            if not sites or bindings.functions.get(fn.name) != [fn] or fn.name in bindings.rebound_functions or \
                    self._name_loads.get(fn.name, 0) != len(sites):
                return []
        out = []
        for call in sites:
            value = next((k.value for k in call.keywords if k.arg == name), None)
            if value is None and 0 <= position < len(call.args) and \
                    not any(type(a) is ast.Starred for a in call.args[:position + 1]):
                value = call.args[position]
            if value is None:
                return []
            out.append(value)
        return out

    def incoming(self, fn: ast.AST, where: Tuple[int, str]) -> List[str]:
        """What the calls from other modules of the project that run on XLA pass for one
        parameter of ``fn`` (a top-level function, or a method of a top-level class)."""
        return [fact for _, fact in self.incoming_sites(fn, where)]

    def incoming_sites(self, fn: ast.AST, where: Tuple[int, str]) -> List[Tuple[CallSite, str]]:
        """(call site, what it passes) for one parameter (position, name) of ``fn``, over the calls from
        other modules of the project that run on XLA."""
        if self.project is None:
            return []
        owner = self.bindings.method_class.get(id(fn))
        position, name = where[0], where[1]
        if owner is not None:
            key, position = f"{owner.name}.{fn.name}", position - 1  # self
        else:
            key = fn.name
        sites = self.project.incoming(key)
        if not sites and owner is not None and fn.name == "__init__":
            sites = self.project.incoming(owner.name)  # Trainer(model, device): the constructor's call
        out = []
        for site in sites:
            for given, fact in site.arguments:
                if given == name or (given == position and position >= 0):
                    out.append((site, fact))
        return out

    def parameter_values(self, name: ast.Name) -> List[ast.expr]:
        """For a name that is a plain function's parameter: what every call passes for it, else []."""
        bound = self.bindings.lookup(name, name.id)
        if len(bound) == 1 and bound[0][1] == ARGUMENT:
            return self.passed(bound[0][2], bound[0][3])
        return []

    def parameter_facts(self, name: ast.expr) -> List[str]:
        """For a name that is a plain function's parameter with no call in this file: what the
        calls from other modules pass for it."""
        bound = self.bindings.lookup(name, name.id)
        if len(bound) == 1 and bound[0][1] == ARGUMENT and not self.passed(bound[0][2], bound[0][3]):
            return self.incoming(bound[0][2], bound[0][3])
        return []

    @functools.cached_property
    def _call_sites(self) -> Dict[str, List[ast.Call]]:
        out: Dict[str, List[ast.Call]] = {}
        for call in self.index.of(ast.Call):
            if type(call.func) is ast.Name:
                out.setdefault(call.func.id, []).append(call)
        return out

    @functools.cached_property
    def _self_calls(self) -> Dict[str, List[ast.Call]]:
        """``self.name(...)`` calls by name."""
        out: Dict[str, List[ast.Call]] = {}
        for call in self.index.of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
                out.setdefault(func.attr, []).append(call)
        return out

    @functools.cached_property
    def _attribute_loads(self) -> Dict[str, int]:
        """How often each method name of the file is read as an attribute (called or passed on)."""
        methods, out = self.bindings.methods, {}
        for node in self.index.of(ast.Attribute):
            if node.attr in methods:
                out[node.attr] = out.get(node.attr, 0) + 1
        return out

    @functools.cached_property
    def _name_loads(self) -> Dict[str, int]:
        """How often each of the file's function names is read (called or passed on)."""
        functions, out = self.bindings.functions, {}
        for node in self.index.of(ast.Name):
            if node.id in functions and type(node.ctx) is ast.Load:
                out[node.id] = out.get(node.id, 0) + 1
        return out
