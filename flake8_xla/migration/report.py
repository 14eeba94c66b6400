"""``flake8-xla migrate-report``: the XLA5xx findings of a tree summed up per file and per API, as text,
JSON or Markdown (a pull request's description), with what ``fix --migrate-to torchtpu`` leaves in each
file. The findings come from the ordinary check run; each XLA5xx diagnostic carries its use as
:class:`~flake8_xla.migration.facts.MigrationFacts` (``Diagnostic.data``): the report reads no message."""
from __future__ import annotations

import difflib
import json
from collections import Counter, OrderedDict
from typing import Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..fixing.lines import split_lines
from ..rule import Diagnostic
from .facts import CHECK, MANUAL, MECHANICAL, MigrationFacts

ENV_PREFIX = "environment variable "
# uses of the names a torch_xla import binds: while one remains, so does the import. XLA503 is an environment
# variable, XLA504 a library's test or a probe, XLA511-513 TorchTPU's own code.
_TORCH_XLA_CODES = frozenset({"XLA501", "XLA502"})
_LABELS = {MECHANICAL: "mechanical", MANUAL: "needs a human", CHECK: "availability"}  # text: 13 wide at most
_JSON_NAMES = {MECHANICAL: "mechanical", MANUAL: "manual", CHECK: "availability check"}


class Use(NamedTuple):
    code: str
    api: str  # as written: "xm.mark_step()", "environment variable PJRT_DEVICE"
    rewrite: str  # MECHANICAL, MANUAL or CHECK
    advice: str  # what it becomes (and, for a human's rewrite, what a human decides)
    line: int  # in a notebook: within its cell
    fixable: bool
    new: bool = False  # after the fix only: the fix uncovers it (an import its rewrites leave unused)
    cell: Optional[int] = None  # a notebook's

    @property
    def keeps_torch_xla(self) -> bool:
        # an import (an availability probe in try too), or a use of a name one binds; an argument's use
        # (`backend="openxla" of torch.compile()`) names none
        return self.api.startswith("import of ") or self.code in _TORCH_XLA_CODES and " of " not in self.api


def use_of(d: Diagnostic, fixable: bool, cell: Optional[int] = None) -> Use:
    """One XLA5xx diagnostic as a use, from the facts it carries; one without them (no XLA5xx rule makes
    such a diagnostic) is kept whole as its own API, for a human."""
    facts = d.data if isinstance(d.data, MigrationFacts) else MigrationFacts(d.message, MANUAL, d.help or "")
    return Use(d.code, facts.api, facts.rewrite, facts.advice, d.line, fixable, cell=cell)


class FileReport(NamedTuple):
    path: str
    uses: Tuple[Use, ...]
    remaining: Tuple[Use, ...]  # what `fix` leaves, at the lines of the file as it is now

    def count(self, rewrite: str) -> int:
        return sum(1 for u in self.uses if u.rewrite == rewrite)

    @property
    def fixable(self) -> int:
        return sum(1 for u in self.uses if u.fixable)

    @property
    def keeps_torch_xla(self) -> bool:
        return any(u.keeps_torch_xla for u in self.remaining)

    def grouped(self) -> List[Tuple[Tuple[str, str, str], List[Use]]]:
        """Uses of the same API with the same advice together, mechanical ones first, in line order."""
        return _grouped(sorted(self.uses, key=lambda u: (u.rewrite != MECHANICAL, u.rewrite == CHECK, _place(u))),
                        lambda u: (u.rewrite, u.api, u.advice))

    def remaining_grouped(self) -> List[Tuple[Tuple[str, bool], List[Use]]]:
        return _grouped(sorted(self.remaining, key=_place), lambda u: (u.api, u.new))


def _grouped(uses: Iterable[Use], key: Callable) -> list:
    groups: Dict[tuple, List[Use]] = OrderedDict()
    for use in uses:
        groups.setdefault(key(use), []).append(use)
    return list(groups.items())


def build(findings: Iterable, files_linted: int, after: Optional[Mapping[str, Sequence]] = None
          ) -> Tuple[List[FileReport], int]:
    """Per-file reports from check findings (``output.formats.Finding``) of the XLA5xx codes. ``after``:
    per path, the XLA5xx findings the fix leaves (see :func:`moved_back`); a file missing from it is one
    no fix changes, so its unfixable uses are what remains."""
    by_path: Dict[str, List[Use]] = OrderedDict()
    for f in findings:
        d = f.diagnostic
        if d.code.startswith("XLA5"):
            by_path.setdefault(f.path, []).append(use_of(d, f.fixable, f.cell))
    reports = []
    for path, uses in by_path.items():
        if after is None or path not in after:
            remaining = [u for u in uses if not u.fixable]
        else:
            known = Counter((u.code, u.api, u.advice) for u in uses)
            remaining = []
            for f in after[path]:
                use = use_of(f.diagnostic, False, f.cell)
                key = (use.code, use.api, use.advice)
                new = not known[key]
                known[key] -= 0 if new else 1
                remaining.append(use._replace(new=new))
        reports.append(FileReport(path, tuple(uses), tuple(remaining)))
    return reports, files_linted


def moved_back(before: str, after: str, findings: Iterable, cell_source: Callable[[str, int], str]) -> List:
    """The ``findings`` of the fixed text ``after`` at the lines of ``before``, the file as it is now (a
    line the fix changed: where its change starts), so that every line the report names is one the user
    can open. A notebook's lines are its cell's: ``cell_source(text, cell)``."""
    maps: Dict[Optional[int], List[Tuple[str, int, int, int, int]]] = {}
    out = []
    for f in findings:
        cell = f.cell
        if cell not in maps:
            old, new = (before, after) if cell is None else (cell_source(before, cell), cell_source(after, cell))
            maps[cell] = difflib.SequenceMatcher(None, split_lines(old), split_lines(new), False).get_opcodes()
        at = f.diagnostic.line - 1
        line = next((i1 + (at - j1 if tag == "equal" else min(at - j1, max(i2 - i1 - 1, 0)))
                     for tag, i1, i2, j1, j2 in maps[cell] if j1 <= at < j2), at) + 1
        out.append(f._replace(diagnostic=f.diagnostic._replace(line=line)))
    return out


# --- rendering ----------------------------------------------------------------------------------------

def _place(use: Use) -> Tuple[int, int]:
    return use.cell or 0, use.line


def _at(use: Use) -> str:
    """A use's line, ``cell 3:2`` in a notebook (ruff's form)."""
    return f"cell {use.cell}:{use.line}" if use.cell is not None else str(use.line)


def _lines(uses: Sequence[Use]) -> str:
    numbers = ", ".join(_at(u) for u in uses)
    return numbers if uses[0].cell is not None else f"line {numbers}" if len(uses) == 1 else f"lines {numbers}"


def _plural(n: int, word: str, words: str = "") -> str:
    return f"{n} {word if n == 1 else words or word + 's'}"


def _kinds(counts: Mapping[str, Tuple[int, int]], fixable: bool = True) -> str:
    """"4 mechanical (3 fixable), 3 need a human[, 2 availability checks]": with ``fixable``, a kind's
    fixable count when it is the mechanical one or has some."""
    parts = []
    for rewrite, word, words in ((MECHANICAL, "mechanical", "mechanical"), (MANUAL, "needs a human", "need a human"),
                                 (CHECK, "availability check", "")):
        n, fixed = counts[rewrite]
        if n or rewrite != CHECK:
            shown = fixable and (rewrite == MECHANICAL or fixed)
            parts.append(_plural(n, word, words) + (f" ({fixed} fixable)" if shown else ""))
    return ", ".join(parts)


def _remain(n: int) -> str:
    return f"{n} {'remains' if n == 1 else 'remain'}"


def _left(report: FileReport) -> str:
    """What the fix leaves in a file that it does not finish: "4 remain, torch_xla still imported"."""
    return _remain(len(report.remaining)) + (", torch_xla still imported" if report.keeps_torch_xla else "")


def _remaining(report: FileReport) -> str:
    return ", ".join(f"{api} ({_lines(uses)}{', uncovered by the fix' if new else ''})" for (api, new), uses in
                     report.remaining_grouped())


class Totals(NamedTuple):
    kinds: Dict[str, Tuple[int, int]]  # _counts()
    fixable: int
    unsafe: int  # fixable with --unsafe-fixes only
    done: int  # files with nothing left after the fix
    remaining: int
    new: int


def _counts(uses: Sequence[Use]) -> Dict[str, Tuple[int, int]]:
    """rewrite -> (uses, fixable ones)."""
    counts = {rewrite: (0, 0) for rewrite in (MECHANICAL, MANUAL, CHECK)}
    for u in uses:
        n, fixable = counts[u.rewrite]
        counts[u.rewrite] = (n + 1, fixable + u.fixable)
    return counts


def totals(reports: Sequence[FileReport], unsafe: int = 0) -> Totals:
    uses = [u for r in reports for u in r.uses]
    left = [u for r in reports for u in r.remaining]
    return Totals(_counts(uses), sum(1 for u in uses if u.fixable), unsafe, sum(1 for r in reports if not r.remaining),
                  len(left), sum(1 for u in left if u.new))


def _summary(t: Totals, command: str, files: int) -> str:
    """What the totals line and the Markdown summary share: the kinds, what the fix fixes (what its
    "Fixed N issues" says) and what it leaves (what it says needs a human, is declined or needs
    --unsafe-fixes)."""
    unsafe = f" ({t.unsafe} more with --unsafe-fixes)" if t.unsafe else ""
    left = f"{_plural(t.remaining, 'use')} {'remains' if t.remaining == 1 else 'remain'}" if t.remaining \
        else "nothing remains"
    new = f" ({t.new} uncovered by the fix)" if t.new else ""
    return (f"{_kinds(t.kinds, fixable=False)}; {t.fixable} fixable with `{command}`{unsafe}; "
            f"after fix: {t.done} of {_plural(files, 'file')} done, {left}{new}")


def render_text(reports: Sequence[FileReport], files_linted: int, command: str, unsafe: int = 0) -> str:
    out: List[str] = []
    for report in reports:
        after = f"after fix: {_left(report)}" if report.remaining else "done after fix"
        out.append(f"{report.path}: {len(report.uses)} to migrate: {_kinds(_counts(report.uses))}; {after}")
        for (rewrite, api, advice), uses in report.grouped():
            out.append(f"  {_LABELS[rewrite]:<13}  {api} x{len(uses)} ({_lines(uses)}): {advice}")
        if report.remaining:
            out.append(f"  {'after fix':<13}  {_remaining(report)}")
    out.append(f"{_plural(files_linted, 'file')} checked, {len(reports)} with torch_xla uses: "
               f"{_summary(totals(reports, unsafe), command, len(reports))}")
    return "\n".join(out) + "\n"


def render_json(reports: Sequence[FileReport], files_linted: int, command: str, unsafe: int = 0) -> str:
    by_api: Dict[Tuple[str, str], int] = OrderedDict()
    for report in reports:
        for use in report.uses:
            by_api[(use.api, use.rewrite)] = by_api.get((use.api, use.rewrite), 0) + 1
    t = totals(reports, unsafe)
    data = {
        "migrate_to": "torchtpu",
        "fix_command": command,
        "files": [{
            "path": r.path, "mechanical": r.count(MECHANICAL), "manual": r.count(MANUAL),
            "availability_checks": r.count(CHECK), "fixable": r.fixable,
            "uses": [{"api": api, "code": uses[0].code, "rewrite": _JSON_NAMES[rewrite], "advice": advice,
                      **_lines_json(uses), "fixable": sum(1 for u in uses if u.fixable)}
                     for (rewrite, api, advice), uses in r.grouped()],
            "done_after_fix": not r.remaining,
            "torch_xla_after_fix": r.keeps_torch_xla,
            "remaining_after_fix": [{"api": api, "code": uses[0].code, "advice": uses[0].advice,
                                     **_lines_json(uses), "new": new}
                                    for (api, new), uses in r.remaining_grouped()],
        } for r in reports],
        "totals": {"files_checked": files_linted, "files_with_uses": len(reports),
                   "mechanical": t.kinds[MECHANICAL][0], "manual": t.kinds[MANUAL][0],
                   "availability_checks": t.kinds[CHECK][0], "fixable": t.fixable, "unsafe_fixable": t.unsafe,
                   "files_done_after_fix": t.done, "remaining_after_fix": t.remaining, "new_after_fix": t.new,
                   "by_api": [{"api": api, "rewrite": _JSON_NAMES[rewrite], "count": count}
                              for (api, rewrite), count in sorted(by_api.items(), key=lambda kv: (-kv[1], kv[0]))]},
    }
    return json.dumps(data, indent=2) + "\n"


def _lines_json(uses: Sequence[Use]) -> Dict[str, list]:
    """"lines", and in a notebook "cells" beside them (each line is within its cell)."""
    lines = {"lines": [u.line for u in uses]}
    return lines if uses[0].cell is None else {**lines, "cells": [u.cell for u in uses]}


def _code(api: str) -> str:
    """The API with its code in backticks: `xm.mark_step()`, environment variable `PJRT_DEVICE`,
    import of `torch_xla`, `backend="openxla"` of `torch.compile()`."""
    for prefix in (ENV_PREFIX, "import of "):
        if api.startswith(prefix):
            module, in_try = api[len(prefix):], api.endswith(" in try")  # XLA504's guard: import of M in try
            return f"{prefix}`{module[:-len(' in try')] if in_try else module}`{' in try' if in_try else ''}"
    if " of " in api:
        argument, call = api.split(" of ", 1)
        return f"`{argument}` of `{call}`"
    return f"`{api}`"


def render_markdown(reports: Sequence[FileReport], files_linted: int, command: str, unsafe: int = 0) -> str:
    """A pull request's description: the totals, a table of the files, and what is left for a human
    after the fix as a checklist."""
    t = totals(reports, unsafe)
    out = ["## Moving from torch_xla to TorchTPU", ""]
    uses = sum(len(r.uses) for r in reports)
    if not reports:
        return "\n".join(out + [f"No torch_xla uses in {_plural(files_linted, 'file')} checked.", ""])
    out += [f"{_plural(uses, 'torch_xla use')} in {len(reports)} of {_plural(files_linted, 'file')} checked: "
            f"{_summary(t, command, len(reports))}.", ""]
    checks = t.kinds[CHECK][0] > 0  # a column only for a tree that has them
    out += ["| File | Uses | Mechanical | Fixable | Needs a human |" + (" Availability checks |" if checks else "")
            + " Done after fix |",
            "|---|--:|--:|--:|--:|" + ("--:|" if checks else "") + "---|"]
    for r in reports:
        path = r.path.replace("|", "\\|")  # a table cell's end, even in backticks
        out.append(f"| `{path}` | {len(r.uses)} | {r.count(MECHANICAL)} | {r.fixable} | {r.count(MANUAL)} |"
                   + (f" {r.count(CHECK)} |" if checks else "") + f" {f'no: {_left(r)}' if r.remaining else 'yes'} |")
    left = [(r.path, u) for r in reports for u in sorted(r.remaining, key=_place)]
    if left:
        out += ["", f"### Left for a human after `{command}`", ""]
        out += [f"- [ ] `{path}:{_at(u)}` {_code(u.api)}{' (uncovered by the fix)' if u.new else ''} — {u.advice}"
                for path, u in left]
    return "\n".join(out) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown}
