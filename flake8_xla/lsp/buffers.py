"""What the language server does with one open buffer, as the CLI's file jobs do it: lint it, fix one
diagnostic, fix everything safe, add a ``# noqa``. No LSP type here: positions are the engine's
(1-based lines, 0-based code-point columns), results are new texts by document URI.

A notebook arrives as cells; it is linted as the .ipynb the CLI would read (one program of all its
code cells), so a notebook on disk and the same notebook in an editor give the same diagnostics.
"""
from __future__ import annotations

import ast
import difflib
import json
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..session.adding_noqa import add_noqa
from ..session.sources import DEFAULT_MAX_FILE_SIZE, format_size
from ..session.running import Job, assumes_torch_xla, run_file, target_for
from ..config import Settings
from ..documents.programs import fix_document, lint_document
from ..documents.reading import DocumentError, read_document
from ..engine import fix_one
from ..fixing import Fix
from ..output.formats import Finding
from ..rule import Diagnostic
from ..session.selection import CodeSelector

# what a notebook cell's language must be for the cell to count as code (the CLI's reader skips the
# other cells of the .ipynb; the rest of the document is the kernel's language, Python here)
PYTHON_CELL_LANGUAGES = frozenset({"python", "ipython", "python3"})
NOTEBOOK_METADATA = {"language_info": {"name": "python"}}
# the CLI's cap on a file it reads (an editor can hold a generated file far larger than any module)
TOO_LARGE = f"larger than the {format_size(DEFAULT_MAX_FILE_SIZE)} size cap; not linted"


class Cell(NamedTuple):
    uri: str
    code: bool  # a code cell (else Markdown)
    language: str
    text: str


class Buffer(NamedTuple):
    """An open document as the editor holds it (unsaved edits included)."""

    uri: str
    path: str  # for configuration, target, per-file-ignores; the file need not exist
    version: int
    text: str  # the source; for a notebook, the .ipynb text the CLI would read
    cells: Tuple[Cell, ...] = ()  # a notebook's cells, in order

    @classmethod
    def notebook(cls, uri: str, path: str, version: int, cells: Tuple[Cell, ...]) -> "Buffer":
        entries = [{"cell_type": _cell_type(cell), "metadata": {}, "source": cell.text,
                    **({"outputs": [], "execution_count": None} if _cell_type(cell) == "code" else {})}
                   for cell in cells]
        text = json.dumps({"cells": entries, "metadata": NOTEBOOK_METADATA, "nbformat": 4, "nbformat_minor": 5},
                          indent=1)
        return cls(uri, path, version, text, cells)

    @property
    def first_uri(self) -> str:
        """Where a finding about the whole buffer is shown: the file, or a notebook's first cell."""
        return self.cells[0].uri if self.cells else self.uri

    def whole_file(self, code: str, message: str) -> "Reported":
        """A finding about the whole buffer (not linted, internal error), at its start."""
        return Reported(self.first_uri, Finding(self.path, Diagnostic(1, 0, code, message)))

    def text_of(self, uri: str) -> Optional[str]:
        """The text of the document ``uri`` names: this buffer, or one of its cells."""
        if uri == self.uri and not self.cells:
            return self.text
        return next((cell.text for cell in self.cells if cell.uri == uri), None)

    def new_texts(self, text: str) -> Dict[str, str]:
        """The documents a changed buffer text changes, by URI, with their new text."""
        if not self.cells:
            return {} if text == self.text else {self.uri: text}
        sources = [cell.get("source", "") for cell in json.loads(text)["cells"]]
        return {cell.uri: "".join(new) for cell, new in zip(self.cells, sources) if "".join(new) != cell.text}


def _cell_type(cell: Cell) -> str:
    if not cell.code:
        return "markdown"
    return "code" if cell.language.lower() in PYTHON_CELL_LANGUAGES else "raw"


class Reported(NamedTuple):
    """A finding and the document it is shown in (the buffer, or a notebook's cell)."""

    uri: str
    finding: Finding


class QuickFix(NamedTuple):
    title: str
    safe: bool
    texts: Dict[str, str]  # uri -> new text


class Linter:
    """Lints buffers with one file's settings (the project's configuration and the client's)."""

    def __init__(self, settings: Settings, selector: CodeSelector) -> None:
        self.settings = settings
        self.selector = selector

    def _job(self, buffer: Buffer, fix: bool = False) -> Job:
        return Job(self.settings, self.selector, fix=fix, stdin_filename=buffer.path)

    def lint(self, buffer: Buffer) -> List[Reported]:
        """The findings the CLI reports for this text (fixable: a safe fix exists)."""
        if len(buffer.text.encode("utf-8", "replace")) > DEFAULT_MAX_FILE_SIZE:
            return [buffer.whole_file("E902", TOO_LARGE)]
        result = run_file(self._job(buffer), "-", text=buffer.text)
        if not buffer.cells:
            return [Reported(buffer.uri, f) for f in result.findings]
        cells = buffer.cells
        return [Reported(cells[f.cell - 1].uri if f.cell and f.cell <= len(cells) else buffer.first_uri, f)
                for f in result.findings]

    def fix_all(self, buffer: Buffer) -> Dict[str, str]:
        """Every safe fix the selection allows, to a fixpoint (``flake8-xla fix``)."""
        result = run_file(self._job(buffer, fix=True), "-", text=buffer.text)
        if result.stdout_bytes is None or result.error:
            return {}
        return buffer.new_texts(result.stdout_bytes.decode("utf-8"))

    def quick_fix(self, buffer: Buffer, reported: Reported) -> Optional[QuickFix]:
        """The fix of one diagnostic alone, safe or not; None when it has none."""
        target = target_for(self._job(buffer), buffer.path)
        sync = self.settings.sync_functions
        if not buffer.cells:
            try:
                outcome = fix_one(buffer.text, buffer.path, target, reported.finding.diagnostic, sync)
            except (SyntaxError, ValueError):
                return None
            return _quick_fix(outcome.applied, buffer.new_texts(outcome.source) if not outcome.error else {})
        document = read_document(buffer.path, buffer.text)
        assume = assumes_torch_xla(self.settings, buffer.path)
        for number, (program, raw) in enumerate(lint_document(document, buffer.text, target, assume, sync)):
            for diagnostic in raw:
                located = program.locate(document, diagnostic)
                if located is not None and (located.diagnostic, located.cell) == \
                        (reported.finding.diagnostic, reported.finding.cell):
                    try:
                        fixed = fix_document(document, buffer.text, target, lambda code: True, True, assume, sync,
                                             only=(number, diagnostic))
                    except DocumentError:
                        return None
                    return _quick_fix(fixed.applied, buffer.new_texts(fixed.text) if not fixed.error else {})
        return None


def _quick_fix(applied: List[Fix], texts: Dict[str, str]) -> Optional[QuickFix]:
    if not applied or not texts:
        return None
    return QuickFix(applied[0].title, applied[0].safe, texts)


def noqa_texts(buffer: Buffer, reported: Reported) -> Dict[str, str]:
    """The document with ``# noqa: CODE`` on the diagnostic's line (``check --add-noqa``); empty when
    a comment there would not suppress it (or would break the code)."""
    text = buffer.text_of(reported.uri)
    if text is None:
        return {}
    if buffer.cells:  # a cell's own lines: its IPython lines would not parse as Python
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return {}
    new_text, annotated = add_noqa(text, [reported.finding.diagnostic])
    return {reported.uri: new_text} if annotated else {}


def line_edits(old: str, new: str) -> List[Tuple[int, int, str]]:
    """The edits turning ``old`` into ``new``, by whole lines and only where they differ: (first
    line, end line, replacement), lines 0-based, the end exclusive (``len(lines)``: the end of the
    text). An added import and a changed call stay two small edits, not one that spans both."""
    old_lines, new_lines = old.splitlines(True), new.splitlines(True)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    return [(i1, i2, "".join(new_lines[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


__all__ = ["Buffer", "Cell", "Linter", "QuickFix", "Reported", "line_edits", "noqa_texts"]
