"""Which function of another module of the project a call runs (part of the shared semantic
layer): the call's name resolved through the file's imports, absolute or relative, and the
project's summaries (:mod:`flake8_xla.analysis.project`)."""
from __future__ import annotations

import ast
import functools
from typing import Callable, Dict, Optional, Tuple

from .project import NO_PROJECT, CallSite, FunctionSummary, Project
from .semantic import QualifiedNames
from .syntax import Fact, NodeIndex, dotted


class ProjectCalls(Fact):
    """In the importing file: the summary of the project function a call runs, if any."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.project: Project = getattr(ctx, "project", None) or NO_PROJECT

    @functools.cached_property
    def _relative(self) -> Dict[str, Tuple[int, str, str]]:
        """Names bound by relative imports (``from .utils import accuracy``), anywhere in the file."""
        out: Dict[str, Tuple[int, str, str]] = {}
        for node in self.ctx.get(NodeIndex).of(ast.ImportFrom):
            if node.level:
                for alias in node.names:
                    if alias.name != "*":
                        out.setdefault(alias.asname or alias.name, (node.level, node.module or "", alias.name))
        return out

    def callee(self, call: ast.Call,
               assigned_value: Optional[Callable[[ast.Name], Optional[ast.expr]]] = None) -> Optional[FunctionSummary]:
        """``assigned_value``: the value analysis's one assignment of a name, to follow
        ``meter = Meter()`` ... ``meter.update(preds)`` to a method of a project class."""
        if self.project is NO_PROJECT:
            return None
        func = call.func
        named = self.callee_name(func)
        if named is not None:
            return self.project.function(self.ctx.filename, *named)
        if assigned_value is not None and type(func) is ast.Attribute and type(func.value) is ast.Name:
            value = assigned_value(func.value)
            cls = self.callee_name(value.func) if type(value) is ast.Call else None
            if cls is not None:
                return self.project.function(self.ctx.filename, cls[0], f"{cls[1]}.{func.attr}")
        return None

    def incoming(self, function: str) -> Tuple[CallSite, ...]:
        """The calls of the project's code that runs on XLA into ``function`` of this file."""
        if self.project is NO_PROJECT:
            return ()
        return self.project.call_sites(self.ctx.filename, function)

    def callee_name(self, func: ast.AST) -> Optional[Tuple[int, str]]:
        """(import level, dotted name) of what ``func`` names: ``utils.accuracy`` for an absolute
        import, (1, ``utils.accuracy``) for ``from .utils import accuracy``."""
        qualname = self.ctx.get(QualifiedNames).qualname(func)
        if qualname is not None:
            return 0, qualname
        name = dotted(func)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        if root in self._relative:
            level, module, attr = self._relative[root]
            return level, ".".join(x for x in (module, attr, rest) if x)
        return None


__all__ = ["ProjectCalls"]
