"""What the fix builders of both tables share: the rewrite a fix kind produces, reaching a module from
the use being rewritten, the statement around a node and the tokens of a stretch of source."""
from __future__ import annotations

import ast
import io
import tokenize
from typing import Dict, List, Optional, Tuple

from ..analysis.semantic import Reference
from ..fixing import Edit, FixSite, PlannedImport

Rewrite = Tuple[List[Edit], List[PlannedImport]]  # a fix kind's edits and the imports they need


def reach(site: FixSite, module: str, ref: Reference) -> Optional[Tuple[str, List[PlannedImport]]]:
    """How the file spells ``module`` where ``ref`` is, and the import that spelling needs (none when a
    binding the use sees already reaches it); None when no import placement keeps the program's meaning."""
    reached = site.importer.reach(module, ref)
    if reached is None:
        return None
    prefix, planned = reached
    return prefix, [planned] if planned is not None else []


def enclosing_statement(node: ast.AST, parents: Dict[int, ast.AST]) -> Optional[ast.stmt]:
    """The statement holding ``node`` (``node`` itself when it is one)."""
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(id(node))
    return node


def source_tokens(text: str) -> Optional[List[tokenize.TokenInfo]]:
    """The tokens of a stretch of source, or None when it does not tokenize on its own (a fix then leaves
    it alone)."""
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
        return None
