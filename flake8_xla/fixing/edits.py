"""Range edits and fixes: the data every fix is made of, and the statement removals they share."""
from __future__ import annotations

import ast
import bisect
from typing import Dict, Hashable, List, NamedTuple, Optional, Sequence, Tuple

from .lines import LineModel, line_ending


class Edit(NamedTuple):
    start: int  # character offsets into the source
    end: int
    text: str


class NoFix(NamedTuple):
    """A fix builder's answer for a use it cannot rewrite: why, for the human who will."""

    reason: str


class Fix(NamedTuple):
    title: str
    edits: Tuple[Edit, ...]
    safe: bool
    imports: Tuple[Hashable, ...] = ()  # planned imports (Importer keys) the edits' text relies on
    note: Optional[str] = None  # what the user must still do after this fix (set-up a companion needs)

    def span(self) -> Tuple[int, int]:
        return min(e.start for e in self.edits), max(e.end for e in self.edits)

    def identity(self, source: str) -> Tuple:
        """What the fix does, independent of where earlier fixes moved it."""
        return (self.title,) + tuple((source[e.start:e.end], e.text) for e in self.edits)


def apply_edits(source: str, edits: Sequence[Edit]) -> str:
    out, pos = [], 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        out.append(source[pos:edit.start])
        out.append(edit.text)
        pos = edit.end
    out.append(source[pos:])
    return "".join(out)


def choose(fixes: Sequence[Fix]) -> List[Fix]:
    """Non-overlapping fixes, earliest first (the rest wait for the next pass). Edits may touch; an
    insertion may not sit at the start of another edit (their order would be a guess)."""
    chosen: List[Fix] = []
    taken: List[Tuple[int, int]] = []  # sorted; non-overlapping, so their ends ascend too
    for fix in sorted(fixes, key=lambda f: f.span()):
        if all(_free(taken, e.start, e.end) for e in fix.edits):
            chosen.append(fix)
            for span in _envelopes(fix.edits):
                bisect.insort(taken, span)
    return chosen


def _envelopes(edits: Sequence[Edit]) -> List[Tuple[int, int]]:
    """A fix's ranges with those that overlap each other merged, so taken ranges never overlap."""
    out: List[Tuple[int, int]] = []
    for start, end in sorted((e.start, e.end) for e in edits):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _free(taken: List[Tuple[int, int]], start: int, end: int) -> bool:
    index = bisect.bisect_right(taken, (start, float("inf")))
    if index:
        before_start, before_end = taken[index - 1]
        if start < before_end or (start == end == before_start):
            return False
    return index == len(taken) or end <= taken[index][0]


_BLOCKS = ("body", "orelse", "finalbody")


def containing_block(stmt: ast.stmt, parent: Optional[ast.AST]) -> Optional[List[ast.stmt]]:
    """The statement list of ``parent`` that holds ``stmt``."""
    for name in _BLOCKS:
        body = getattr(parent, name, None)
        if isinstance(body, list) and any(s is stmt for s in body):
            return body
    return None


def alone_on_its_lines(lines: LineModel, stmt: ast.stmt) -> bool:
    """Nothing but indentation before the statement and nothing but a comment after it."""
    first, last = lines.line_start(stmt.lineno), lines.line_end(stmt.end_lineno)
    before, after = lines.source[first:lines.start(stmt)], lines.source[lines.end(stmt):last]
    return not before.strip() and (not after.strip() or after.lstrip().startswith("#"))


def has_comment(lines: LineModel, stmt: ast.stmt) -> bool:
    """Whether an import statement's lines carry a comment (import statements hold no strings)."""
    return "#" in lines.source[lines.start(stmt):lines.line_end(stmt.end_lineno)]


def removal_edits(lines: LineModel, removals: Sequence[Tuple[ast.stmt, Sequence[ast.alias]]],
                  parents: Dict[int, ast.AST]) -> Optional[List[Edit]]:
    """Remove ``aliases`` from each import statement: the whole statement when none remain. A block
    left empty keeps a ``pass``. None when one of them cannot be removed cleanly."""
    edits: List[Edit] = []
    emptied: Dict[int, Tuple[List[ast.stmt], List[ast.stmt]]] = {}
    for stmt, aliases in removals:
        if not alone_on_its_lines(lines, stmt):
            return None  # shares a line with another statement
        keep = [a for a in stmt.names if all(a is not doomed for doomed in aliases)]
        if keep:
            if "#" in lines.text(stmt):
                return None  # a comment inside a multi-line import would be lost
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
            text = f"import {names}" if type(stmt) is ast.Import else \
                f"from {'.' * stmt.level}{stmt.module or ''} import {names}"
            edits.append(Edit(lines.start(stmt), lines.end(stmt), text))
            continue
        parent = parents.get(id(stmt))
        block = containing_block(stmt, parent)
        if block is not None and type(parent) is not ast.Module:
            emptied.setdefault(id(block), (block, []))[1].append(stmt)
        edits.append(Edit(lines.line_start(stmt.lineno), lines.line_end(stmt.end_lineno), ""))
    for block, gone in emptied.values():
        if len(gone) == len(block):  # every statement of the block goes: the last becomes `pass`
            last = block[-1]
            start = lines.line_start(last.lineno)
            indent = lines.source[start:lines.start(last)]
            edits = [e for e in edits if e.start != start]
            ending = line_ending(lines.lines[last.end_lineno - 1])
            edits.append(Edit(start, lines.line_end(last.end_lineno), f"{indent}pass{ending}"))
    return edits


def statement_removal(lines: LineModel, stmt: ast.stmt, parents: Dict[int, ast.AST]) -> Optional[List[Edit]]:
    """Remove one statement alone on its lines; the last statement of a block becomes ``pass``."""
    if not alone_on_its_lines(lines, stmt):
        return None
    start = lines.line_start(stmt.lineno)
    end = lines.line_end(stmt.end_lineno)
    parent = parents.get(id(stmt))
    block = containing_block(stmt, parent)
    if block is not None and len(block) == 1 and type(parent) is not ast.Module:
        indent = lines.source[start:lines.start(stmt)]
        return [Edit(start, end, f"{indent}pass{line_ending(lines.lines[stmt.end_lineno - 1])}")]
    return [Edit(start, end, "")]


__all__ = ["Edit", "Fix", "alone_on_its_lines", "apply_edits", "choose", "containing_block", "has_comment",
           "removal_edits", "statement_removal"]
