"""Lint and fix the Python blocks of a document (notebook, Markdown, reStructuredText) as one
program, with every diagnostic put back where its line sits in the document.

A tutorial builds up: the import in its first block applies to the calls in later ones. So the
blocks (each of which parsed on its own, see :mod:`flake8_xla.documents.reading`) are joined, in order,
into one program, separated by marker comments; names resolve across them, and a diagnostic's
program line tells its block and the block's line. A fix runs on the program too, which is then
cut at the markers back into blocks, and only the blocks it changed are written back.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Tuple

from .reading import Block, Document, DocumentError, rewrite
from ..engine import concerns_xla, fix_one, fix_source, lint_fixable
from ..fixing import Fix
from ..fixing.lines import split_lines
from ..rule import Diagnostic
from ..versions import Target

_BOUNDARY = "# flake8-xla: block {}\n"
# a document whose blocks are alternatives, not steps of one program (rule pages: Example / Use
# instead) says so anywhere in its text, e.g. in an HTML comment
SEPARATE_BLOCKS = "flake8-xla: separate-blocks"
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")
_BOUNDARY_RE = re.compile(r"^# flake8-xla: block (\d+)\n", re.MULTILINE)


class Located(NamedTuple):
    """A diagnostic in document coordinates: the file's line and column for Markdown/rst; for a
    notebook the line within ``cell`` and, in ``file_line``, the line of the .ipynb text."""

    diagnostic: Diagnostic
    cell: Optional[int] = None
    file_line: Optional[int] = None


class Program(NamedTuple):
    """A document's blocks joined into one module, and where each of its lines came from."""

    source: str
    lines: Tuple[Optional[Tuple[int, int]], ...]  # program line - 1 -> (block index, line in block), None: marker
    order: Tuple[int, ...]  # the block indexes, in program order

    @classmethod
    def of(cls, document: Document, blocks: Optional[List[Block]] = None) -> "Program":
        parts: List[str] = []
        lines: List[Optional[Tuple[int, int]]] = []
        blocks = document.blocks if blocks is None else blocks
        for block in blocks:
            parts.append(_BOUNDARY.format(block.index))
            lines.append(None)
            text = block.source if block.source.endswith("\n") or not block.source else block.source + "\n"
            parts.append(text)
            lines.extend((block.index, number) for number in range(1, len(split_lines(text)) + 1))
        return cls("".join(parts), tuple(lines), tuple(block.index for block in blocks))

    def locate(self, document: Document, diagnostic: Diagnostic) -> Optional[Located]:
        place = self.place(diagnostic.line)
        if place is None:
            return None
        block = _by_index(document)[place[0]]
        line, offset = block.origin[place[1] - 1]

        def relabel(text: str) -> str:
            return _LINE_REFERENCE.sub(lambda m: self._line_label(document, int(m.group(1)), block.cell), text)

        moved = diagnostic._replace(line=line, col=diagnostic.col + offset, message=relabel(diagnostic.message),
                                    help=diagnostic.help and relabel(diagnostic.help))
        file_line = block.json_lines[place[1] - 1] if block.json_lines else None
        return Located(moved, block.cell, file_line)

    def _line_label(self, document: Document, line: int, cell: Optional[int]) -> str:
        """A message's "line N" (a program line) as the document's: "line 12", or in a notebook
        "line 3" of the same cell and "cell 2, line 3" of another one."""
        place = self.place(line)
        if place is None:
            return f"line {line}"
        block = _by_index(document)[place[0]]
        origin = block.origin[place[1] - 1][0]
        if block.cell is not None and block.cell != cell:
            return f"cell {block.cell}, line {origin}"
        return f"line {origin}"

    def place(self, line: int) -> Optional[Tuple[int, int]]:
        """(block index, line in block) of a program line; None for a marker or outside the program."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else None

    def block_of(self, line: int) -> Optional[int]:
        place = self.place(line)
        return None if place is None else place[0]

    def relates_blocks(self, diagnostic: Diagnostic) -> bool:
        """Whether a diagnostic (its message or help) ties its line to a line of another block ("... on
        line N"). A guide's blocks share names (an import in the first serves the rest) but are often
        separate examples, so such a relation is not trusted there; a notebook's cells run in one kernel."""
        own = self.block_of(diagnostic.line)
        return any(self.block_of(int(m.group(1))) not in (own, None)
                   for m in _LINE_REFERENCE.finditer(f"{diagnostic.message} {diagnostic.help or ''}"))

    def split(self, fixed: str) -> Optional[Dict[int, str]]:
        """The blocks of a fixed program, by index; None when its markers did not survive."""
        marks = list(_BOUNDARY_RE.finditer(fixed))
        if tuple(int(m.group(1)) for m in marks) != self.order or not marks:
            return None
        out = {}
        for number, mark in enumerate(marks):
            end = marks[number + 1].start() if number + 1 < len(marks) else len(fixed)
            out[int(mark.group(1))] = fixed[mark.end():end]
        # an import added above everything (the program had none to follow) opens the first block
        out[self.order[0]] = fixed[:marks[0].start()] + out[self.order[0]]
        return out


def _by_index(document: Document) -> Dict[int, Block]:
    return {block.index: block for block in document.blocks}


def programs(document: Document, text: str) -> List[Program]:
    """One program of all blocks, or one per block when the document says its blocks are separate.
    A notebook cell's ``%%writefile x.py`` body is another file: always a program of its own."""
    if SEPARATE_BLOCKS in text:
        return [Program.of(document, [block]) for block in document.blocks]
    files = [Program.of(document, [block]) for block in document.blocks if block.kind == "writefile"]
    shared = [block for block in document.blocks if block.kind != "writefile"]
    return ([Program.of(document, shared)] if shared else []) + files


def lint_document(document: Document, text: str, target: Target, assume_xla: bool = False,
                  sync_functions: FrozenSet[str] = frozenset()
                  ) -> List[Tuple[Program, List[Diagnostic]]]:
    """Each program of a document with its raw diagnostics (in program coordinates, their fix
    applicability set); a program that cannot concern torch_xla has none."""
    out = []
    for program in programs(document, text):
        if not concerns_xla(program.source, assume_xla, target.migrate_to):
            out.append((program, []))
            continue
        tree = ast.parse(program.source, document.path)
        pairs, _ = lint_fixable(program.source, tree, document.path, target, assume_xla=True,
                                sync_functions=sync_functions)
        if document.kind != "notebook":
            pairs = [(d, f) for d, f in pairs if not program.relates_blocks(d)]
        out.append((program, [d for d, _ in pairs]))
    return out


class DocumentFix(NamedTuple):
    text: str  # the document after the fixes (the original text when nothing changed)
    fixed: Counter  # fixes applied, by code
    error: Optional[str]  # a fix pass that was dropped (see FixOutcome.error)
    notes: List[str]  # what the applied fixes still ask of the user
    applied: List[Fix]  # the fixes applied
    # what they fixed, located in the document (programs.Located); only the first pass's
    # diagnostics, whose positions are in the text as given
    fixed_findings: List = []


def fix_document(document: Document, text: str, target: Target, wanted: Callable[[str], bool],
                 unsafe: bool, assume_xla: bool = False, sync_functions: FrozenSet[str] = frozenset(),
                 only: Optional[Tuple[int, Diagnostic]] = None) -> DocumentFix:
    """Fix each program of a document, then write the changed blocks back into ``text``. Raises
    :class:`DocumentError` when a changed block cannot be written back safely.

    ``only``: (position in :func:`programs`, raw diagnostic of that program, as
    :func:`lint_document` gives it): apply that diagnostic's fix alone (an editor's quick fix)."""
    old = {block.index: block.source for block in document.blocks}
    changed: Dict[int, str] = {}
    fixed: Counter = Counter()
    notes: List[str] = []
    applied: List[Fix] = []
    found: List = []
    error = None
    for number, program in enumerate(programs(document, text)):
        if only is not None:
            if number != only[0]:
                continue
            outcome = fix_one(program.source, document.path, target, only[1], sync_functions)
        elif not concerns_xla(program.source, assume_xla, target.migrate_to):
            continue
        else:
            outcome = fix_source(program.source, document.path, target, wanted, unsafe, assume_xla=True,
                                 sync_functions=sync_functions, selected=wanted)
        error = error or outcome.error
        if outcome.source == program.source:
            continue
        blocks = program.split(outcome.source)
        if blocks is None:
            raise DocumentError("a fix moved code across blocks")
        fixed += outcome.fixed
        applied += outcome.applied
        found.extend(filter(None, (program.locate(document, d) for d, first in outcome.fixed_diagnostics if first)))
        notes.extend(note for note in outcome.notes if note not in notes)
        changed.update({index: source for index, source in blocks.items()
                        if source.rstrip("\n") != old[index].rstrip("\n")})
    for index, source in changed.items():  # a fix may not leave a block that does not parse alone
        try:
            ast.parse(source)
        except SyntaxError as exc:
            raise DocumentError(f"a fix would leave block {index + 1} unparsable: {exc.msg}") from None
    return DocumentFix(rewrite(document, text, changed) if changed else text, fixed, error, notes, applied, found)


__all__ = ["SEPARATE_BLOCKS", "DocumentFix", "Located", "Program", "fix_document", "lint_document", "programs"]
