"""Python's line model, shared by every layer that turns positions into text.

A line ends at ``\\r\\n``, ``\\r`` or ``\\n`` and nowhere else: ``str.splitlines()`` also breaks at
form feeds, ``\\v``, ``\\x1c``-``\\x1e``, ``\\x85`` and U+2028/2029, which Python's tokenizer (and so
every ast position and flake8 column) treats as ordinary characters.
"""
from __future__ import annotations

import bisect
import re
from typing import TYPE_CHECKING, List

if TYPE_CHECKING:  # annotations only: splitting lines (a cached run) does not load the ast module
    import ast

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_ENDING = re.compile(r"(\r\n|\r|\n)\Z")


def split_lines(source: str) -> List[str]:
    """Lines as Python's tokenizer sees them, each keeping its own ending."""
    return _LINE.findall(source)


def line_ending(line: str) -> str:
    match = _ENDING.search(line)
    return match.group(1) if match else ""


class LineModel:
    """Converts ast positions (1-based lines, UTF-8 byte columns) to character offsets of ``source``."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = split_lines(source)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, byte_col: int) -> int:
        if lineno > len(self.lines):
            return len(self.source)
        line = self.lines[lineno - 1]
        col = byte_col if line.isascii() else len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return self.starts[lineno - 1] + col

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        return self.source[self.start(node):self.end(node)]

    def line_start(self, lineno: int) -> int:
        return self.starts[min(lineno, len(self.lines)) - 1] if self.lines else 0

    def line_end(self, lineno: int) -> int:
        """Offset just past the ending of ``lineno``."""
        return self.starts[min(lineno, len(self.lines))]

    def lineno(self, offset: int) -> int:
        """The 1-based line holding character ``offset``."""
        return max(1, min(bisect.bisect_right(self.starts, offset), len(self.lines)))

    def default_ending(self) -> str:
        return next((line_ending(line) for line in self.lines if line_ending(line)), "\n")


__all__ = ["LineModel", "line_ending", "split_lines"]
