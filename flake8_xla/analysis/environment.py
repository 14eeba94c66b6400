"""Environment variables a module sets from Python: ``os.environ[K] = v``, ``os.environ.setdefault``,
``os.environ.update`` and ``os.putenv``, as (key node, value node) pairs."""
from __future__ import annotations

import ast
from typing import Iterator, Optional, Tuple

from .semantic import Reference, SemanticModel

ENV_SETTERS = frozenset({"os.environ", "os.environ.setdefault", "os.environ.update", "os.putenv"})


def env_assignments(ref: Reference, model: SemanticModel) -> Iterator[Tuple[ast.AST, Optional[ast.AST]]]:
    """(key, value) of each variable the setter ``ref`` sets; a keyword of ``update(K=v)`` is its own key."""
    parent = ref.parent
    if ref.qualname == "os.environ":
        if type(parent) is ast.Subscript and parent.value is ref.node and type(parent.ctx) is ast.Store:
            yield parent.slice, model.assigned.get(parent)
        return
    call = ref.call
    if call is None:
        return
    if ref.qualname in ("os.environ.setdefault", "os.putenv"):
        if call.args:
            yield call.args[0], call.args[1] if len(call.args) > 1 else None
    else:  # os.environ.update({...}, KEY=value)
        for arg in call.args:
            if type(arg) is ast.Dict:
                yield from ((k, v) for k, v in zip(arg.keys, arg.values) if k is not None)
        for keyword in call.keywords:
            if keyword.arg:
                yield keyword, keyword.value


def string_value(node: Optional[ast.AST]) -> Optional[str]:
    """The text of a string literal or the name of a keyword, else None."""
    if type(node) is ast.keyword:
        return node.arg
    if type(node) is ast.Constant and type(node.value) is str:
        return node.value
    return None


def switches_off(value: Optional[ast.AST]) -> bool:
    """`X = "0"`, `X = ""` or `X = str(0)` turns a flag off: nothing to migrate."""
    if type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "str" and len(value.args) == 1:
        value = value.args[0]
    if type(value) is ast.Constant:
        return str(value.value).strip().lower() in ("", "0", "false", "none")
    return False
