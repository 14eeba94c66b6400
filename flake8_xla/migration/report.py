"""``flake8-xla migrate-report``: the XLA5xx findings of a tree summed up per file and per API, as text
or JSON. The findings come from the ordinary check run; each message starts with the API as written
and ON_TORCHTPU, and a rewrite that needs a human says so (tests/test_migration.py holds the rules to it)."""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Dict, Iterable, List, NamedTuple, Sequence, Tuple

ON_TORCHTPU = " on TorchTPU: "
ENV_PREFIX = "environment variable "
ENV_SUFFIX = " has no effect on TorchTPU: "
MECHANICAL, MANUAL = "mechanical", "needs a human"
_HUMAN = "; needs a human"


class Use(NamedTuple):
    api: str  # as written: "xm.mark_step()", "environment variable PJRT_DEVICE"
    rewrite: str  # MECHANICAL or MANUAL
    advice: str  # what it becomes (and, for MANUAL, what a human decides)
    line: int
    fixable: bool


def parse(message: str, line: int, fixable: bool) -> Use:
    """One XLA5xx diagnostic as a use: a human's rewrite says "; needs a human" (every XLA5xx message
    does when it is one); an unexpected message is kept whole as its own API."""
    if message.startswith(ENV_PREFIX) and ENV_SUFFIX in message:
        name, advice = message[len(ENV_PREFIX):].split(ENV_SUFFIX, 1)
        api = ENV_PREFIX + name
    elif ON_TORCHTPU in message:
        api, advice = message.split(ON_TORCHTPU, 1)
    else:
        api, advice = message, ""
    return Use(api, MANUAL if _HUMAN in advice else MECHANICAL, advice, line, fixable)


class FileReport(NamedTuple):
    path: str
    uses: Tuple[Use, ...]

    def count(self, rewrite: str) -> int:
        return sum(1 for u in self.uses if u.rewrite == rewrite)

    def grouped(self) -> List[Tuple[Tuple[str, str, str], List[Use]]]:
        """Uses of the same API with the same advice together, mechanical ones first, in line order."""
        groups: Dict[Tuple[str, str, str], List[Use]] = OrderedDict()
        for use in sorted(self.uses, key=lambda u: (u.rewrite != MECHANICAL, u.line)):
            groups.setdefault((use.rewrite, use.api, use.advice), []).append(use)
        return list(groups.items())


def build(findings: Iterable, files_linted: int) -> Tuple[List[FileReport], int]:
    """Per-file reports from check findings (``output.formats.Finding``) of the XLA5xx codes."""
    by_path: Dict[str, List[Use]] = OrderedDict()
    for f in findings:
        d = f.diagnostic
        if d.code.startswith("XLA5"):
            by_path.setdefault(f.path, []).append(parse(d.message, d.line, f.fixable))
    return [FileReport(path, tuple(uses)) for path, uses in by_path.items()], files_linted


def _lines(uses: Sequence[Use]) -> str:
    numbers = ", ".join(str(u.line) for u in uses)
    return f"line {numbers}" if len(uses) == 1 else f"lines {numbers}"


def render_text(reports: Sequence[FileReport], files_linted: int) -> str:
    out: List[str] = []
    for report in reports:
        mechanical, manual = report.count(MECHANICAL), report.count(MANUAL)
        fixable = sum(1 for u in report.uses if u.fixable)
        out.append(f"{report.path}: {len(report.uses)} to migrate: {mechanical} mechanical ({fixable} fixable), "
                   f"{manual} {'needs' if manual == 1 else 'need'} a human")
        for (rewrite, api, advice), uses in report.grouped():
            out.append(f"  {rewrite:<13}  {api} x{len(uses)} ({_lines(uses)}): {advice}")
    totals = _totals(reports)
    out.append(f"{files_linted} file{'s' if files_linted != 1 else ''} checked, {len(reports)} with torch_xla uses: "
               f"{totals['mechanical']} mechanical ({totals['fixable']} fixable with "
               f"`flake8-xla fix --migrate-to torchtpu`), {totals['manual']} "
               f"{'needs' if totals['manual'] == 1 else 'need'} a human")
    return "\n".join(out) + "\n"


def _totals(reports: Sequence[FileReport]) -> Dict[str, int]:
    uses = [u for r in reports for u in r.uses]
    return {"mechanical": sum(1 for u in uses if u.rewrite == MECHANICAL),
            "manual": sum(1 for u in uses if u.rewrite == MANUAL), "fixable": sum(1 for u in uses if u.fixable)}


def render_json(reports: Sequence[FileReport], files_linted: int) -> str:
    by_api: Dict[Tuple[str, str], int] = OrderedDict()
    for report in reports:
        for use in report.uses:
            by_api[(use.api, use.rewrite)] = by_api.get((use.api, use.rewrite), 0) + 1
    data = {
        "migrate_to": "torchtpu",
        "files": [{
            "path": r.path, "mechanical": r.count(MECHANICAL), "manual": r.count(MANUAL),
            "fixable": sum(1 for u in r.uses if u.fixable),
            "uses": [{"api": api, "rewrite": "mechanical" if rewrite == MECHANICAL else "manual", "advice": advice,
                      "lines": [u.line for u in uses], "fixable": sum(1 for u in uses if u.fixable)}
                     for (rewrite, api, advice), uses in r.grouped()],
        } for r in reports],
        "totals": {"files_checked": files_linted, "files_with_uses": len(reports), **_totals(reports),
                   "by_api": [{"api": api, "rewrite": "mechanical" if rewrite == MECHANICAL else "manual",
                               "count": count}
                              for (api, rewrite), count in sorted(by_api.items(), key=lambda kv: (-kv[1], kv[0]))]},
    }
    return json.dumps(data, indent=2) + "\n"
