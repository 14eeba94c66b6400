"""`flake8-xla check --trace TRACE.json`: the linter's findings beside what a traced run saw
(``python -m xla_compat.trace --format json``).

A static graph finding at a line where the run saw an event, or that called the function where it did,
is confirmed; one at a line the run
executed in a full step without an event is marked as a likely false alarm; the run's warnings at
lines with no static finding are added, marked as seen only at run time (its notes, a throttled read or
a one-off after the loop, are not: the static rules leave those alone too). Lines the run never reached
say nothing either way."""
from __future__ import annotations

import json
import os
from typing import Dict, List, NamedTuple, Sequence, Set, Tuple

from ..output.formats import Finding
from ..rule import Diagnostic
from ..session.selection import CodeSelector
from .errors import UsageError
from ..output.terminal import display_name, printable

# the static rules whose findings a run can confirm or contradict: each says "this syncs every step"
GRAPH_CODES = frozenset({"XLA301", "XLA302", "XLA303", "XLA304", "XLA307"})
CONFIRMED = " [confirmed by the trace]"
RAN_CLEAN = " [the trace ran this line and saw no sync: likely a false alarm]"
RUN_ONLY = " [seen only by the trace]"

Place = Tuple[str, int]  # absolute path, line


class TraceEvidence(NamedTuple):
    events: Dict[Place, List[dict]]  # the trace's findings by place
    ran: Dict[str, Set[int]]  # absolute path -> lines that made a torch call in a step
    through: Dict[Place, List[dict]]  # the trace's findings by the project's call sites that reached them


class MergeCounts(NamedTuple):
    confirmed: int
    ran_clean: int
    run_only: int


def read_trace(path: str) -> TraceEvidence:
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except OSError as exc:
        raise UsageError(f"--trace: cannot read {printable(path)}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--trace: {printable(path)} is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("tool") != "xla_compat.trace" or document.get("format") != 1:
        raise UsageError(f"--trace: {printable(path)} is not a trace written by "
                         "`python -m xla_compat.trace --format json`")
    events: Dict[Place, List[dict]] = {}
    through: Dict[Place, List[dict]] = {}
    for record in document.get("findings", []):
        events.setdefault((os.path.normcase(record["path"]), int(record["line"])), []).append(record)
        for caller in _callers(record):
            through.setdefault(caller, []).append(record)
    ran = {os.path.normcase(p): set(lines) for p, lines in document.get("lines_ran", {}).items()}
    return TraceEvidence(events, ran, through)


def merge(findings: Sequence[Finding], evidence: TraceEvidence, checked: Sequence[str],
          selector: CodeSelector) -> Tuple[List[Finding], MergeCounts]:
    """``findings`` of the files ``checked`` (as given), annotated, plus the run-only findings in those files."""
    absolute = {display_name(p): os.path.normcase(os.path.abspath(p)) for p in checked}
    out: List[Finding] = []
    static_places: Set[Place] = set()
    confirmed = ran_clean = 0
    for finding in findings:
        path = absolute.get(finding.path) or os.path.normcase(os.path.abspath(finding.path))
        d = finding.diagnostic
        if d.code in GRAPH_CODES and finding.cell is None:
            place = (path, d.line)
            static_places.add(place)
            # the run saw it there, or in a function called from there (a helper that copies)
            if place in evidence.events or any(r["severity"] == "warning" for r in evidence.through.get(place, ())):
                finding, confirmed = _annotated(finding, CONFIRMED), confirmed + 1
            elif d.line in evidence.ran.get(path, ()):
                finding, ran_clean = _annotated(finding, RAN_CLEAN), ran_clean + 1
        out.append(finding)
    shown = {path: shown_as for shown_as, path in absolute.items()}
    run_only = 0
    for (path, line), records in sorted(evidence.events.items()):
        if path not in shown or (path, line) in static_places:
            continue
        for record in records:
            # a note (a throttled read, a one-off after the loop) is what the static rules leave alone too;
            # an event reached through a call the linter reported is that finding's
            if record.get("severity") != "warning" or _callers(record) & static_places \
                    or not selector.for_file(shown[path])(record["code"]):
                continue
            out.append(Finding(shown[path], Diagnostic(line, 0, record["code"], record["message"] + RUN_ONLY,
                                                       help=record.get("help"))))  # older traces have none
            run_only += 1
    out.sort(key=lambda f: (f.path, f.diagnostic.line, f.diagnostic.col, f.diagnostic.code))
    return out, MergeCounts(confirmed, ran_clean, run_only)


def _callers(record: dict) -> Set[Place]:
    """The project's call sites through which the run reached ``record`` ("/abs/train.py:71")."""
    return {(os.path.normcase(path), int(line))
            for path, _, line in (caller.rpartition(":") for caller in record.get("callers", []))}


def _annotated(finding: Finding, note: str) -> Finding:
    return finding._replace(diagnostic=finding.diagnostic._replace(message=finding.diagnostic.message + note))


def summary(counts: MergeCounts) -> str:
    return (f"Trace: {counts.confirmed} confirmed, {counts.ran_clean} on lines that ran without a sync, "
            f"{counts.run_only} seen only by the trace.")
