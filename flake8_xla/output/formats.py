"""Output formats of the standalone CLI: text, json, sarif, github.

Every format renders the same :class:`Finding` records; the flake8 report formatters
(:mod:`flake8_xla.output.flake8_formats`) build Findings from flake8's errors and reuse these renderers.
"""
from __future__ import annotations

import functools
import json
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence

from .. import __version__
from ..engine import all_rules
from ..rule import Diagnostic

HOME_URL = "https://github.com/flake8-xla/flake8-xla"
DOCS_URL = HOME_URL + "/blob/main/docs/rules/{code}.md"
FIXABLE_MARKER = "[*]"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
SARIF_SRCROOT = "%SRCROOT%"


class Finding(NamedTuple):
    """One diagnostic located in one file, as a front-end reports it."""

    path: str  # as shown to the user (relative to the working directory when possible)
    diagnostic: Diagnostic  # line 1-based, col 0-based characters (in a notebook: within the cell)
    fixable: bool = False  # `flake8-xla fix` can fix it (with --unsafe-fixes when not safe)
    cell: Optional[int] = None  # notebooks: the cell's 1-based position among all cells
    file_line: Optional[int] = None  # notebooks: the line of the .ipynb text holding the code line
    source_line: Optional[str] = None  # the physical line the diagnostic is on (--show-source), if known

    @property
    def location(self) -> str:
        """``path:line:col``, or ``nb.ipynb:cell 3:2:5`` in a notebook (ruff's notebook form)."""
        d = self.diagnostic
        cell = f":cell {self.cell}" if self.cell is not None else ""
        return f"{self.path}{cell}:{d.line}:{d.col + 1}"


def docs_url(code: str) -> str:
    return DOCS_URL.format(code=code)


@functools.lru_cache(maxsize=None)
def _documented_codes() -> FrozenSet[str]:
    return frozenset(rule.code for rule in all_rules())


def _code_url(code: str) -> Optional[str]:
    # Only engine rules have a docs page: XLA000 (internal error) and other plugins' codes get no link.
    return docs_url(code) if code in _documented_codes() else None


# Codes that say the file could not be read or parsed at all, so no other diagnostic could be
# checked: the formats that have levels (github, sarif) report them as errors, the rest as warnings.
ERROR_CODES: FrozenSet[str] = frozenset({"E901", "E902", "E999"})

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
    the column (flake8's --show-source). ``color``: ANSI colours for the path, the separators, the
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
    return "".join(lines)


def render_json(findings: Sequence[Finding]) -> str:
    records = []
    for f in findings:
        record = {"filename": f.path}
        if f.cell is not None:  # notebooks: line and column are within this cell
            record["cell"] = f.cell
        record.update(line=f.diagnostic.line, column=f.diagnostic.col + 1, code=f.diagnostic.code,
                      message=f.diagnostic.message, fixable=f.fixable, url=_code_url(f.diagnostic.code))
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
        "defaultConfiguration": {"level": "warning"},
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


def _sarif_result(finding: Finding, rule_index: int) -> dict:
    d = finding.diagnostic
    location: dict = {"artifactLocation": _artifact_location(finding.path)}
    properties: dict = {"fixable": finding.fixable}
    if finding.cell is not None:
        # a notebook: the region is the line of the .ipynb text (viewers show the JSON file); the
        # cell and the line and column within it are properties
        location["region"] = {"startLine": finding.file_line or 1}
        properties.update(cell=finding.cell, cellLine=d.line, cellColumn=d.col + 1)
    elif d.line >= 1:  # flake8 reports some file-level errors (E902) on line 0, which SARIF cannot express
        location["region"] = {"startLine": d.line, "startColumn": max(d.col, 0) + 1}
    return {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": "error" if d.code in ERROR_CODES else "warning",
        "message": {"text": d.message},
        "locations": [{"physicalLocation": location}],
        "properties": properties,
    }


def render_sarif(findings: Sequence[Finding]) -> str:
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
                "results": [_sarif_result(f, index[f.diagnostic.code]) for f in findings],
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
        command = "error" if d.code in ERROR_CODES else "warning"
        lines.append(f"::{command} {','.join(properties)}::{_escape_data(f'{d.code} {where}{d.message}')}\n")
    return "".join(lines)


RENDERERS: Dict[str, Callable[[Sequence[Finding]], str]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
}

__all__ = ["DOCS_URL", "ERROR_CODES", "FIXABLE_MARKER", "Finding", "HOME_URL", "RENDERERS", "docs_url", "render_github",
           "render_json", "render_sarif", "render_text", "__version__"]
