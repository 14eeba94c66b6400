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
from typing import Callable, Collection, Dict, Iterable, Iterator, List, NamedTuple, Sequence, Tuple

from .rule import Diagnostic

# `# flake8: noqa` (or `=`) opening a line; one space after `#`, as flake8 asks
NOQA_FILE = re.compile(r"\s*# flake8[:=]\s*noqa", re.IGNORECASE)
# `# noqa`, optionally `: CODE, CODE` (codes split by commas and/or whitespace)
NOQA_INLINE_REGEXP = re.compile(r"# noqa(?::\s?(?P<codes>(?:[A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)


def file_is_exempt(lines: Sequence[str]) -> bool:
    """A `# flake8: noqa` line on its own exempts the file (as in flake8)."""
    return any(NOQA_FILE.match(line) for line in lines)


def _line_groups(lines: Sequence[str]) -> Iterator[Tuple[int, int, List[tokenize.TokenInfo]]]:
    """(first, last physical line, its comment tokens) of each run of lines that flake8 searches for
    `# noqa` as one text. Raises tokenize.TokenError or SyntaxError for text that does not tokenize."""
    first, last = len(lines) + 2, -1
    comments: List[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
        if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
            continue
        first, last = min(first, tok.start[0]), max(last, tok.end[0])
        if tok.type == tokenize.COMMENT:
            comments.append(tok)
        elif tok.type in (tokenize.NL, tokenize.NEWLINE):
            yield first, last, comments
            first, last, comments = len(lines) + 2, -1, []


def _logical_line_text(lines: Sequence[str], upto: int) -> Dict[int, str]:
    """Map each physical line number (up to line ``upto``) to the text of the whole logical line
    it belongs to."""
    mapping: Dict[int, str] = {}
    try:
        for first, last, _ in _line_groups(lines):
            joined = "".join(lines[first - 1:last])
            mapping.update(dict.fromkeys(range(first, last + 1), joined))
            if last >= upto:
                break  # the lines after the last diagnostic do not matter
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


# --- the `# noqa` comments themselves: unknown codes (a warning), unused codes (XLA001) -------------

# every code flake8-xla reports, besides its rules' (the internal error): never unknown
OTHER_CODES = ("XLA000",)
OUR_PREFIX = "XLA"  # another plugin's codes in the same comment are not ours to judge
# XLA001 unused-noqa is judged where `# noqa` is applied (the engine, and the CLI), once the rules have run
UNUSED_NOQA = "XLA001"


class Directive(NamedTuple):
    """One `# noqa` comment. Columns are 0-based characters on ``line``."""

    line: int
    col: int  # where its `# noqa` starts
    end_col: int  # just past its codes (past `# noqa` when it lists none)
    codes: Tuple[str, ...]  # as written, in order; () for a blanket `# noqa`
    codes_col: int  # where the codes start (== end_col when there are none)
    comment_col: int  # where the comment holding it starts
    comment: str  # the whole comment, `#` to the end of the line
    covers: Tuple[int, int]  # the first and last physical line whose findings it suppresses
    effective: bool  # the first `# noqa` of those lines: flake8 applies only that one


def directives(lines: Sequence[str]) -> List[Directive]:
    """Every `# noqa` comment of a file (a comment's first one; `# noqa` inside a string is no
    comment); none when the text does not tokenize."""
    if not any("noqa" in line.lower() for line in lines):
        return []
    found: List[Directive] = []
    try:
        for first, last, comments in _line_groups(lines):
            if not any("noqa" in tok.string.lower() for tok in comments):
                continue
            joined = "".join(lines[first - 1:last])
            applied = NOQA_INLINE_REGEXP.search(joined)
            for tok in comments:
                match = NOQA_INLINE_REGEXP.search(tok.string)
                if match is None:
                    continue
                line, col = tok.start
                offset = sum(len(text) for text in lines[first - 1:line - 1]) + col + match.start()
                codes = match.group("codes")
                listed = tuple(codes.replace(",", " ").split()) if codes else ()
                found.append(Directive(line, col + match.start(), col + match.end(), listed,
                                       col + (match.start("codes") if codes else match.end()), col, tok.string,
                                       (first, last), applied is not None and applied.start() == offset))
    except (tokenize.TokenError, SyntaxError):
        return []
    return found


def _covered(code: str, known: Collection[str]) -> List[str]:
    """The codes a `# noqa` code suppresses (flake8 matches by prefix)."""
    return [k for k in known if k.startswith(code)]


# a code that looks like one of ours, in a `# noqa` comment (the fast test before tokenizing)
_OUR_CODE = re.compile(r"#\s*noqa\s*:[^\r\n]*\b" + OUR_PREFIX + r"\d", re.IGNORECASE)


def unknown_codes(lines: Sequence[str], known: Collection[str]) -> List[Tuple[int, Tuple[str, ...]]]:
    """(line, codes) of each `# noqa` comment that lists XLA codes no rule has (nor is a prefix of one's)."""
    if _OUR_CODE.search("".join(lines)) is None:
        return []
    every = tuple(known) + OTHER_CODES
    out = []
    for directive in directives(lines):
        unknown = tuple(c for c in directive.codes if c.startswith(OUR_PREFIX) and not _covered(c, every))
        if unknown:
            out.append((directive.line, unknown))
    return out


def unused_codes(lines: Sequence[str], diagnostics: Iterable[Diagnostic], judged: Callable[[str], bool]
                 ) -> List[Tuple[Directive, Tuple[str, ...]]]:
    """Each `# noqa` comment with the codes it lists that ``judged`` accepts and that suppress none of
    ``diagnostics`` (a comment that is not the first `# noqa` of its lines suppresses nothing)."""
    candidates = [d for d in directives(lines) if any(judged(code) for code in d.codes)]
    if not candidates:
        return []
    by_line: Dict[int, List[str]] = {}
    for diagnostic in diagnostics:
        by_line.setdefault(diagnostic.line, []).append(diagnostic.code)
    out = []
    for directive in candidates:
        found = [code for line in range(directive.covers[0], directive.covers[1] + 1)
                 for code in by_line.get(line, ())] if directive.effective else []
        unused = tuple(c for c in directive.codes if judged(c) and not any(f.startswith(c) for f in found))
        if unused:
            out.append((directive, unused))
    return out
