"""Finding the uses of a table's rows in a file: what both tables read off a resolved reference (the
environment variables a setter sets, the argument a row is about)."""
from __future__ import annotations

import ast
from typing import Iterator, Optional, Tuple, Union

from ..analysis.environment import env_assignments, string_value
from ..analysis.semantic import Reference, SemanticModel


def env_settings(ref: Reference, model: SemanticModel) -> Iterator[Tuple[ast.AST, str, Optional[ast.AST]]]:
    """Each environment variable the setter ``ref`` sets by a literal name: the name's node, the name and
    the value's node (a computed name names no row)."""
    for key_node, value_node in env_assignments(ref, model):
        key = string_value(key_node)
        if key is not None:
            yield key_node, key, value_node


def passed_argument(call: ast.Call, keyword: Optional[str],
                    position: Optional[int]) -> Union[ast.keyword, ast.expr, None]:
    """The argument of ``call`` a row is about: the ``keyword`` (its ``ast.keyword``), else the one at
    ``position``; None when neither is passed or a ``*args`` up to it hides which argument sits there."""
    if keyword is not None:
        given = next((k for k in call.keywords if k.arg == keyword), None)
        if given is not None:
            return given
    if position is None or len(call.args) <= position:
        return None
    if any(type(a) is ast.Starred for a in call.args[: position + 1]):
        return None
    return call.args[position]
