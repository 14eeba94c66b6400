"""The one engine every front-end calls: source in, sorted diagnostics out."""
from __future__ import annotations

import ast
import functools
import io
import re
from typing import List, Optional, Sequence

from .lifecycle import api_table
from .rule import Diagnostic, FileContext, Rule
from .versions import Target, infer_target

# A file that matches none of these cannot contain anything a rule reports.
_PREFILTER = re.compile(r"torch_xla|XRT_|XLA_|GPU_NUM_DEVICES|PJRT_DEVICE")


@functools.lru_cache(maxsize=None)
def all_rules() -> tuple:
    from flake8_xla.rules import RULES

    return tuple(cls() for cls in RULES)


def might_match(source: str) -> bool:
    return _PREFILTER.search(source) is not None


def lint(lines: Sequence[str], tree: Optional[ast.AST] = None, filename: str = "<stdin>",
         target: Optional[str] = None, rules: Optional[Sequence[Rule]] = None) -> List[Diagnostic]:
    """Lint one file given as lines (as flake8 provides them) and, optionally, its parsed tree.

    Raises SyntaxError only when ``tree`` is None and the source does not parse.
    """
    source = "".join(lines)
    if not might_match(source):
        return []
    if tree is None:
        tree = ast.parse(source, filename)
    table = api_table()
    resolved = infer_target(filename, target, table.latest)
    return lint_tree(lines, tree, filename, resolved, rules)


def lint_tree(lines: Sequence[str], tree: ast.AST, filename: str, target: Target,
              rules: Optional[Sequence[Rule]] = None) -> List[Diagnostic]:
    ctx = FileContext(lines, tree, filename, target, api_table())
    out: List[Diagnostic] = []
    for rule in all_rules() if rules is None else rules:
        out.extend(rule.check(ctx))
    out.sort()
    return out


def lint_source(source: str, filename: str = "<string>", target: Optional[str] = "2.9") -> List[Diagnostic]:
    """Convenience for tests and tools: lint a source string against an explicit target."""
    # Split only at the newlines Python's tokenizer knows (str.splitlines also splits at \x0c, U+2028 ...).
    return lint(io.StringIO(source, newline=None).readlines(), None, filename, target)


__all__ = ["Diagnostic", "all_rules", "lint", "lint_source", "lint_tree", "might_match"]
