"""Which assignments of a name may reach a use of it: the last one before the use in the same scope
(assignments ordered by where they end, scopes from :mod:`flake8_xla.analysis.syntax`), or, for a
use before any assignment (a loop body reading last iteration's value), all of them; else the
enclosing scopes' (a closure), else a ``self.x`` set in any method of the class. Parameters are
bindings too: what the framework passes to a hook, an annotation, a default, or what the calls pass
(:mod:`flake8_xla.analysis.arguments`). Also the file's own functions and methods by name, and which
one a call runs. A scope is bound the first time a lookup lands in it.
"""
from __future__ import annotations

import ast
import functools
from typing import Callable, Dict, List, Optional, Tuple

from .backends import BranchesOffXla
from .hooks import FrameworkHooks
from .semantic import QualifiedNames
from .syntax import NodeIndex, dotted, walk
from .values import DEVICE, HOST, HOST_BUILTINS, MODULE, Kind
from .wraps import FSDP_ANY

# A binding is a plain tuple (order, how, a, b), cheap to make by the thousand: ``order`` is
# where it takes effect; ``how`` says what ``a`` and ``b`` are.
VALUE, AUGMENTED, FIXED, ITERATED, UNPACKED, PARAMETER, ARGUMENT = range(7)
# VALUE: a = the assigned expression; AUGMENTED: a = the AugAssign; FIXED: a = the kind;
# ITERATED / UNPACKED: a = the iterable / the unpacked value, b = the target's index path;
# PARAMETER: a = the forward() def, b = the parameter's name (a tensor if the body uses it as one);
# ARGUMENT: a = a plain function's def, b = (position, name[, constant default]): what every call of it in the
# file passes, or what calls from other modules pass
Binding = Tuple[Tuple[int, int], int, object, tuple]

_BUILTIN_NAMES = frozenset(HOST_BUILTINS | {"abs", "min", "max", "sum", "enumerate", "zip", "iter", "next"})


class Bindings:
    """The bindings of one file's names, bound scope by scope on demand."""

    @classmethod
    def from_context(cls, ctx) -> "Bindings":
        return cls(ctx.get(NodeIndex), ctx.get(QualifiedNames).qualname, ctx.get(FrameworkHooks),
                   ctx.get(BranchesOffXla))

    def __init__(self, index: NodeIndex, qualname: Callable[[ast.AST], Optional[str]],
                 hooks: Optional[FrameworkHooks] = None, off_xla: Optional[BranchesOffXla] = None) -> None:
        self.index = index
        self.qualname = qualname  # the resolved name of an imported name's use, else None
        self.hooks = hooks  # framework hooks: their batch parameter is device data
        self.off_xla = off_xla if off_xla is not None else BranchesOffXla(index)
        self._bindings: Dict[Tuple[int, str], List[Binding]] = {}
        self._class_attributes: Dict[Tuple[int, str], List[Binding]] = {}  # (class, "self.x")
        self.method_class: Dict[int, ast.ClassDef] = {}  # id(method) -> its class
        self.module_classes: Dict[str, ast.ClassDef] = {}  # local nn.Module subclasses by name
        # binding statements (and defs, for their parameters) by scope, bound on the first lookup there
        self._pending: Dict[int, List[ast.AST]] = {}
        self._returns_of: Dict[int, List[ast.Return]] = {}  # id(def) -> its own return statements
        self._collect()

    # -- lookups ----------------------------------------------------------------------------------
    def lookup(self, node: ast.expr, name: str) -> List[Binding]:
        """The assignments of a (dotted) name that may reach ``node``."""
        if id(node) in self._opaque:
            return []
        scope = self.index.scope_of(node)
        self._bind_scope(scope)
        entries = self._bindings.get((id(scope), name))
        if entries:
            at = (node.lineno, node.col_offset)
            before = [b for b in entries if b[0] <= at]
            return before[-1:] or entries
        if name.startswith("self."):
            owner = self.method_class.get(id(scope))
            if owner is None:
                return []
            for method in owner.body:
                self._bind_scope(method)
            return self._class_attributes.get((id(owner), name), [])
        for outer in self.index.enclosing(scope):
            self._bind_scope(outer)
            entries = self._bindings.get((id(outer), name))
            if entries:
                return entries
        return []

    def in_scope(self, node: ast.expr, name: str) -> List[Binding]:
        """Every binding of ``name`` in the scope of ``node``, in order (after a :meth:`lookup` there)."""
        return self._bindings.get((id(self.index.scope_of(node)), name), [])

    def assigned_value(self, name: ast.Name) -> Optional[ast.expr]:
        """The expression a name was given by the one plain assignment that reaches it, if any."""
        bound = self.lookup(name, name.id)
        return bound[0][2] if len(bound) == 1 and bound[0][1] == VALUE else None

    def is_module_class(self, node: ast.AST) -> bool:
        return type(node) is ast.ClassDef and self.module_classes.get(node.name) is node

    def callee(self, call: ast.Call) -> Optional[str]:
        """The qualified name a call runs: an import's, or ``builtins.len`` for a builtin not rebound."""
        qualname = self.qualname(call.func)
        if qualname is None and type(call.func) is ast.Name and call.func.id in _BUILTIN_NAMES and \
                not self.bound_anywhere(call.func.id):
            return "builtins." + call.func.id
        return qualname

    def bound_anywhere(self, name: str) -> bool:
        return name in self._stored_names

    # -- the file's functions ---------------------------------------------------------------------
    @functools.cached_property
    def functions(self) -> Dict[str, List[ast.AST]]:
        """Plain (non-method) defs by name."""
        out: Dict[str, List[ast.AST]] = {}
        for fn in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            if id(fn) not in self.method_class:
                out.setdefault(fn.name, []).append(fn)
        return out

    @functools.cached_property
    def methods(self) -> Dict[str, List[ast.AST]]:
        out: Dict[str, List[ast.AST]] = {}
        for fn in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            if id(fn) in self.method_class:
                out.setdefault(fn.name, []).append(fn)
        return out

    @functools.cached_property
    def rebound_functions(self) -> set:
        """Function names also assigned as variables (``step = torch_xla.compile(step)``)."""
        return {n.id for n in self.index.of(ast.Name) if type(n.ctx) is ast.Store and n.id in self.functions}

    def local_callee(self, call: ast.Call) -> Optional[ast.AST]:
        """The file's one function (``f(...)``) or method (``self.m(...)``) a call runs, if unique."""
        func = call.func
        if type(func) is ast.Name and self.qualname(func) is None:
            defs = self.functions.get(func.id, ())
            return defs[0] if len(defs) == 1 and func.id not in self.rebound_functions else None
        if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
            defs = self.methods.get(func.attr, ())
            return defs[0] if len(defs) == 1 else None
        return None

    def return_statements(self, fn: ast.AST) -> List[ast.Return]:
        """The ``return`` statements of a def's own body (not of the defs, lambdas and classes in it), in
        walk order: found once per def (a helper is asked about at every call of it)."""
        found = self._returns_of.get(id(fn))
        if found is None:
            nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
            found = self._returns_of[id(fn)] = [n for n in walk(fn.body, nested) if type(n) is ast.Return]
        return found

    # -- collection -------------------------------------------------------------------------------
    def _collect(self) -> None:
        nodes_of = self.index.of
        classes = nodes_of(ast.ClassDef)
        for node in classes:
            if any(self._is_module_base(b) for b in node.bases):
                self.module_classes[node.name] = node
            for stmt in node.body:
                if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef):
                    self.method_class[id(stmt)] = node
        changed = True
        while changed:  # a subclass may come before its base in the file
            changed = False
            for node in classes:
                if node.name not in self.module_classes and \
                        any(type(b) is ast.Name and b.id in self.module_classes for b in node.bases):
                    self.module_classes[node.name] = node
                    changed = True
        scope_of, pending = self.index.scope_of, self._pending
        for node in nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):
            pending.setdefault(id(node), []).append(node)
        for node in nodes_of(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr):
            pending.setdefault(id(scope_of(node)), []).append(node)

    def _is_module_base(self, base: ast.expr) -> bool:
        qualname = self.qualname(base) or ""
        return qualname.startswith("torch.nn.") or qualname in FSDP_ANY or \
            qualname.endswith(("PreTrainedModel", "LightningModule"))

    @functools.cached_property
    def _stored_names(self) -> set:
        """Every simple name the file assigns, defines or imports (a builtin's name may be rebound)."""
        names = {n.id for n in self.index.of(ast.Name) if type(n.ctx) is ast.Store}
        names.update(n.name for n in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        names.update((a.asname or a.name).split(".")[0] for a in self.index.of(ast.alias))
        return names

    @functools.cached_property
    def _opaque(self) -> set:
        """id() of the names a comprehension or lambda binds for itself, where the enclosing code
        uses the same name (only then could a lookup be misled)."""
        stored, out = self._stored_names, set()
        for node in self.index.of(ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.Lambda):
            if type(node) is ast.Lambda:
                names, inner = {a.arg for a in node.args.args + node.args.kwonlyargs} & stored, [node.body]
            else:
                names = {n.id for g in node.generators for n in walk([g.target]) if type(n) is ast.Name} & stored
                inner = [node]
            if names:
                out.update(id(n) for n in walk(inner) if type(n) is ast.Name and n.id in names)
        return out

    # -- binding ----------------------------------------------------------------------------------
    def _bind_scope(self, scope: ast.AST) -> None:
        """Bind the assignments (and parameters) of one scope, the first time it is asked about."""
        statements = self._pending.pop(id(scope), None)
        if statements is None:
            return
        owner = self.method_class.get(id(scope))
        touched = [id(scope)] + ([id(owner)] if owner is not None else [])
        for node in statements:
            if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef):
                self._bind_parameters(node)
            else:
                self._bind_statement(node)
        for table in (self._bindings, self._class_attributes):
            for key, entries in table.items():
                if key[0] in touched:
                    entries.sort(key=_order)

    def _add(self, scope: ast.AST, name: str, binding: Binding) -> None:
        if name.startswith("self.") and name.count(".") == 1:
            owner = self.method_class.get(id(scope))
            if owner is not None:
                self._class_attributes.setdefault((id(owner), name), []).append(binding)
                return
        self._bindings.setdefault((id(scope), name), []).append(binding)

    def _bind_parameters(self, fn: ast.AST) -> None:
        args = fn.args
        positional = args.posonlyargs + args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        owner = self.method_class.get(id(fn))
        hook = self.hooks.of(fn) if self.hooks is not None else None
        if hook is not None:  # the framework passes the batch (on the device), the model, an index
            for arg in positional + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]:
                given = hook.parameters.get(arg.arg)
                kind = DEVICE if given == "device" else MODULE if given == "module" else HOST if given else None
                if not (owner is not None and arg is positional[0]):
                    self._add(fn, arg.arg, ((0, 0), FIXED, kind, ()))
            return
        forward = owner is not None and fn.name == "forward" and self.is_module_class(owner)
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        for index, (arg, default) in enumerate(pairs):
            if owner is not None and index == 0 and arg in positional:
                continue  # self / cls
            annotated = self._annotation(arg.annotation)
            if annotated == HOST or (annotated == DEVICE and forward):
                kind: Kind = annotated
            elif type(default) is ast.Constant and default.value is not None and \
                    not (owner is not None and fn.decorator_list):
                # device="cpu": what the calls pass, and the default where they pass nothing
                self._add(fn, arg.arg, ((0, 0), ARGUMENT, fn, (index if arg in positional else -1, arg.arg, default)))
                continue
            elif type(default) is ast.Constant and default.value is not None:
                kind = HOST
            elif forward and default is None and index == 1 and arg in positional and annotated is None:
                kind = DEVICE  # forward(self, x): the module's input
            elif forward and default is None:
                # forward(self, x, seq_len, train): the others are tensors only where the body uses them as one
                self._add(fn, arg.arg, ((0, 0), PARAMETER, fn, arg.arg))
                continue
            elif default is None and annotated is None and (owner is None or not fn.decorator_list):
                self._add(fn, arg.arg, ((0, 0), ARGUMENT, fn, (index if arg in positional else -1, arg.arg)))
                continue
            else:
                kind = None
            # bound even when unknown: the name must not resolve to an outer variable of that name
            self._add(fn, arg.arg, ((0, 0), FIXED, kind, ()))
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                self._add(fn, arg.arg, ((0, 0), FIXED, None, ()))

    def _annotation(self, node: Optional[ast.expr]) -> Kind:
        """HOST for ``int``/``float``/``bool``/``str``, DEVICE for ``torch.Tensor``, else None."""
        if node is None:
            return None
        if type(node) is ast.Name and node.id in ("int", "float", "bool", "str") and not self.bound_anywhere(node.id):
            return HOST
        return DEVICE if self.qualname(node) in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor") else None

    def _bind_statement(self, stmt: ast.AST) -> None:
        if id(stmt) in self.off_xla.nodes:
            return  # what a branch that never runs on XLA assigns is not what the name holds there
        scope = self.index.scope_of(stmt)
        kind = type(stmt)
        # a binding takes effect where its statement (a loop: its target) ends
        order = _end(stmt.target) if kind in (ast.For, ast.AsyncFor) else _end(stmt)
        if kind is ast.Assign:
            for target in stmt.targets:
                self._bind_target(scope, order, target, stmt.value)
        elif kind is ast.AnnAssign:
            if stmt.value is not None:
                self._bind_target(scope, order, stmt.target, stmt.value)
        elif kind is ast.NamedExpr:
            self._bind_target(scope, order, stmt.target, stmt.value)
        elif kind is ast.AugAssign:
            name = dotted(stmt.target)
            if name:
                self._add(scope, name, (order, AUGMENTED, stmt, ()))
        else:  # for loops
            self._bind_element(scope, order, stmt.target, ITERATED, stmt.iter, ())

    def _bind_target(self, scope: ast.AST, order: Tuple[int, int], target: ast.expr, value: ast.expr) -> None:
        if type(target) in (ast.Tuple, ast.List):
            if type(value) in (ast.Tuple, ast.List) and len(value.elts) == len(target.elts) and \
                    not any(type(e) is ast.Starred for e in target.elts + value.elts):
                for sub, sub_value in zip(target.elts, value.elts):
                    self._bind_target(scope, order, sub, sub_value)
            else:
                self._bind_element(scope, order, target, UNPACKED, value, ())
            return
        name = dotted(target)
        if name:
            self._add(scope, name, (order, VALUE, value, ()))

    def _bind_element(self, scope: ast.AST, order: Tuple[int, int], target: ast.expr, how: int,
                      source: ast.expr, path: tuple) -> None:
        """Bind a loop or unpacking target (``path``: where it sits in a nested target tuple)."""
        if type(target) in (ast.Tuple, ast.List):
            for index, sub in enumerate(target.elts):
                self._bind_element(scope, order, sub, how, source, path + (-1 if type(sub) is ast.Starred else index,))
            return
        name = dotted(target)
        if name:
            self._add(scope, name, (order, how, source, path))


def _order(binding: Binding) -> Tuple[int, int]:
    return binding[0]


def _end(node: ast.AST) -> Tuple[int, int]:
    return node.end_lineno, node.end_col_offset
