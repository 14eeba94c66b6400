"""Output formats of the standalone CLI: text (concise, full), json, sarif, github.

Every format renders the same :class:`Finding` records; the flake8 report formatters
(:mod:`flake8_xla.plugin.formatters`) build Findings from flake8's errors and reuse these renderers.
"""
from __future__ import annotations

import functools
import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

from .. import __version__
from ..fixing.lines import LineModel, split_lines
from ..rule import Diagnostic, Level

if TYPE_CHECKING:  # annotations: the text report of cached findings loads neither the fix engine nor a rule
    from ..fixing import Fix, FixSite

HOME_URL = "https://github.com/flake8-xla/flake8-xla"
DOCS_URL = HOME_URL + "/blob/main/docs/rules/{code}.md"
FIXABLE_MARKER = "[*]"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
SARIF_SRCROOT = "%SRCROOT%"
# Python's line model (flake8_xla.fixing.lines): a lone \r ends a line too, which SARIF's default omits
SARIF_NEWLINES = ["\r\n", "\r", "\n"]


class Replacement(NamedTuple):
    """Text that replaces a region of the file as it was read: 1-based lines, 0-based character
    columns, the end just past the region (an insertion when it equals the start)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


class SuggestedFix(NamedTuple):
    """One diagnostic's fix as the file's changes: what `flake8-xla fix` writes when it is the only one."""

    title: str
    replacements: Tuple[Replacement, ...]


class Finding(NamedTuple):
    """One diagnostic located in one file, as a front-end reports it."""

    path: str  # as shown to the user (relative to the working directory when possible)
    diagnostic: Diagnostic  # line 1-based, col 0-based characters (in a notebook: within the cell)
    unsafe_fixes: bool = False  # the run counts an unsafe fix as one `fix` makes (--unsafe-fixes)
    cell: Optional[int] = None  # notebooks: the cell's 1-based position among all cells
    file_line: Optional[int] = None  # notebooks: the line of the .ipynb text holding the code line
    source_line: Optional[str] = None  # the physical line the diagnostic is on (--show-source), if known
    fix: Optional[SuggestedFix] = None  # its fix's edits, when asked for (SARIF) and `fixable`

    @property
    def fixable(self) -> bool:
        """`flake8-xla fix` fixes it: its fix is safe, or unsafe and the run takes unsafe fixes."""
        applicability = self.diagnostic.applicability
        return applicability == "safe" or (applicability == "unsafe" and self.unsafe_fixes)

    @property
    def location(self) -> str:
        """``path:line:col``, or ``nb.ipynb:cell 3:2:5`` in a notebook (ruff's notebook form)."""
        d = self.diagnostic
        cell = f":cell {self.cell}" if self.cell is not None else ""
        return f"{self.path}{cell}:{d.line}:{d.col + 1}"


def docs_url(code: str) -> str:
    return DOCS_URL.format(code=code)


@functools.lru_cache(maxsize=None)
def _rule_levels() -> Dict[str, Level]:
    from ..engine import all_rules

    return {rule.code: rule.level for rule in all_rules()}


def _code_url(code: str) -> Optional[str]:
    # Only engine rules have a docs page: XLA000 (internal error) and other plugins' codes get no link.
    return docs_url(code) if code in _rule_levels() else None


# Codes that say the file could not be read, parsed or checked at all (XLA000: a bug of ours stopped
# its checks), so no other diagnostic could be checked: errors, whatever else is reported.
ERROR_CODES: FrozenSet[str] = frozenset({"E901", "E902", "E999", "XLA000"})


def level_of(d: Diagnostic) -> Level:
    """The diagnostic's own level, else its rule's; another plugin's code is a warning. Every front-end
    (text, JSON, SARIF, GitHub, the editor) reports this one level."""
    if d.level is not None:
        return d.level
    return "error" if d.code in ERROR_CODES else _rule_levels().get(d.code, "warning")


# --------------------------------------------------------------------------------------------
# A fix as replacements of the file as read

def suggested_fix(source: str, site: FixSite, code: str, fix: Fix) -> Optional[SuggestedFix]:
    """``fix`` applied alone, by the loop `flake8-xla fix` runs (with the imports it adds and those it
    leaves unused), as replacements of ``source``; None when it would not parse. Costs two parses
    of the file: asked for only by the formats that show fixes."""
    from ..fixing import fix_to_fixpoint

    outcome = fix_to_fixpoint(source, lambda current, tree: (site, [(code, fix)] if current == source else []))
    if not outcome.fixed:
        return None
    return SuggestedFix(fix.title, replacements(source, outcome.source))


_WORD_CHAR = re.compile(r"\w")


def replacements(before: str, after: str) -> Tuple[Replacement, ...]:
    """The changed regions between two texts: lines that differ, narrowed to the words that do
    (``xm.xrt_world_size`` -> ``xr.world_size``, not ``m.xrt_`` -> ``r.``)."""
    import difflib  # fixes only

    old, new = split_lines(before), split_lines(after)
    model = LineModel(before)
    new_starts = LineModel(after).starts
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        start, end = model.starts[i1], model.starts[i2]
        new_start, new_end = new_starts[j1], new_starts[j2]
        prefix = _common_words(before, after, start, end, new_start, new_end, 1)
        suffix = _common_words(before, after, end, start + prefix, new_end, new_start + prefix, -1)
        start, end, text = start + prefix, end - suffix, after[new_start + prefix:new_end - suffix]
        line, end_line = model.lineno(start), model.lineno(end)
        out.append(Replacement(line, start - model.starts[line - 1], end_line, end - model.starts[end_line - 1], text))
    return tuple(out)


def _common_words(a: str, b: str, i: int, i_stop: int, j: int, j_stop: int, step: int) -> int:
    """How many characters the changed regions ``a[i:i_stop]`` and ``b[j:j_stop]`` share at their
    start (``step`` 1) or, from ``i`` and ``j`` backwards, at their end (-1), without cutting a word."""
    def at(text: str, k: int, stop: int) -> str:  # a character of the region, "" past it
        return text[k] if (k < stop if step > 0 else k >= stop) else ""

    def pos(k: int, n: int) -> int:  # the n-th character from the region's boundary
        return k + n if step > 0 else k - n - 1

    def word(c: str) -> bool:
        return bool(c) and _WORD_CHAR.match(c) is not None

    n = 0
    while at(a, pos(i, n), i_stop) and at(a, pos(i, n), i_stop) == at(b, pos(j, n), j_stop):
        n += 1
    # a word that goes on into the change on either side goes to the change whole
    while n and word(a[pos(i, n - 1)]) and (word(at(a, pos(i, n), i_stop)) or word(at(b, pos(j, n), j_stop))):
        n -= 1
    return n


# ANSI SGR sequences for --color (the text format only)
_BOLD, _RED, _CYAN, _RESET = "\033[1m", "\033[31m", "\033[36m", "\033[0m"


def _colored_location(f: Finding) -> str:
    d = f.diagnostic
    sep = f"{_CYAN}:{_RESET}"
    cell = f"{sep}cell {f.cell}" if f.cell is not None else ""
    return f"{_BOLD}{f.path}{_RESET}{cell}{sep}{d.line}{sep}{d.col + 1}{sep}"


def _caret_lines(source_line: str, col: int) -> str:
    """The source line and a caret under column ``col`` (0-based characters, as flake8 counts).

    Every character left of the column becomes a space, except whitespace, which is copied: a tab
    stays a tab, so the caret lines up however wide the terminal draws tabs."""
    line = source_line.rstrip("\r\n")
    pad = "".join(c if c.isspace() else " " for c in line[:max(col, 0)])
    return f"{line}\n{pad}^\n"


def render_text(findings: Sequence[Finding], *, show_source: bool = False, color: bool = False) -> str:
    """``path:line:col: CODE [*] message`` per finding.

    ``show_source``: after each finding that knows its ``source_line``, that line and a caret under
    the column (flake8's --show-source), then its help (ruff's ``= help:`` line). ``color``: ANSI colours for the path, the separators, the
    code and the fix marker (flake8's and ruff's --color); the caller decides (TTY, NO_COLOR)."""
    lines = []
    for f in findings:
        d = f.diagnostic
        if color:
            marker = f" {_CYAN}{FIXABLE_MARKER}{_RESET}" if f.fixable else ""
            lines.append(f"{_colored_location(f)} {_BOLD}{_RED}{d.code}{_RESET}{marker} {d.message}\n")
        else:
            marker = f" {FIXABLE_MARKER}" if f.fixable else ""
            lines.append(f"{f.location}: {d.code}{marker} {d.message}\n")
        if show_source and f.source_line is not None:
            lines.append(_caret_lines(f.source_line, d.col))
        if show_source and d.help:
            lines.append(f"  = help: {d.help}\n")
    return "".join(lines)


def render_concise(findings: Sequence[Finding], *, color: bool = False) -> str:
    """One line per finding, never a source line (ruff's ``--output-format concise``)."""
    return render_text(findings, color=color)


def render_full(findings: Sequence[Finding], *, color: bool = False) -> str:
    """The text format with each finding's source line, a caret and its help (ruff's ``full``; --show-source).
    Findings carry their line only when the run kept it (the check job's ``show_source``)."""
    return render_text(findings, show_source=True, color=color)


def render_json(findings: Sequence[Finding]) -> str:
    records = []
    for f in findings:
        record = {"filename": f.path}
        if f.cell is not None:  # notebooks: line and column are within this cell
            record["cell"] = f.cell
        record.update(line=f.diagnostic.line, column=f.diagnostic.col + 1, code=f.diagnostic.code,
                      message=f.diagnostic.message, help=f.diagnostic.help, fixable=f.fixable,
                      url=_code_url(f.diagnostic.code),
                      severity=level_of(f.diagnostic))
        records.append(record)
    return json.dumps(records, indent=2) + "\n"


# --------------------------------------------------------------------------------------------
# SARIF 2.1.0

def _sarif_rule(rule) -> dict:
    url = docs_url(rule.code)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.what_it_does},
        "help": {
            "text": f"{rule.what_it_does}\n\nWhy is this bad? {rule.why_bad}\n\nSee {url}",
            "markdown": (f"**What it does**\n\n{rule.what_it_does}\n\n**Why is this bad?**\n\n{rule.why_bad}\n\n"
                         f"[{rule.code} documentation]({url})"),
        },
        "helpUri": url,
        "defaultConfiguration": {"level": rule.level},
    }


def _sarif_foreign_rule(code: str) -> dict:
    """A code reported next to ours (pycodestyle, pyflakes, XLA000) that the engine knows nothing about."""
    entry = {"id": code}
    url = _code_url(code)
    if url is not None:
        entry["helpUri"] = url
    return entry


def _artifact_location(path: str) -> dict:
    # SARIF wants URIs: absolute paths become file URIs, relative ones stay relative to the checkout root.
    import pathlib  # SARIF only: these two cost ~5 ms of every start
    import urllib.parse

    pure = pathlib.PurePath(path)
    if pure.is_absolute():
        return {"uri": pure.as_uri()}
    posix = pure.as_posix()
    while posix.startswith("./"):  # flake8 reports `./a.py` when given `.`; the root itself is the base
        posix = posix[2:]
    return {"uri": urllib.parse.quote(posix, safe="/"), "uriBaseId": SARIF_SRCROOT}


def _sarif_region(line: int, col: int, end_line: Optional[int], end_col: Optional[int]) -> dict:
    # SARIF columns are 1-based and the end column is the one just past the region (3.30.8)
    region = {"startLine": line, "startColumn": max(col, 0) + 1}
    if end_line is not None and end_col is not None and (end_line, end_col) >= (line, col):
        region.update(endLine=end_line, endColumn=end_col + 1)
    return region


def _sarif_fix(fix: SuggestedFix, artifact: dict) -> dict:
    changes = []
    for r in fix.replacements:
        change: dict = {"deletedRegion": _sarif_region(r.line, r.col, r.end_line, r.end_col)}
        if r.text:
            change["insertedContent"] = {"text": r.text}
        changes.append(change)
    return {"description": {"text": fix.title}, "artifactChanges": [{"artifactLocation": artifact,
                                                                    "replacements": changes}]}


# partialFingerprints key: "<16 hex digits>:<n>", the sha256 of the rule id, the artifact URI and the
# finding's source line with its indentation and line ending stripped, then the n-th (1-based) finding
# of that rule on an identical line of that file. Line numbers are not in it: code scanning follows a
# finding across commits that move its line (as GitHub's own primaryLocationLineHash does).
FINGERPRINT_KEY = "flake8XlaFindingHash/v1"


def _fingerprints(findings: Sequence[Finding]) -> List[str]:
    import hashlib  # SARIF only

    seen: Counter = Counter()
    out = []
    for f in findings:
        line = (f.source_line or "").strip()
        key = "\0".join((f.diagnostic.code, _artifact_location(f.path)["uri"], line))
        seen[key] += 1
        out.append(f"{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}:{seen[key]}")
    return out


def _sarif_result(finding: Finding, rule_index: int, fingerprint: str) -> dict:
    d = finding.diagnostic
    location: dict = {"artifactLocation": _artifact_location(finding.path)}
    properties: dict = {"fixable": finding.fixable}
    if d.help:  # the rule's help is on its entry; this finding's own detail rides with it
        properties["help"] = d.help
    if finding.cell is not None:
        # a notebook: the region is the line of the .ipynb text (viewers show the JSON file); the
        # cell and the line and column within it are properties
        location["region"] = {"startLine": finding.file_line or 1}
        properties.update(cell=finding.cell, cellLine=d.line, cellColumn=d.col + 1)
    elif d.line >= 1:  # flake8 reports some file-level errors (E902) on line 0, which SARIF cannot express
        location["region"] = _sarif_region(d.line, d.col, d.end_line, d.end_col)
    result = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": level_of(d),
        "message": {"text": d.message},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
        "properties": properties,
    }
    if finding.fix is not None and finding.fixable and finding.cell is None and finding.fix.replacements:
        result["fixes"] = [_sarif_fix(finding.fix, location["artifactLocation"])]
    return result


def render_sarif(findings: Sequence[Finding]) -> str:
    from ..engine import all_rules

    rules = {rule.code: _sarif_rule(rule) for rule in all_rules()}
    for f in findings:
        code = f.diagnostic.code
        if code not in rules:
            rules[code] = _sarif_foreign_rule(code)
    ordered: List[dict] = [rules[code] for code in sorted(rules)]
    index = {entry["id"]: i for i, entry in enumerate(ordered)}
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "flake8-xla",
                        "version": __version__,
                        "informationUri": HOME_URL,
                        "rules": ordered,
                    }
                },
                "results": [_sarif_result(f, index[f.diagnostic.code], fingerprint)
                            for f, fingerprint in zip(findings, _fingerprints(findings))],
                # required with results (3.14.27): columns count characters, as flake8's do
                "columnKind": "unicodeCodePoints",
                "newlineSequences": SARIF_NEWLINES,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


# --------------------------------------------------------------------------------------------
# GitHub Actions workflow commands

def _escape_data(text: str) -> str:
    # `%` first, so the escapes added next are not escaped again.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_GITHUB_COMMANDS: Dict[Level, str] = {"error": "error", "warning": "warning", "note": "notice"}


def render_github(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        d = f.diagnostic
        properties = [f"file={_escape_property(f.path)}"]
        if f.cell is not None:  # annotate the .ipynb line; say the cell in the message
            properties.append(f"line={f.file_line or 1}")
        elif d.line >= 1:
            properties += [f"line={d.line}", f"col={max(d.col, 0) + 1}"]
        properties.append(f"title={_escape_property(d.code)}")
        where = f"cell {f.cell}, line {d.line}, column {d.col + 1}: " if f.cell is not None else ""
        command = _GITHUB_COMMANDS[level_of(d)]
        lines.append(f"::{command} {','.join(properties)}::{_escape_data(f'{d.code} {where}{d.message}')}\n")
    return "".join(lines)


RENDERERS: Dict[str, Callable[[Sequence[Finding]], str]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
    "concise": render_concise,
    "full": render_full,
}
# the formats that render_text draws (they take color=)
TEXT_FORMATS: FrozenSet[str] = frozenset({"text", "concise", "full"})

__all__ = ["DOCS_URL", "ERROR_CODES", "FINGERPRINT_KEY", "FIXABLE_MARKER", "Finding", "HOME_URL", "RENDERERS",
           "Replacement", "SuggestedFix", "TEXT_FORMATS", "docs_url", "level_of", "render_concise", "render_full",
           "render_github", "render_json", "render_sarif", "render_text", "replacements", "suggested_fix",
           "__version__"]
