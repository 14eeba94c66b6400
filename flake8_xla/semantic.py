"""The shared semantic layer: one walk per file that every rule reads.

It resolves every name and dotted attribute chain to the qualified name it refers to
(``xm.mark_step`` -> ``torch_xla.core.xla_model.mark_step``) through all import forms and
Python's scoping rules, and marks which references sit in compatibility code: under
``try/except ImportError|AttributeError``, in ``hasattr(...)`` branches, or in branches gated on a
torch_xla/torch version. The walk is iterative so deeply nested input cannot exhaust the stack.
"""
from __future__ import annotations

import ast
import re
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

# Guard bits carried down the walk.
COMPAT = 1  # try/except ImportError|AttributeError, hasattr branch, version branch
TYPE_ERROR = 2  # try/except TypeError: guards call-signature changes only
BROAD = 4  # bare except / except Exception: guards import statements only
FALLBACK = 8  # inside the except-handler of a compat try: bindings there are placeholders

_COMPAT_EXCEPTIONS = {"ImportError", "ModuleNotFoundError", "AttributeError"}
_BROAD_EXCEPTIONS = {"Exception", "BaseException"}

# A name that is bound locally in a way we do not follow (assignment, def, parameter, ...).
LOCAL = ""
# A name bound to different things in one scope: we refuse to guess.
AMBIGUOUS = "?"
# ``name = None`` or a fallback binding: a placeholder that does not hide an import of the name.
PLACEHOLDER = "-"

_VERSION_NAME = re.compile(
    r"(?i)(?:(?:xla|torch)\w*(?:version|greater|less|newer|older|_(?:ge|gt|le|lt|eq)_?\d|\d+_\d+))"
    r"|(?:version\w*(?:xla|torch))"
)
_REQUIREMENT_TEXT = re.compile(r"(?i)torch[-_]xla\s*(?:>=|<=|==|~=|!=|>|<)")


class Scope:
    __slots__ = ("kind", "parent", "bindings", "globals", "nonlocals", "stars", "imports")

    def __init__(self, kind: str, parent: Optional["Scope"]) -> None:
        self.kind = kind  # module | class | function | comprehension
        self.parent = parent
        self.bindings: Dict[str, str] = {}
        self.globals: set = set()
        self.nonlocals: set = set()
        self.stars: List[str] = []  # modules star-imported here
        self.imports: Dict[str, List[ast.stmt]] = {}  # name -> import statements binding it here

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
        if old is None or old == PLACEHOLDER:
            scope.bindings[name] = value
        elif value != PLACEHOLDER and old != value:
            scope.bindings[name] = AMBIGUOUS

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
        keep = 1 + max(extra, 0)
        return ".".join(self.written[:keep])


_Use = Tuple[ast.AST, str, Tuple[str, ...], Scope, int, Optional[ast.AST]]


class SemanticModel:
    """Facts about one module, computed by a single walk of its tree."""

    def __init__(self, tree: ast.AST, compat_names: frozenset = frozenset(),
                 star_known: Callable[[str], bool] = lambda q: False) -> None:
        self._compat_names = compat_names
        self._star_known = star_known
        self._uses: List[_Use] = []
        self._imports: List[Tuple[ast.alias, str, int, ast.AST, Scope]] = []
        self._compat_tests: Dict[ast.AST, bool] = {}  # an If test is asked twice: block and branch
        # Subscript assignment targets -> assigned value (``os.environ[k] = v``).
        self.assigned: Dict[ast.AST, ast.expr] = {}
        self.module_scope = Scope("module", None)
        self._walk(tree)
        self.references: List[Reference] = list(self._resolve())

    # -- resolution -----------------------------------------------------------------------
    def _resolve(self) -> Iterator[Reference]:
        for alias, qualname, guard, stmt, scope in self._imports:
            yield Reference(alias, qualname, qualname, tuple(qualname.split(".")), guard, stmt, True, stmt, scope)
        for node, root, parts, scope, guard, parent in self._uses:
            bound = scope.lookup(root)
            if bound is None:
                bound = self._from_star(scope, root)
            if not bound or bound in (AMBIGUOUS, PLACEHOLDER):
                continue
            qualname = bound + "." + ".".join(parts) if parts else bound
            yield Reference(node, qualname, bound, (root,) + parts, guard, parent, False, None, scope)

    def _from_star(self, scope: Scope, name: str) -> Optional[str]:
        for module in scope.module().stars:
            candidate = f"{module}.{name}"
            if self._star_known(candidate):
                return candidate
        return None

    # -- the walk -------------------------------------------------------------------------
    def _walk(self, tree: ast.AST) -> None:
        stack: List[Tuple[ast.AST, Optional[ast.AST], Scope, int]] = [(tree, None, self.module_scope, 0)]
        uses = self._uses
        push = stack.append
        Name, Attribute, Load, Constant = ast.Name, ast.Attribute, ast.Load, ast.Constant
        while stack:
            node, parent, scope, guard = stack.pop()
            kind = type(node)
            if kind is Name:
                if type(node.ctx) is Load:
                    uses.append((node, node.id, (), scope, guard, parent))
                else:
                    scope.bind(node.id, PLACEHOLDER if guard & FALLBACK else LOCAL)
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
            self._push_children(node, scope, guard, push)

    def _push_children(self, node: ast.AST, scope: Scope, guard: int, push) -> None:
        items = []
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                if value and field in _BLOCK_FIELDS and isinstance(value[0], ast.stmt):
                    items.extend(self._block(value, guard, scope))
                else:
                    items.extend((v, guard) for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                items.append((value, guard))
        for child, child_guard in reversed(items):
            push((child, node, scope, child_guard))

    def _block(self, statements: List[ast.stmt], guard: int,
               scope: Optional[Scope] = None) -> List[Tuple[ast.AST, int]]:
        """Statements with their guards: after ``if <compat test>: ... return``, the rest of the
        block is the fallback branch of that check."""
        out = []
        for stmt in statements:
            out.append((stmt, guard))
            if type(stmt) is ast.If and _terminates(stmt.body) and self.is_compat_test(stmt.test, scope):
                guard |= COMPAT
        return out

    def _push_block(self, statements, parent, scope, guard, push) -> None:
        for stmt, g in reversed(self._block(statements, guard, scope)):
            push((stmt, parent, scope, g))

    # -- compat-guard tests ---------------------------------------------------------------
    def is_compat_test(self, test: ast.expr, scope: Optional[Scope] = None) -> bool:
        """True for ``hasattr(xr, "world_size")``-style feature checks and version checks."""
        cached = self._compat_tests.get(test)
        if cached is None:
            cached = self._compat_tests[test] = self._is_compat_test(test, scope)
        return cached

    def _is_compat_test(self, test: ast.expr, scope: Optional[Scope]) -> bool:
        for node in ast.walk(test):
            kind = type(node)
            if kind is ast.Call:
                func = node.func
                name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
                strings = [a.value for a in node.args if type(a) is ast.Constant and type(a.value) is str]
                if name in ("hasattr", "getattr") and len(node.args) >= 2 and strings:
                    target = _dotted(node.args[0])
                    bound = scope.lookup(target.split(".", 1)[0]) if scope and target else None
                    if (strings[-1] in self._compat_names or "xla" in target.lower()
                            or (bound or "").startswith("torch_xla")):
                        return True
                if "version" in name.lower() and any(re.fullmatch(r"(?i)torch[-_]xla", s) for s in strings):
                    return True
            elif kind is ast.Attribute:
                if node.attr == "__version__":
                    base = _dotted(node.value).lower()
                    if "xla" in base or "torch" in base:
                        return True
                elif _VERSION_NAME.search(node.attr):
                    return True
            elif kind is ast.Name:
                if _VERSION_NAME.search(node.id):
                    return True
            elif kind is ast.Constant and type(node.value) is str:
                if _REQUIREMENT_TEXT.search(node.value):
                    return True
        return False


def _dotted(node: ast.AST) -> str:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is ast.Name:
        parts.append(node.id)
    return ".".join(reversed(parts))


def _terminates(body: List[ast.stmt]) -> bool:
    return bool(body) and type(body[-1]) in (ast.Return, ast.Raise, ast.Continue, ast.Break)


_BLOCK_FIELDS = {"body", "orelse", "finalbody"}


def _exception_names(handler: ast.ExceptHandler) -> List[str]:
    if handler.type is None:
        return ["BaseException"]
    types = handler.type.elts if type(handler.type) is ast.Tuple else [handler.type]
    return [_dotted(t).rsplit(".", 1)[-1] for t in types]


def _visit_function(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    if type(node) is not ast.Lambda:
        scope.bind(node.name, LOCAL)
    inner = Scope("function", scope)
    args = node.args
    all_args = args.posonlyargs + args.args + args.kwonlyargs
    all_args += [a for a in (args.vararg, args.kwarg) if a is not None]
    for arg in all_args:
        inner.bind(arg.arg, LOCAL)
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
    scope.bind(node.name, LOCAL)
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
                scope.bind(alias.asname or alias.name, LOCAL)
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
    for handler in reversed(node.handlers):
        if handler.name:
            scope.bind(handler.name, LOCAL)
        model._push_block(handler.body, handler, scope, handler_guard, push)
        if handler.type is not None:
            push((handler.type, handler, scope, guard))
    model._push_block(node.body, node, scope, guard | extra, push)


def _visit_conditional(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    tests = node.values if type(node) is ast.BoolOp else [node.test]
    if any(model.is_compat_test(t, scope) for t in tests):
        guard |= COMPAT
    model._push_children(node, scope, guard, push)


def _visit_assign(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    value = node.value
    targets = node.targets if type(node) is ast.Assign else [node.target]
    placeholder = value is None or (type(value) is ast.Constant and value.value is None)
    for target in targets:
        if type(target) is ast.Subscript and value is not None:
            model.assigned[target] = value
        if type(target) is ast.Name and placeholder:
            scope.bind(target.id, PLACEHOLDER)
    for child in reversed([t for t in targets if not (placeholder and type(t) is ast.Name)]):
        push((child, node, scope, guard))
    if type(node) is ast.AnnAssign:
        push((node.annotation, node, scope, guard))
    if value is not None:
        push((value, node, scope, guard))


def _visit_named_expr(model: SemanticModel, node: ast.NamedExpr, parent, scope: Scope, guard: int, push) -> None:
    owner = scope
    while owner.kind == "comprehension" and owner.parent is not None:
        owner = owner.parent
    owner.bind(node.target.id, LOCAL)
    push((node.value, node, scope, guard))


def _visit_match_capture(model: SemanticModel, node, parent, scope: Scope, guard: int, push) -> None:
    name = getattr(node, "rest", None) if type(node) is ast.MatchMapping else node.name
    if name:
        scope.bind(name, LOCAL)
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
