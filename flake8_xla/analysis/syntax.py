"""Fast whole-tree facts, computed in one walk per file and shared by the rules: every node by
its type, and (from the positions of the defs) the scope each node is evaluated in; and the small
readers of one node's shape they all use (dotted names, call arguments, constants)."""
from __future__ import annotations

import ast
import bisect
from collections import Counter
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

LOOPS = (ast.For, ast.AsyncFor, ast.While)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# node type -> the fields that may hold nodes (``ctx`` holds shared Load/Store instances);
# read as ``CHILD_FIELDS.get(kind) or child_fields(kind)`` in the hot loops
CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def child_fields(kind: type) -> Tuple[str, ...]:
    fields = CHILD_FIELDS.get(kind)
    if fields is None:
        fields = CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f != "ctx")
    return fields


def walk(roots: Sequence[ast.AST], stop: Tuple[type, ...] = ()) -> List[ast.AST]:
    """The roots and every node below them, without descending into nodes of a ``stop`` type
    (which are included). ast.walk without generators, with child fields cached per type."""
    out: List[ast.AST] = []
    stack = list(roots)
    push = stack.append
    while stack:
        node = stack.pop()
        out.append(node)
        kind = type(node)
        if kind in stop:
            continue
        for field in CHILD_FIELDS.get(kind) or child_fields(kind):
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)
    return out


def chain_text(node: ast.AST) -> str:
    """The dotted text of the Name/Attribute chain ``node`` ends: ``a.b.c`` -> "a.b.c"; below a call or
    subscript only the attributes after it (``f().x`` -> "x")."""
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is ast.Name:
        parts.append(node.id)
    return ".".join(reversed(parts))


def dotted(node: Optional[ast.AST]) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain (``self.model``), else None."""
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def prefixes(name: str) -> List[str]:
    """``a.b.c`` -> ``a``, ``a.b`` (the proper prefixes, outermost first)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def within_dotted(name: str, prefix: str) -> bool:
    """Whether dotted ``name`` is ``prefix`` or lies below it: ``model.layer`` within ``model``, not
    ``model2``."""
    return name == prefix or name.startswith(prefix + ".")


PARTIAL = "functools.partial"  # partial(fn, ...) runs fn


def argument(call: ast.Call, index: int, keyword: str) -> Optional[ast.expr]:
    """The argument given as ``keyword=``, else the positional one at ``index`` (not ``*args``)."""
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index and type(call.args[index]) is not ast.Starred else None


def is_constant(node: Optional[ast.AST], value: bool) -> bool:
    return type(node) is ast.Constant and node.value is value


def is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``"""
    test = getattr(node, "test", None)
    if type(node) is not ast.If or type(test) is not ast.Compare or len(test.comparators) != 1 or \
            type(test.ops[0]) is not ast.Eq:
        return False
    sides = [test.left, test.comparators[0]]
    return any(type(s) is ast.Name and s.id == "__name__" for s in sides) and \
        any(type(s) is ast.Constant and s.value == "__main__" for s in sides)


def to_cpu(call: ast.Call) -> bool:
    """``x.to("cpu")`` / ``x.to(device="cpu")``."""
    where = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    return type(where) is ast.Constant and where.value == "cpu"


TRY_NODES = (ast.Try, getattr(ast, "TryStar", ast.Try))


def names_used(tree: ast.AST) -> Counter:
    """How often each name is read in ``tree``, counting strings that may name one (``__all__``
    entries, string references): what keeps an import in use."""
    used: Counter = Counter()
    for node in walk([tree]):
        if type(node) is ast.Name:
            used[node.id] += 1
        elif type(node) is ast.Constant and type(node.value) is str and node.value.isidentifier():
            used[node.value] += 1
    return used


def is_fallback_return(value: Optional[ast.AST]) -> bool:
    """``return`` / ``return None`` / ``return None, None, False``: what a helper hands back when the
    thing it makes is missing (an ``except ImportError:`` branch). It says nothing about what the
    helper returns when it works, so a join over the helper's returns leaves it out."""
    elements = value.elts if type(value) is ast.Tuple else [value]
    return all(e is None or (type(e) is ast.Constant and e.value in (None, False, True)) for e in elements)


def keyword_value(call: ast.Call, name: str) -> Optional[ast.expr]:
    """What a call passes as keyword ``name``, if it does."""
    return next((k.value for k in call.keywords if k.arg == name), None)


def positional_parameters(fn: ast.AST, method: bool) -> List[str]:
    """The names a call fills by position (``self``/``cls`` of a method not counted, a staticmethod's kept)."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if method and not any(type(d) is ast.Name and d.id == "staticmethod" for d in fn.decorator_list):
        names = names[1:]
    return names


def parents(tree: ast.AST) -> Dict[int, ast.AST]:
    """id(node) -> its syntactic parent, for every node below ``tree``."""
    out: Dict[int, ast.AST] = {}
    stack = [tree]
    push = stack.append
    while stack:
        node = stack.pop()
        for field in CHILD_FIELDS.get(type(node)) or child_fields(type(node)):
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        out[id(item)] = node
                        push(item)
            elif isinstance(value, ast.AST):
                out[id(value)] = node
                push(value)
    return out


class Fact:
    """A fact about one file, built from its context the first time a rule asks ``ctx.get(Kind)``."""

    @classmethod
    def from_context(cls, ctx):
        return cls(ctx)


class Parents:
    """The file's parent map, built once and shared: rules ask ``ctx.get(Parents).of(node)``."""

    @classmethod
    def from_context(cls, ctx) -> "Parents":
        return cls(parents(ctx.tree))

    def __init__(self, mapping: Dict[int, ast.AST]) -> None:
        self.map = mapping

    def of(self, node: ast.AST) -> Optional[ast.AST]:
        return self.map.get(id(node))

    def chain(self, node: ast.AST) -> Iterator[Tuple[ast.AST, ast.AST]]:
        """(child, parent) pairs from ``node`` up to the module."""
        child, parent = node, self.map.get(id(node))
        while parent is not None:
            yield child, parent
            child, parent = parent, self.map.get(id(parent))

    def conditionals(self, node: ast.AST, stop: Optional[ast.AST] = None,
                     within: Tuple[type, ...] = ()) -> Iterator[Tuple[ast.AST, str]]:
        """The ``if`` statements and conditional expressions around ``node``, innermost first, each with
        the part that holds it ("test", "body" or "orelse"): up to ``stop`` (excluded), or to the
        innermost node around it of a ``within`` type."""
        for child, parent in self.chain(node):
            if parent is stop or type(parent) in within:
                return
            if type(parent) in (ast.If, ast.IfExp):
                part = "test" if child is parent.test else \
                    "body" if (any(child is s for s in parent.body) if type(parent) is ast.If else
                               child is parent.body) else "orelse"
                yield parent, part

    def function_of(self, node: ast.AST) -> Optional[ast.AST]:
        """The innermost def whose lines hold ``node`` (its parameters' defaults and annotations
        included, its decorators not; lambdas and classes looked through), None at module level."""
        for child, parent in self.chain(node):
            if type(parent) in (ast.FunctionDef, ast.AsyncFunctionDef) and \
                    not any(child is d for d in parent.decorator_list):
                return parent
        return None

    def statement_after(self, stmt: ast.AST) -> Optional[ast.stmt]:
        """The statement that follows ``stmt`` in its block; None when it is the last one (or no
        statement of a block)."""
        parent = self.map.get(id(stmt))
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                index = next(i for i, s in enumerate(block) if s is stmt)
                return block[index + 1] if index + 1 < len(block) else None
        return None


EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def leaves(stmt: Optional[ast.AST]) -> bool:
    """Whether a statement leaves its block: ``return``, ``raise``, ``continue``, ``break``,
    ``sys.exit()`` (``exit()``, ``quit()``, ``os._exit()``)."""
    if type(stmt) in EXITS:
        return True
    value = getattr(stmt, "value", None)
    if type(stmt) is not ast.Expr or type(value) is not ast.Call:
        return False
    func = value.func
    name = func.id if type(func) is ast.Name else \
        f"{func.value.id}.{func.attr}" if type(func) is ast.Attribute and type(func.value) is ast.Name else None
    return name in _EXIT_CALLS


class NodeIndex:
    """Nodes by type, and the scope of a node (its innermost def, lambda or class body)."""

    @classmethod
    def from_context(cls, ctx) -> "NodeIndex":
        return cls(ctx.tree)

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        by_type: Dict[type, List[ast.AST]] = {}
        # walk([tree])'s order, each node put in its bucket as it is reached: one pass over the
        # file's nodes instead of two (this is the walk every linted file pays for)
        stack = [tree]
        push, pop, get, AST = stack.append, stack.pop, CHILD_FIELDS.get, ast.AST
        while stack:
            node = pop()
            kind = type(node)
            bucket = by_type.get(kind)
            if bucket is None:
                by_type[kind] = [node]
            else:
                bucket.append(node)
            for field in get(kind) or child_fields(kind):
                value = getattr(node, field, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, AST):
                            push(item)
                elif isinstance(value, AST):
                    push(value)
        self.by_type = by_type
        self._scopes: Optional[List[Tuple[Tuple[int, int], Tuple[int, int], ast.AST]]] = None
        self.parent_scope: Dict[int, Optional[ast.AST]] = {id(tree): None}

    def of(self, *kinds: type) -> List[ast.AST]:
        by_type = self.by_type
        return [node for kind in kinds for node in by_type.get(kind, ())]

    def below(self, roots: Sequence[ast.AST], stop: Tuple[type, ...] = ()) -> List[ast.AST]:
        """``walk(roots, stop)``: the roots and every node below them, nodes of a ``stop`` type included
        but not entered. Rules ask here (a rule file walks nothing itself). A slice of one numbered walk
        of the file was tried: numbering cost more than the rules' subtree walks it saved."""
        return walk(roots, stop)

    def _spans(self) -> List[Tuple[Tuple[int, int], Tuple[int, int], ast.AST]]:
        """Scopes sorted by where their body starts, with their parents (scopes nest, so the
        innermost one holding a position is found from the last one starting before it)."""
        if self._scopes is None:
            spans = []
            for node in self.of(*_SCOPES):
                body = [node.body] if type(node) is ast.Lambda else node.body
                first = body[0]
                start = (first.lineno, first.col_offset) if type(node) is ast.Lambda else \
                    (node.lineno, node.col_offset) if type(node) is ast.ClassDef else _body_start(node)
                spans.append((start, (node.end_lineno, node.end_col_offset), node))
            spans.sort(key=lambda span: span[0])
            stack: List[Tuple[Tuple[int, int], Tuple[int, int], ast.AST]] = []
            for span in spans:
                while stack and not span[0] < stack[-1][1]:
                    stack.pop()
                self.parent_scope[id(span[2])] = stack[-1][2] if stack else self.tree
                stack.append(span)
            self._scopes = spans
            self._starts = [span[0] for span in spans]
        return self._scopes

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The innermost scope whose body holds ``node`` (a def's decorators and defaults belong to
        the enclosing one), the module when none does."""
        spans = self._spans()
        position = (node.lineno, node.col_offset)
        index = bisect.bisect_right(self._starts, position) - 1
        scope = spans[index][2] if index >= 0 else self.tree
        while scope is not self.tree and not position < (scope.end_lineno, scope.end_col_offset):
            scope = self.parent_scope[id(scope)]
        return scope

    def enclosing(self, scope: ast.AST) -> List[ast.AST]:
        """The scopes around ``scope``, innermost first, the module last."""
        self._spans()
        out = []
        parent = self.parent_scope.get(id(scope))
        while parent is not None:
            out.append(parent)
            parent = self.parent_scope.get(id(parent))
        return out


def _body_start(fn: ast.AST) -> Tuple[int, int]:
    """Where a function's own scope starts: its parameters (defaults and annotations aside)."""
    args = fn.args
    params = args.posonlyargs + args.args + ([args.vararg] if args.vararg else []) + args.kwonlyargs + \
        ([args.kwarg] if args.kwarg else [])
    first = min(((p.lineno, p.col_offset) for p in params), default=None)
    return first or (fn.body[0].lineno, fn.body[0].col_offset)
