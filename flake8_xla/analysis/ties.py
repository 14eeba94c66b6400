"""Which statement ties parameters: ``a.x.weight = b.y.weight`` or ``m.tie_weights()`` (XLA601
looks for such a tie before a move to the XLA device and for one after it)."""
from __future__ import annotations

import ast
from typing import NamedTuple, Optional

from .syntax import dotted

# the parameters a tie shares between two modules
PARAMETERS = frozenset({"weight", "bias"})


class Tie(NamedTuple):
    node: ast.stmt  # the assignment, or the tie_weights() call statement
    # the dotted name inside which it ties: ``model.head.weight`` in ``model.head.weight = ...``,
    # ``model`` in ``model.tie_weights()``
    inside: str
    text: str  # as written, for the message
    tie_weights: bool  # a ``.tie_weights()`` call

    def of(self, name: str) -> bool:
        """Whether it ties parameters of the module ``name`` holds."""
        return self.inside.startswith(name + ".") or (self.tie_weights and self.inside == name)


def tie_of(stmt: ast.stmt) -> Optional[Tie]:
    """The tie a statement makes: ``a.x.weight = b.y.weight`` or ``m.tie_weights()``."""
    if type(stmt) is ast.Assign and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
        if type(target) is ast.Attribute and type(value) is ast.Attribute and target.attr in PARAMETERS and \
                value.attr in PARAMETERS:
            left, right = dotted(target), dotted(value)
            if left and right and left != right:
                return Tie(stmt, left, f"{left} = {right}", False)
    if type(stmt) is ast.Expr and type(stmt.value) is ast.Call:
        func = stmt.value.func
        if type(func) is ast.Attribute and func.attr == "tie_weights" and not stmt.value.args:
            root = dotted(func.value)
            if root:
                return Tie(stmt, root, f"{root}.tie_weights()", True)
    return None
