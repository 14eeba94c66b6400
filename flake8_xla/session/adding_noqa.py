"""``check --add-noqa``: a ``# noqa: CODE`` comment for each line with a diagnostic.

flake8 reads a noqa comment from the physical lines joined by a multi-line string or a backslash
(see :mod:`flake8_xla.noqa`), so the comment goes at the end of the last of those lines: never
inside a string, never after a backslash. An existing ``# noqa: X`` gets the new codes added.
Each result is checked with the same noqa reading the report uses; a line where the comment
would not suppress the diagnostic (or the file would no longer parse) is left alone.
"""
from __future__ import annotations

import io
import tokenize
from typing import Dict, List, Sequence, Set, Tuple

from ..fixing.lines import line_ending, split_lines
from ..noqa import NOQA_INLINE_REGEXP, filter_noqa
from ..rule import Diagnostic

NOT_ANNOTATED = ("E902", "E999", "XLA000")  # about the file, not a line: a comment cannot help


def _comment_lines(text: str) -> Dict[int, int]:
    """Physical line -> the line whose end takes the comment (the end of its noqa span)."""
    spans: Dict[int, int] = {}
    first = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT, tokenize.INDENT):
            continue
        first = tok.start[0] if first is None else first
        if tok.type in (tokenize.NL, tokenize.NEWLINE):
            spans.update(dict.fromkeys(range(first, tok.end[0] + 1), tok.start[0]))
            first = None
    return spans


def _with_codes(line: str, codes: Sequence[str]) -> str:
    ending = line_ending(line)
    body = line[:len(line) - len(ending)] if ending else line
    match = NOQA_INLINE_REGEXP.search(body)
    if match is not None and match.group("codes"):
        listed = set(match.group("codes").replace(",", " ").split())
        extra = [c for c in codes if c not in listed]
        return body[:match.end("codes")] + "".join(f", {c}" for c in extra) + body[match.end("codes"):] + ending
    return body.rstrip(" \t") + f"  # noqa: {', '.join(codes)}" + ending


def add_noqa(text: str, diagnostics: Sequence[Diagnostic]) -> Tuple[str, List[Diagnostic]]:
    """The text with noqa comments for ``diagnostics``, and the diagnostics it now suppresses."""
    wanted = [d for d in diagnostics if d.code not in NOT_ANNOTATED]
    if not wanted:
        return text, []
    try:
        spans = _comment_lines(text)
    except (tokenize.TokenError, SyntaxError):
        return text, []
    by_line: Dict[int, List[Diagnostic]] = {}
    for d in wanted:
        if d.line in spans:
            by_line.setdefault(spans[d.line], []).append(d)
    skipped: Set[int] = set()
    for _ in range(2):  # once, then once more without the lines where a comment did not work
        lines = split_lines(text)
        for number, found in by_line.items():
            if number not in skipped and number <= len(lines):
                lines[number - 1] = _with_codes(lines[number - 1], sorted({d.code for d in found}))
        new_text = "".join(lines)
        tried = [d for number, found in by_line.items() if number not in skipped for d in found]
        still = set(filter_noqa(split_lines(new_text), tried))
        if not still:
            break
        skipped |= {number for number, found in by_line.items() if any(d in still for d in found)}
    else:
        return text, []
    try:
        import ast

        ast.parse(new_text)
    except (SyntaxError, ValueError):
        return text, []
    return new_text, tried
