"""A traced run's events as findings: the linter's code where one fits, a one-clause message (what
happened, and on every step, some steps or outside them), a help with the facts (on how many steps,
how many times per step, the library's line, the shapes that changed), and a level (``warning`` when
it repeats across steps or within one, ``note`` when it happened once or on a few steps, as a
throttled log line does)."""
from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from .events import BRANCH, COMPILED, COPY, FALLBACK, WAIT, spelling
from .frames import Site, library_name
from .record import Change, Key, Recording

HOST_READ, FALLBACK_CODE, WAIT_CODE, BRANCH_CODE, EVAL_COPY = "XLA303", "XLA301", "XLA302", "XLA304", "XLA307"
RECOMPILE, LIBRARY_SYNC = "XLA309", "XLA310"
# a site hit this many times in one step is in a loop (an evaluation loop, a per-token decode)
LOOP_HITS = 3


class TraceFinding(NamedTuple):
    """One place that cut the graph, as the trace reports it."""

    code: str
    path: str  # relative to the working directory when under it
    line: int
    message: str
    level: str  # "warning" or "note"
    kind: str  # read, branch, copy, fallback, compile, wait
    steps_hit: int  # full steps (between two boundaries) it happened in
    full_steps: int  # full steps the run had
    per_step: int  # most events in one step
    count: int  # events in the whole run
    library: Optional[str] = None  # "transformers/generation/utils.py:2345" when it happened there
    absolute_path: str = ""
    callers: Tuple[str, ...] = ()  # "/abs/train.py:71": the project's call sites it was reached through
    help: Optional[str] = None  # the facts behind the message: "On 7 of 7 steps, 1 per step."

    def as_json(self) -> dict:
        return {"filename": self.path, "path": self.absolute_path, "line": self.line, "column": 1,
                "code": self.code, "message": self.message, "help": self.help, "severity": self.level,
                "kind": self.kind, "steps_hit": self.steps_hit,
                "full_steps": self.full_steps, "per_step": self.per_step, "count": self.count,
                "library": self.library, "callers": list(self.callers)}


def display_path(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith(os.pardir) else relative


def findings(recording: Recording) -> List[TraceFinding]:
    """Every event site of ``recording``, sorted by file and line."""
    # steps with a boundary on each side in which the project's code built graph ops
    full = sorted(s for s in recording.graph_steps if s < recording.step)
    full_set = frozenset(full)
    out = []
    for key, steps in recording.hits.items():
        site = key.site or key.library
        if site is None:
            continue
        finding = _finding(key, site, steps, full, full_set, recording)
        if finding is not None:
            out.append(finding)
    return sorted(out, key=lambda f: (f.path, f.line, f.code, f.message))


def _finding(key: Key, site: Site, steps: Dict[int, int], full: Sequence[int], full_set: frozenset,
             recording: Recording) -> Optional[TraceFinding]:
    if key.kind == COMPILED and recording.training_steps:
        # compiles before the first training step are set-up (a model moved or wrapped piece by piece)
        first_training = min(recording.training_steps)
        steps = {s: n for s, n in steps.items() if s >= first_training}
        if not steps:
            return None
    hit_full = [s for s in steps if s in full_set]
    per_step = max(steps.values())
    count = sum(steps.values())
    library = _library(key)
    # outside a full step (set-up, after the loop) only a loop that runs a graph each time counts
    in_loop = max((recording.cuts.get(key) or {0: 0}).values()) if not hit_full else per_step
    repeats = (len(hit_full) >= 2 and 2 * len(hit_full) >= len(full)) or in_loop >= LOOP_HITS
    when, how_often = _when(steps, hit_full, full), _how_often(steps, hit_full, full, per_step)
    if key.kind == COMPILED:
        code, level = RECOMPILE, "warning" if hit_full else "note"
        message, help_ = _compile_message(key.detail, _how_often(steps, hit_full, full, per_step, each=False),
                                          count)
    elif key.kind == FALLBACK:
        code, level = FALLBACK_CODE, "warning" if repeats else "note"
        message, help_ = f"{key.detail} ran on the CPU (no XLA lowering) {when}", _sentence(how_often)
    elif key.kind == WAIT:
        code, level = WAIT_CODE, "warning" if repeats else "note"
        message = f"{_wait_spelling(str(key.detail))} blocked the host until the device finished {when}"
        help_ = _sentence(how_often)
    else:
        code = _read_code(key, steps, recording, library)
        level = "warning" if repeats else "note"
        message = _read_message(key, library, when)
        help_ = _sentence(f"at {library}, {how_often}" if library else how_often)
    callers = tuple(f"{os.path.abspath(path)}:{line}" for path, line in sorted(recording.callers.get(key, ())))
    return TraceFinding(code, display_path(site.path), site.line, message, level, key.kind, len(hit_full),
                        len(full), per_step, count, library, os.path.abspath(site.path), callers, help_)


def _library(key: Key) -> Optional[str]:
    if key.library is None or key.site is None:
        return None
    name = library_name(key.library.path)
    return f"{os.path.relpath(name) if os.path.isabs(name) else name}:{key.library.line}"


def _read_code(key: Key, steps: Dict[int, int], recording: Recording, library: Optional[str]) -> str:
    if library is not None:
        return LIBRARY_SYNC
    if key.kind == BRANCH:
        return BRANCH_CODE
    # evaluation: always under torch.no_grad(), or in steps that never ran backward()
    if key not in recording.with_grad or not any(s in recording.training_steps for s in steps):
        return EVAL_COPY
    return HOST_READ


def _package(library: str) -> str:
    """``transformers`` for ``transformers/generation/utils.py:2345``; a module outside the installed
    packages (``../vendor/framework.py:18``) by its file's name."""
    path = library.rpartition(":")[0]
    parts = path.replace(os.sep, "/").split("/")
    if os.path.isabs(path) or parts[0] == os.pardir or len(parts) == 1:
        return os.path.splitext(parts[-1])[0]
    return parts[0]


def _read_message(key: Key, library: Optional[str], when: str) -> str:
    subject = spelling(str(key.detail)) + (" on a tensor" if key.kind == BRANCH else "")
    inside = f" inside {_package(library)}" if library else ""
    if key.kind == COPY:
        return f"{subject}{inside} copied device data to the host {when}"
    if key.kind == BRANCH:
        return f"{subject}{inside} read its value to the host {when}"
    return f"{subject}{inside} read a device value to the host {when}"


def _wait_spelling(detail: str) -> str:
    return "xm.wait_device_ops()" if detail == "wait_device_ops" else "torch_xla.sync(wait=True)"


def _when(steps: Dict[int, int], hit_full: Sequence[int], full: Sequence[int]) -> str:
    """The message's "when": every step, some steps, or where outside them (the counts are the help's)."""
    if hit_full:
        return "on every step" if len(hit_full) == len(full) else "on some steps"
    return _outside(steps, full)


def _outside(steps: Dict[int, int], full: Sequence[int]) -> str:
    step = min(steps)
    if not full or step < full[0]:
        return "before the first step"  # set-up, and with a sync at the end of the loop body the first step
    if step > full[-1]:
        return "after the last step"
    return "between steps"  # a barrier's or a step closure's own sync


def _how_often(steps: Dict[int, int], hit_full: Sequence[int], full: Sequence[int], per_step: int,
               each: bool = True) -> str:
    if hit_full:
        if not each:
            return f"on {len(hit_full)} of {len(full)} steps"
        per = f"{per_step} per step" if all(steps[s] == per_step for s in hit_full) else f"up to {per_step} per step"
        return f"on {len(hit_full)} of {len(full)} steps, {per}"
    times = "once" if per_step == 1 else f"{per_step} times"
    return f"{times} {_outside(steps, full)}"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _compile_message(change: object, how_often: str, count: int) -> Tuple[str, str]:
    """The message and the help of a compile after warm-up."""
    head = "a new graph compiled after warm-up" if count == 1 else "new graphs compiled after warm-up"
    graphs = f"{count} new graph{'s' if count != 1 else ''}, {how_often}."
    if not isinstance(change, Change) or change.line is None:
        return (f"{head}: no traced call changed its shapes or whether it ran",
                "No traced call changed its input shapes or whether it ran since the step before; the finding is "
                f"at the first sync that compiled. {graphs}")
    if change.what == "shapes":
        return f"{head}: this call's input shapes changed", f"Input shapes {change.before} -> {change.after}. {graphs}"
    if change.what == "inner":
        return (f"{head}: a call of this line got other input shapes or a 0/1 scalar",
                "A call of this line got other input shapes, or a Python number it passes became "
                f"or stopped being 0 or 1 (torch_xla compiles those two into the graph). {graphs}")
    if change.after == "ran":
        return f"{head}: this line ran, and had not on the step before", f"The Python path changed. {graphs}"
    return f"{head}: this line did not run, and had on the step before", f"The Python path changed. {graphs}"


def lines_ran(recording: Recording) -> Dict[str, List[int]]:
    """The project's lines that made a torch call during a step, by absolute path."""
    full = recording.graph_steps
    out: Dict[str, List[int]] = {}
    for (path, line), steps in recording.lines_ran.items():
        if not full or any(s in full for s in steps):
            out.setdefault(os.path.abspath(path), []).append(line)
    return {path: sorted(lines) for path, lines in sorted(out.items())}

