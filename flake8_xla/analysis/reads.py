"""What copies a device value to the host: the tensor methods and builtins every host-sync rule
and the module summaries read, written once."""
from __future__ import annotations

import ast
from typing import Optional

# ``t.item()``, ``t.tolist()``, ``t.numpy()``, ``t.cpu()``: each waits for the graph and copies
READ_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
# ``float(t)``, ``int(t)``, ``bool(t)``: the same read, through ``__float__`` and friends
READ_BUILTINS = frozenset({"float", "int", "bool"})


def read_method(node: ast.AST) -> Optional[str]:
    """The method of ``t.item()`` (``tolist``, ``numpy``, ``cpu``) called without arguments, else None."""
    if type(node) is not ast.Call or node.args:
        return None
    func = node.func
    return func.attr if type(func) is ast.Attribute and func.attr in READ_METHODS else None
