"""Fast whole-tree facts, computed in one walk per file and shared by the rules: every node by
its type, and the scope (module, function, lambda or class body) each node is evaluated in."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Sequence, Tuple

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# node type -> the fields that may hold nodes (``ctx`` holds shared Load/Store instances)
_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _fields(kind: type) -> Tuple[str, ...]:
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(f for f in kind._fields if f != "ctx")
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
        for field in _FIELDS.get(kind) or _fields(kind):
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)
    return out


def _header(node: ast.AST) -> List[ast.AST]:
    """What a def, lambda or class evaluates in the enclosing scope: decorators, defaults, bases."""
    if type(node) is ast.ClassDef:
        return node.decorator_list + node.bases + [k.value for k in node.keywords]
    args = node.args
    out = args.defaults + [d for d in args.kw_defaults if d is not None]
    if type(node) is not ast.Lambda:
        out += node.decorator_list + ([node.returns] if node.returns is not None else [])
    return out


class NodeIndex:
    """Nodes by type, and the scope of every node (its innermost def, lambda or class body)."""

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        self.by_type: Dict[type, List[ast.AST]] = {}
        self.scope_of: Dict[int, ast.AST] = {}
        self.parent_scope: Dict[int, Optional[ast.AST]] = {id(tree): None}
        by_type, scope_of = self.by_type, self.scope_of
        stack: List[Tuple[ast.AST, ast.AST]] = [(tree, tree)]
        push = stack.append
        while stack:
            node, scope = stack.pop()
            kind = type(node)
            bucket = by_type.get(kind)
            if bucket is None:
                by_type[kind] = [node]
            else:
                bucket.append(node)
            scope_of[id(node)] = scope
            if kind in _SCOPES:
                self.parent_scope[id(node)] = scope
                header = _header(node)
                marked = {id(h) for h in header}
                for child in header:
                    push((child, scope))
                inner = [node.body] if kind is ast.Lambda else node.body
                if kind is not ast.ClassDef:
                    inner = [node.args] + list(inner)
                for child in inner:
                    if id(child) not in marked:
                        push((child, node))
                continue
            for field in _FIELDS.get(kind) or _fields(kind):
                value = getattr(node, field, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.AST):
                            push((item, scope))
                elif isinstance(value, ast.AST):
                    push((value, scope))

    def of(self, *kinds: type) -> List[ast.AST]:
        by_type = self.by_type
        return [node for kind in kinds for node in by_type.get(kind, ())]

    def enclosing(self, scope: ast.AST) -> List[ast.AST]:
        """The scopes around ``scope``, innermost first, the module last."""
        out = []
        parent = self.parent_scope.get(id(scope))
        while parent is not None:
            out.append(parent)
            parent = self.parent_scope.get(id(parent))
        return out
