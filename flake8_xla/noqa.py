"""`# noqa` handling for the standalone CLI, with flake8's exact semantics.

flake8 applies a `# noqa` comment anywhere in a logical line (a bracketed call over five lines,
a triple-quoted string) to every physical line of it, matches codes by prefix, and skips a file
with a `# flake8: noqa` line. The comment grammar is flake8's (``flake8.defaults``), written out
here so that the CLI does not import flake8 and logging (~8 ms of each start); a test holds the
two to the same answers.
"""
from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, Iterable, List, Sequence

from .rule import Diagnostic

# `# flake8: noqa` (or `=`) opening a line; one space after `#`, as flake8 asks
NOQA_FILE = re.compile(r"\s*# flake8[:=]\s*noqa", re.IGNORECASE)
# `# noqa`, optionally `: CODE, CODE` (codes split by commas and/or whitespace)
NOQA_INLINE_REGEXP = re.compile(r"# noqa(?::\s?(?P<codes>(?:[A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)


def file_is_exempt(lines: Sequence[str]) -> bool:
    """A `# flake8: noqa` line on its own exempts the file (as in flake8)."""
    return any(NOQA_FILE.match(line) for line in lines)


def _logical_line_text(lines: Sequence[str], upto: int) -> Dict[int, str]:
    """Map each physical line number (up to line ``upto``) to the text of the whole logical line
    it belongs to."""
    mapping: Dict[int, str] = {}
    first, last = len(lines) + 2, -1
    try:
        for tok in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
            if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            first, last = min(first, tok.start[0]), max(last, tok.end[0])
            if tok.type in (tokenize.NL, tokenize.NEWLINE):
                joined = "".join(lines[first - 1:last])
                mapping.update(dict.fromkeys(range(first, last + 1), joined))
                if last >= upto:
                    break  # the lines after the last diagnostic do not matter
                first, last = len(lines) + 2, -1
    except (tokenize.TokenError, SyntaxError):
        return {}
    return mapping


def is_suppressed(code: str, text: str) -> bool:
    match = NOQA_INLINE_REGEXP.search(text)
    if match is None:
        return False
    codes = match.group("codes")
    if codes is None:
        return True
    listed = tuple(c for c in codes.replace(",", " ").split() if c)
    return code in listed or code.startswith(listed)


def suppressed_lines(lines: Sequence[str], line_numbers: Iterable[int]) -> Dict[int, str]:
    """The noqa-searchable text of each of ``line_numbers`` (only lines that mention noqa)."""
    wanted = sorted(set(line_numbers))
    if not any("noqa" in line.lower() for line in lines):  # the common case: no tokenizing
        return {}
    mapping = _logical_line_text(lines, wanted[-1])
    return {n: mapping.get(n, lines[n - 1] if 0 < n <= len(lines) else "") for n in wanted}


def filter_noqa(lines: Sequence[str], diagnostics: Sequence[Diagnostic]) -> List[Diagnostic]:
    """``diagnostics`` without the ones a `# noqa` comment suppresses."""
    if not diagnostics:
        return list(diagnostics)
    texts = suppressed_lines(lines, (d.line for d in diagnostics))
    if not texts:
        return list(diagnostics)
    return [d for d in diagnostics if not is_suppressed(d.code, texts.get(d.line, ""))]
