"""The shared semantic layer: one walk per file that every rule reads.

It resolves every name and dotted attribute chain to the qualified name it refers to
(``xm.mark_step`` -> ``torch_xla.core.xla_model.mark_step``) through all import forms and
Python's scoping rules, and marks which references sit in compatibility code: under
``try/except ImportError|AttributeError`` (or a one-assignment probe under ``except Exception``), in
``hasattr(...)`` branches, or in branches gated on a torch_xla/torch version (which branch runs on the
target is :mod:`flake8_xla.analysis.releases`'s question). The walk is iterative so deeply nested input
cannot exhaust the stack.
"""
from __future__ import annotations

import ast
from enum import Enum
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .releases import Guard, release_guard
from .syntax import CHILD_FIELDS, chain_text, child_fields, is_fallback_return, walk
from ..versions import Version

# Modules that libraries import under a short name at their top level, so that a star import of the
# library binds it too (``from transformers.trainer import *`` gives ``xm`` when torch_xla is there).
_STAR_EXPORTS = {
    ("transformers.trainer", "xm"): "torch_xla.core.xla_model",
    ("transformers.trainer", "met"): "torch_xla.debug.metrics",
    ("transformers.trainer", "pl"): "torch_xla.distributed.parallel_loader",
}

# Guard bits carried down the walk.
COMPAT = 1  # try/except ImportError|AttributeError, hasattr branch, version branch
TYPE_ERROR = 2  # try/except TypeError: guards call-signature changes only
BROAD = 4  # bare except / except Exception: guards import statements only
FALLBACK = 8  # inside the except-handler of a compat try: bindings there are placeholders

_COMPAT_EXCEPTIONS = {"ImportError", "ModuleNotFoundError", "AttributeError"}
_BROAD_EXCEPTIONS = {"Exception", "BaseException"}


class Unresolved(str, Enum):
    """A scope binds a name to the qualified name it imports, or to one of these. They are strings no
    qualified name spells (LOCAL is empty, so false), so a binding compares as the text it is."""

    LOCAL = ""  # bound locally in a way we do not follow (assignment, def, parameter, ...)
    AMBIGUOUS = "?"  # bound to different things in one scope: we refuse to guess
    PLACEHOLDER = "-"  # ``name = None`` or a fallback binding: it does not hide an import of the name


_MISS = object()


class Scope:
    __slots__ = ("kind", "parent", "bindings", "globals", "nonlocals", "stars", "imports", "values",
                 "self_name", "attrs")

    def __init__(self, kind: str, parent: Optional["Scope"]) -> None:
        self.kind = kind  # module | class | function | comprehension
        self.parent = parent
        self.bindings: Dict[str, str] = {}  # name -> qualified name or Unresolved
        self.globals: set = set()
        self.nonlocals: set = set()
        self.stars: List[str] = []  # modules star-imported here
        self.imports: Dict[str, List[ast.stmt]] = {}  # name -> import statements binding it here
        # name -> the expression of its only plain assignment here (None: assigned more than once);
        # read by the release-guard evaluation (``XLA_GE_2_1 = RequirementCache(...)``)
        self.values: Dict[str, Optional[ast.expr]] = {}
        # methods: the name of the instance parameter (``self``); classes: ``self.<attr>`` assignments
        self.self_name: Optional[str] = None
        self.attrs: Dict[str, List[Tuple[ast.expr, "Scope"]]] = {}

    def _owner(self, name: str) -> "Scope":
        if name in self.globals:
            return self.module()
        if name in self.nonlocals:
            scope = self.parent
            while scope is not None and scope.kind != "function":
                scope = scope.parent
            return scope or self
        return self

    def bind(self, name: str, value: str) -> None:
        scope = self._owner(name)
        old = scope.bindings.get(name)
        if old is None or old == Unresolved.PLACEHOLDER:
            scope.bindings[name] = value
        elif value != Unresolved.PLACEHOLDER and old != value:
            scope.bindings[name] = Unresolved.AMBIGUOUS

    def bind_import(self, name: str, value: str, statement: ast.stmt) -> None:
        self.bind(name, value)
        self._owner(name).imports.setdefault(name, []).append(statement)

    def lookup(self, name: str) -> Optional[str]:
        """The binding visible from this scope (None if the name is bound nowhere)."""
        owner = self.owner_of(name)
        return None if owner is None else owner.bindings.get(name)

    def owner_of(self, name: str) -> Optional["Scope"]:
        """The scope whose binding of ``name`` this scope sees (None if the name is bound nowhere)."""
        if name in self.globals:
            module = self.module()
            return module if name in module.bindings else None
        scope: Optional[Scope] = self
        first = True
        while scope is not None:
            # class bodies are invisible to nested scopes
            if (first or scope.kind != "class") and name in scope.bindings:
                return scope
            first = False
            scope = scope.parent
        return None

    def module(self) -> "Scope":
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def value_of(self, name: str) -> Optional[Tuple[ast.expr, "Scope"]]:
        """The expression ``name`` was assigned once in the scope this scope sees it from."""
        owner = self.owner_of(name)
        value = owner.values.get(name) if owner is not None else None
        return (value, owner) if value is not None else None


class Reference(NamedTuple):
    """A use of an imported name, resolved to its qualified name."""

    node: ast.AST  # Name, outermost Attribute of the chain, or an import alias
    qualname: str  # e.g. torch_xla.core.xla_model.mark_step
    root_qualname: str  # what the root name is bound to, e.g. torch_xla.core.xla_model
    written: Tuple[str, ...]  # the dotted text as written, e.g. ("xm", "mark_step")
    guard: int
    parent: Optional[ast.AST]  # syntactic parent (a Call when this is the callee)
    is_import: bool
    statement: Optional[ast.AST]  # the import statement, for import references
    scope: Optional[Scope] = None  # the scope the reference sits in
    root_parts: int = 1  # written parts that make up the root: 2 for ``self._xm`` bound to a module

    @property
    def call(self) -> Optional[ast.Call]:
        parent = self.parent
        if isinstance(parent, ast.Call) and parent.func is self.node:
            return parent
        return None

    def written_prefix(self, qualname: str) -> str:
        """The user's spelling of the part of this reference that resolves to ``qualname``."""
        if self.is_import:
            return qualname
        extra = qualname.count(".") - self.root_qualname.count(".")
        keep = self.root_parts + max(extra, 0)
        return ".".join(self.written[:keep])


_Use = Tuple[ast.AST, str, Tuple[str, ...], Scope, int, Optional[ast.AST]]


class QualifiedNames:
    """What a node refers to, for every resolved use of a name (imports aside): its Reference and
    qualified name; ``by_node`` (id(node) -> qualified name) is the table the step and call-graph facts
    look calls up in."""

    @classmethod
    def from_context(cls, ctx) -> "QualifiedNames":
        return cls(ctx.get(SemanticModel).references)

    def __init__(self, references: Sequence[Reference]) -> None:
        self._references: Dict[int, Reference] = {id(r.node): r for r in references if not r.is_import}
        self.by_node: Dict[int, str] = {key: r.qualname for key, r in self._references.items()}

    def reference(self, node: ast.AST) -> Optional[Reference]:
        """The resolved (non-import) reference whose node is ``node``."""
        return self._references.get(id(node))

    def qualname(self, node: ast.AST) -> Optional[str]:
        ref = self._references.get(id(node))
        return ref.qualname if ref is not None else None


class SemanticModel:
    """Facts about one module, computed by a single walk of its tree.

    ``target``: the torch_xla release the file is judged against. With it, release guards
    (``if XLA_GE_2_1:``, version comparisons, ``RequirementCache("torch_xla>=2.1")``) are
    evaluated: only the branch that cannot run on the target is compat code. Without it (or for a
    guard that cannot be evaluated) every branch of a guard is compat code.
    """

    @classmethod
    def from_context(cls, ctx) -> "SemanticModel":
        project = getattr(ctx, "project", None)
        filename = ctx.filename  # not ctx: a model kept after the lint must not hold it (FileContext.forget_facts)
        returned = (lambda qualname: project.returned_modules(filename, qualname)) if project is not None else \
            (lambda qualname: ())
        return cls(ctx.tree, ctx.table.leaf_names, ctx.table.by_name.__contains__, ctx.target.version, ctx.lines,
                   returned)

    def __init__(self, tree: ast.AST, compat_names: frozenset = frozenset(),
                 star_known: Callable[[str], bool] = lambda q: False,
                 target: Optional[Version] = None, lines: Optional[Sequence[str]] = None,
                 returned_modules: Callable[[str], Tuple[Optional[str], ...]] = lambda q: ()) -> None:
        self._compat_names = compat_names
        self._lines = lines
        self._star_known = star_known
        self.target = target
        self._uses: List[_Use] = []
        self._imports: List[Tuple[ast.alias, str, int, ast.AST, Scope]] = []
        self._guards: Dict[ast.AST, Optional[Guard]] = {}  # an If test is asked twice: block and branch
        # Subscript assignment targets -> assigned value (``os.environ[k] = v``).
        self.assigned: Dict[ast.AST, ast.expr] = {}
        self.module_scope = Scope("module", None)
        # (id(scope), name) -> the defs of that name there, with their scopes (helpers returning modules)
        self._functions: Dict[Tuple[int, str], List[Tuple[ast.AST, Scope]]] = {}
        # torch_xla modules that a function of another module of the project returns (its qualname -> them)
        self._returned_modules = returned_modules
        self._return_statements: Dict[int, List[ast.Return]] = {}  # id(def) -> its own returns (_modules_given)
        self._walk(tree)
        self.references: List[Reference] = list(self._resolve())

    # -- resolution -----------------------------------------------------------------------
    def _resolve(self) -> Iterator[Reference]:
        for alias, qualname, guard, stmt, scope in self._imports:
            yield Reference(alias, qualname, qualname, tuple(qualname.split(".")), guard, stmt, True, stmt, scope)
        seen: Dict[Tuple[int, str], Optional[str]] = {}  # the walk is over: bindings are final
        for node, root, parts, scope, guard, parent in self._uses:
            key = (id(scope), root)
            bound = seen.get(key, _MISS)
            if bound is _MISS:
                bound = seen[key] = scope.lookup(root)
            if bound is None:
                bound = self._from_star(scope, root)
            if bound == Unresolved.LOCAL and parts:
                attribute = self.instance_attribute(scope, root, parts[0])
                if attribute is not None:
                    rest = ".".join(parts[1:])
                    qualname = f"{attribute}.{rest}" if rest else attribute
                    yield Reference(node, qualname, attribute, (root,) + parts, guard, parent, False, None,
                                    scope, 2)
                continue
            if not bound or bound in (Unresolved.AMBIGUOUS, Unresolved.PLACEHOLDER):
                continue
            qualname = bound + "." + ".".join(parts) if parts else bound
            yield Reference(node, qualname, bound, (root,) + parts, guard, parent, False, None, scope)

    def _from_star(self, scope: Scope, name: str) -> Optional[str]:
        for module in scope.module().stars:
            exported = _STAR_EXPORTS.get((module, name))
            if exported is not None:
                return exported
            candidate = f"{module}.{name}"
            if self._star_known(candidate):
                return candidate
        return None

    def instance_attribute(self, scope: Scope, root: str, attr: str) -> Optional[str]:
        """What ``self.<attr>`` holds when every method of the class that assigns it assigns the
        same torch_xla module or object (``self._xm = xm``); None otherwise."""
        owner = scope.owner_of(root)
        if owner is None or owner.self_name != root or owner.parent is None:
            return None
        found = None
        for value, where in owner.parent.attrs.get(attr, ()):
            resolved = _resolve_chain(value, where)
            if resolved is None or not resolved.startswith("torch_xla") or found not in (None, resolved):
                return None
            found = resolved
        return found

    def resolve(self, node: ast.AST, scope: Scope) -> Optional[str]:
        """The qualified name a Name/Attribute chain refers to, as far as the walk has seen."""
        resolved = _resolve_chain(node, scope)
        if resolved is None:
            parts = chain_text(node).split(".")
            if len(parts) >= 2:
                attribute = self.instance_attribute(scope, parts[0], parts[1])
                if attribute is not None:
                    return ".".join([attribute] + parts[2:])
        return resolved

    # -- the walk -------------------------------------------------------------------------
    def _walk(self, tree: ast.AST) -> None:
        stack: List[Tuple[ast.AST, Optional[ast.AST], Scope, int]] = [(tree, None, self.module_scope, 0)]
        uses = self._uses
        push = stack.append
        Name, Attribute, Load, Constant, AST = ast.Name, ast.Attribute, ast.Load, ast.Constant, ast.AST
        while stack:
            node, parent, scope, guard = stack.pop()
            kind = type(node)
            if kind is Name:
                if type(node.ctx) is Load:
                    uses.append((node, node.id, (), scope, guard, parent))
                else:
                    scope.bind(node.id, Unresolved.PLACEHOLDER if guard & FALLBACK else Unresolved.LOCAL)
                continue
            if kind is Attribute:
                parts = []
                base = node
                while type(base) is Attribute:
                    parts.append(base.attr)
                    base = base.value
                if type(base) is Name:
                    if type(node.ctx) is Load:
                        parts.reverse()
                        uses.append((node, base.id, tuple(parts), scope, guard, parent))
                    continue
                push((base, node, scope, guard))
                continue
            if kind is Constant:
                continue
            handler = _HANDLERS.get(kind)
            if handler is not None:
                handler(self, node, parent, scope, guard, push)
                continue
            fields = _PLAIN_FIELDS.get(kind, False)
            if fields is False:
                fields = _plain_fields(kind)
            if fields is None:
                self._push_children(node, scope, guard, push)
                continue
            # no statement lists below: the children in reverse, so they pop in source order
            for field in fields:
                value = getattr(node, field, None)
                if type(value) is list:
                    for item in reversed(value):
                        if isinstance(item, AST):
                            push((item, node, scope, guard))
                elif isinstance(value, AST):
                    push((value, node, scope, guard))

    def _push_children(self, node: ast.AST, scope: Scope, guard: int, push) -> None:
        items = []
        add = items.append
        kind = type(node)
        for field in CHILD_FIELDS.get(kind) or child_fields(kind):
            value = getattr(node, field, None)
            if type(value) is list:
                if value and field in _BLOCK_FIELDS and isinstance(value[0], ast.stmt):
                    items.extend(self._block(value, guard, scope))
                else:
                    for item in value:
                        if isinstance(item, ast.AST):
                            add((item, guard))
            elif isinstance(value, ast.AST):
                add((value, guard))
        for child, child_guard in reversed(items):
            push((child, node, scope, child_guard))

    def _block(self, statements: List[ast.stmt], guard: int,
               scope: Optional[Scope] = None) -> List[Tuple[ast.AST, int]]:
        """Statements with their guards: after ``if <release guard>: ... return``, the rest of the
        block is the other branch of that check, compat code unless it can run on the target."""
        out = []
        for stmt in statements:
            out.append((stmt, guard))
            if type(stmt) is ast.If and _terminates(stmt.body):
                checked = self.release_guard(stmt.test, scope)
                if checked is None or not checked.orelse_compat:
                    continue
                # `if not XLA_GE_2_1: raise ...` stops old releases; it is no fallback for the rest
                if checked.unknown and type(stmt.body[-1]) is ast.Raise:
                    continue
                guard |= COMPAT
        return out

    def _push_block(self, statements, parent, scope, guard, push) -> None:
        for stmt, g in reversed(self._block(statements, guard, scope)):
            push((stmt, parent, scope, g))

    # -- compat-guard tests ---------------------------------------------------------------
    def is_compat_test(self, test: ast.expr, scope: Optional[Scope] = None) -> bool:
        """True for ``hasattr(xr, "world_size")``-style feature checks and version checks."""
        return self.release_guard(test, scope) is not None

    def release_guard(self, test: ast.expr, scope: Optional[Scope] = None) -> Optional[Guard]:
        """Which branches of a test on the torch_xla release are compat code; None when the test
        is not about the release."""
        if test in self._guards:
            return self._guards[test]
        guard = self._guards[test] = release_guard(test, scope or self.module_scope, self.target, self._lines,
                                                   self.resolve)
        return guard


def _resolve_chain(node: ast.AST, scope: Scope) -> Optional[str]:
    text = chain_text(node)
    if not text:
        return None
    root, _, rest = text.partition(".")
    bound = scope.lookup(root)
    if not bound or bound in (Unresolved.AMBIGUOUS, Unresolved.PLACEHOLDER):
        return None
    return f"{bound}.{rest}" if rest else bound


def _terminates(body: List[ast.stmt]) -> bool:
    return bool(body) and type(body[-1]) in (ast.Return, ast.Raise, ast.Continue, ast.Break)


_BLOCK_FIELDS = {"body", "orelse", "finalbody"}
# node type -> its child fields reversed, or None when it has statement lists (walked by _block)
_PLAIN_FIELDS: Dict[type, Optional[Tuple[str, ...]]] = {}


def _plain_fields(kind: type) -> Optional[Tuple[str, ...]]:
    fields = child_fields(kind)
    plain = None if _BLOCK_FIELDS.intersection(fields) else tuple(reversed(fields))
    _PLAIN_FIELDS[kind] = plain
    return plain


def _exception_names(handler: ast.ExceptHandler) -> List[str]:
    if handler.type is None:
        return ["BaseException"]
    types = handler.type.elts if type(handler.type) is ast.Tuple else [handler.type]
    return [chain_text(t).rsplit(".", 1)[-1] for t in types]


def _visit_function(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    inner = Scope("function", scope)
    if type(node) is not ast.Lambda:
        scope.bind(node.name, Unresolved.LOCAL)
        model._functions.setdefault((id(scope), node.name), []).append((node, inner))
    args = node.args
    all_args = args.posonlyargs + args.args + args.kwonlyargs
    all_args += [a for a in (args.vararg, args.kwarg) if a is not None]
    for arg in all_args:
        inner.bind(arg.arg, Unresolved.LOCAL)
    positional = args.posonlyargs + args.args
    if (scope.kind == "class" and type(node) is not ast.Lambda and positional
            and not any(chain_text(d) == "staticmethod" for d in node.decorator_list)):
        inner.self_name = positional[0].arg  # self (or cls): its attributes live in the class scope
    if type(node) is ast.Lambda:
        push((node.body, node, inner, guard))
    else:
        model._push_block(node.body, node, inner, guard, push)
        if node.returns is not None:
            push((node.returns, node, scope, guard))
        for arg in reversed(all_args):
            if arg.annotation is not None:
                push((arg.annotation, node, scope, guard))
        for deco in reversed(node.decorator_list):
            push((deco, node, scope, guard))
    for default in reversed([d for d in args.defaults + args.kw_defaults if d is not None]):
        push((default, node, scope, guard))


def _visit_class(model: SemanticModel, node: ast.ClassDef, parent, scope: Scope, guard: int, push) -> None:
    scope.bind(node.name, Unresolved.LOCAL)
    inner = Scope("class", scope)
    model._push_block(node.body, node, inner, guard, push)
    for child in reversed(node.bases + [k.value for k in node.keywords] + node.decorator_list):
        push((child, node, scope, guard))


def _visit_comprehension(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    inner = Scope("comprehension", scope)
    items: List[Tuple[ast.AST, Scope]] = []
    for i, gen in enumerate(node.generators):
        items.append((gen.iter, scope if i == 0 else inner))
        items.append((gen.target, inner))
        items.extend((cond, inner) for cond in gen.ifs)
    if type(node) is ast.DictComp:
        items += [(node.key, inner), (node.value, inner)]
    else:
        items.append((node.elt, inner))
    for child, child_scope in reversed(items):
        push((child, node, child_scope, guard))


def _visit_import(model: SemanticModel, node: ast.Import, parent, scope: Scope, guard: int, push) -> None:
    for alias in node.names:
        if alias.asname:
            scope.bind_import(alias.asname, alias.name, node)
        else:
            root = alias.name.split(".", 1)[0]
            scope.bind_import(root, root, node)
        model._imports.append((alias, alias.name, guard, node, scope))


def _visit_import_from(model: SemanticModel, node: ast.ImportFrom, parent, scope: Scope, guard: int, push) -> None:
    if node.level or not node.module:
        for alias in node.names:
            if alias.name != "*":
                scope.bind(alias.asname or alias.name, Unresolved.LOCAL)
        return
    for alias in node.names:
        if alias.name == "*":
            scope.module().stars.append(node.module)
            continue
        qualname = f"{node.module}.{alias.name}"
        scope.bind_import(alias.asname or alias.name, qualname, node)
        model._imports.append((alias, qualname, guard, node, scope))


def _visit_global(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    (scope.globals if type(node) is ast.Global else scope.nonlocals).update(node.names)


def _visit_try(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    names = {n for h in node.handlers for n in _exception_names(h)}
    extra = 0
    if names & _COMPAT_EXCEPTIONS:
        extra |= COMPAT
    if "TypeError" in names:
        extra |= TYPE_ERROR
    if names & _BROAD_EXCEPTIONS:
        extra |= BROAD
    model._push_block(node.finalbody, node, scope, guard, push)
    model._push_block(node.orelse, node, scope, guard, push)
    handler_guard = guard | extra | (FALLBACK if extra & COMPAT else 0)
    if extra & (COMPAT | BROAD) and not _binds_alternative(node):
        # `except ImportError: pass` (or a log line, or a flag): on a release without the module
        # the feature is silently off, so the imports of the try body are no compat code
        extra &= ~(COMPAT | BROAD)
    if extra & BROAD and _probe(node):
        extra |= COMPAT
    for handler in reversed(node.handlers):
        if handler.name:
            scope.bind(handler.name, Unresolved.LOCAL)
        model._push_block(handler.body, handler, scope, handler_guard, push)
        if handler.type is not None:
            push((handler.type, handler, scope, guard))
    model._push_block(node.body, node, scope, guard | extra, push)


def _probe(node: ast.Try) -> bool:
    """``try: n = xm.xrt_world_size()`` / ``except Exception: pass``: one value tried, in a program written
    to go on without it (the next method of a fallback chain). A removed API there is caught like an
    ``except AttributeError``; a statement that does something (``xm.mark_step()``) is no probe."""
    return len(node.body) == 1 and type(node.body[0]) in (ast.Assign, ast.AnnAssign) and \
        type(node.body[0].value) is ast.Call


def _binds_alternative(node: ast.Try) -> bool:
    """Whether a handler of a try that imports something binds an alternative: imports another
    module, or assigns (even ``xs = None``: the code after it checks the name), defines or imports
    one of the names the try body imports. A try body without imports is left as compat code."""
    imported = set()
    for sub in walk(node.body):
        if type(sub) in (ast.Import, ast.ImportFrom):
            for alias in sub.names:
                imported.add(alias.asname or alias.name.split(".", 1)[0])
    if not imported:
        return True
    for handler in node.handlers:
        names = set(_exception_names(handler))
        if not names & (_COMPAT_EXCEPTIONS | _BROAD_EXCEPTIONS):
            continue
        for sub in walk(handler.body):
            kind = type(sub)
            if kind in (ast.Import, ast.ImportFrom):
                return True
            if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) and sub.name in imported:
                return True
            if kind in (ast.Assign, ast.AnnAssign, ast.AugAssign):
                targets = sub.targets if kind is ast.Assign else [sub.target]
                if any(type(n) is ast.Name and n.id in imported for n in walk(targets)):
                    return True
    return False


def _visit_conditional(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    if type(node) is ast.BoolOp:
        if any(model.is_compat_test(t, scope) for t in node.values):
            guard |= COMPAT
        model._push_children(node, scope, guard, push)
        return
    checked = model.release_guard(node.test, scope)
    if checked is None:
        model._push_children(node, scope, guard, push)
        return
    # only the branch that cannot run on the target is compat code
    body_guard = guard | COMPAT if checked.body_compat else guard
    else_guard = guard | COMPAT if checked.orelse_compat else guard
    if type(node) is ast.If:
        model._push_block(node.orelse, node, scope, else_guard, push)
        model._push_block(node.body, node, scope, body_guard, push)
    else:
        push((node.orelse, node, scope, else_guard))
        push((node.body, node, scope, body_guard))
    push((node.test, node, scope, guard | COMPAT if checked.unknown else guard))


def _visit_assign(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    value = node.value
    targets = node.targets if type(node) is ast.Assign else [node.target]
    placeholder = value is None or (type(value) is ast.Constant and value.value is None)
    for target in targets:
        if type(target) is ast.Subscript and value is not None:
            model.assigned[target] = value
        if type(target) is ast.Name and placeholder:
            scope.bind(target.id, Unresolved.PLACEHOLDER)
        if type(target) is ast.Name and value is not None and type(node) is ast.Assign:
            owner = scope._owner(target.id)
            owner.values[target.id] = value if target.id not in owner.values else None
        elif type(target) is ast.Attribute and type(target.value) is ast.Name and value is not None:
            _record_instance_attribute(scope, target, value)
    modules = _modules_given(model, value, scope) if type(node) is ast.Assign and len(targets) == 1 else ()
    bound = set()
    if modules:
        # xm = importlib.import_module("torch_xla.core.xla_model"); xm, pl = import_xla()
        names = targets[0].elts if type(targets[0]) is ast.Tuple else [targets[0]]
        if len(names) == len(modules):
            for name, module in zip(names, modules):
                if type(name) is ast.Name and module:
                    scope.bind(name.id, module)
                    bound.add(id(name))
    for child in reversed([t for t in targets if not (placeholder and type(t) is ast.Name)]):
        if type(child) is ast.Tuple and bound:
            for element in reversed(child.elts):
                if id(element) not in bound:
                    push((element, node, scope, guard))
        elif id(child) not in bound:
            push((child, node, scope, guard))
    if type(node) is ast.AnnAssign:
        push((node.annotation, node, scope, guard))
    if value is not None:
        push((value, node, scope, guard))


def _modules_given(model: SemanticModel, value: Optional[ast.expr], scope: Scope) -> Tuple[Optional[str], ...]:
    """The torch_xla modules a call hands back: ``importlib.import_module("torch_xla...")``, or a
    function (of this file, or of another module of the project) that imports and returns them."""
    if type(value) is not ast.Call:
        return ()
    func = value.func
    resolved = _resolve_chain(func, scope)
    if resolved == "importlib.import_module":
        name = value.args[0] if value.args else None
        if type(name) is ast.Constant and isinstance(name.value, str) and name.value.startswith("torch_xla"):
            return (name.value,)
        return ()
    if resolved is not None and resolved != Unresolved.LOCAL:
        return model._returned_modules(resolved)
    if type(func) is not ast.Name:
        return ()
    owner = scope.owner_of(func.id)
    defs = model._functions.get((id(owner), func.id), []) if owner is not None else []
    if len(defs) != 1:
        return ()
    fn, inner = defs[0]
    found: Optional[Tuple[Optional[str], ...]] = None
    returns = model._return_statements.get(id(fn))
    if returns is None:  # found once per def: every `x = helper()` of the file asks
        returns = model._return_statements[id(fn)] = [
            n for n in walk(fn.body, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
            if type(n) is ast.Return]
    for ret in returns:
        if is_fallback_return(ret.value):
            continue  # ``except ImportError: return None, None``: says nothing of the modules
        elements = ret.value.elts if type(ret.value) is ast.Tuple else [ret.value]
        names = tuple(_module_binding(e, inner) for e in elements)
        if not any(names) or (found is not None and found != names):
            return ()
        found = names
    return found or ()


def _module_binding(node: Optional[ast.AST], scope: Scope) -> Optional[str]:
    if type(node) is not ast.Name:
        return None
    bound = scope.lookup(node.id)
    return bound if bound and bound.startswith("torch_xla") else None


def _record_instance_attribute(scope: Scope, target: ast.Attribute, value: ast.expr) -> None:
    """``self.<attr> = value`` in a method: remembered in the class scope, resolved at the end."""
    method = scope
    while method.kind == "comprehension" and method.parent is not None:
        method = method.parent
    name = target.value.id
    if type(value) is ast.Constant and value.value is None:
        return  # a placeholder until some method sets it
    if scope.owner_of(name) is method and method.self_name == name and method.parent is not None:
        method.parent.attrs.setdefault(target.attr, []).append((value, scope))


def _visit_named_expr(model: SemanticModel, node: ast.NamedExpr, parent, scope: Scope, guard: int, push) -> None:
    owner = scope
    while owner.kind == "comprehension" and owner.parent is not None:
        owner = owner.parent
    owner.bind(node.target.id, Unresolved.LOCAL)
    push((node.value, node, scope, guard))


def _visit_match_capture(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    name = getattr(node, "rest", None) if type(node) is ast.MatchMapping else node.name
    if name:
        scope.bind(name, Unresolved.LOCAL)
    model._push_children(node, scope, guard, push)


_HANDLERS = {
    ast.FunctionDef: _visit_function,
    ast.AsyncFunctionDef: _visit_function,
    ast.Lambda: _visit_function,
    ast.ClassDef: _visit_class,
    ast.ListComp: _visit_comprehension,
    ast.SetComp: _visit_comprehension,
    ast.GeneratorExp: _visit_comprehension,
    ast.DictComp: _visit_comprehension,
    ast.Import: _visit_import,
    ast.ImportFrom: _visit_import_from,
    ast.Global: _visit_global,
    ast.Nonlocal: _visit_global,
    ast.Try: _visit_try,
    ast.If: _visit_conditional,
    ast.IfExp: _visit_conditional,
    ast.BoolOp: _visit_conditional,
    ast.Assign: _visit_assign,
    ast.AnnAssign: _visit_assign,
    ast.NamedExpr: _visit_named_expr,
    ast.MatchAs: _visit_match_capture,
    ast.MatchStar: _visit_match_capture,
    ast.MatchMapping: _visit_match_capture,
}
if hasattr(ast, "TryStar"):
    _HANDLERS[ast.TryStar] = _visit_try
