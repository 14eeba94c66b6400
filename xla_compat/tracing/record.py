"""What a traced run did, step by step: events per source line, the lines that ran, and, for each
graph compiled after warm-up, what changed since the step before (a call's input shapes, or which
lines ran)."""
from __future__ import annotations

import struct
from typing import Dict, List, NamedTuple, Optional, Set, Tuple, Union

from .frames import Site

Shapes = Tuple[Tuple[int, ...], ...]
Line = Tuple[str, int]


class Key(NamedTuple):
    """One kind of event at one place: ``detail`` is the call's name, the fallback op or, for a
    compile, the :class:`Change` since the step before."""

    kind: str
    site: Optional[Site]
    library: Optional[Site]
    detail: Union[str, "Change"]


class Change(NamedTuple):
    """Why a step compiled a new graph: ``line`` the first call that differs from the step before."""

    what: str  # "shapes", "inner" (a later call of the line), "path" or "" (no traced call differs)
    line: Optional[Line]
    before: str
    after: str


class Recording:
    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.step = 0  # step boundaries seen; events before the first are step 0
        self.hits: Dict[Key, Dict[int, int]] = {}
        self.cuts: Dict[Key, Dict[int, int]] = {}  # the events during which a graph ran
        self.callers: Dict[Key, Set[Line]] = {}  # the project's call sites through which each was reached
        self.with_grad: Set[Key] = set()  # events seen with autograd on (not under torch.no_grad())
        self.training_steps: Set[int] = set()  # steps that called backward()
        # steps after step 0 whose code built graph ops (not a loader's or a barrier's sync alone):
        # what findings count as steps, and what --steps counts
        self.graph_steps: Set[int] = set()
        self._opened_at: Optional[Line] = None
        self._graph_line_steps: Dict[Line, int] = {}  # line -> steps in which it built graph ops
        self.lines_ran: Dict[Line, Set[int]] = {}
        self.backward_in_step = False
        self.closed = False
        self._lines: Set[Line] = set()  # this step's lines that made a torch call
        self._digests: Dict[Line, int] = {}  # this step's graph-building calls per line, folded
        self._previous_digests: Dict[Line, int] = {}
        self._shapes: Dict[Line, Shapes] = {}  # this step's first graph-building call per line, in order
        self._previous_shapes: Optional[Dict[Line, Shapes]] = None
        self._compiles: List[Tuple[Optional[Site], Optional[Site], int]] = []

    def ran(self, site: Site, args: tuple, kwargs: dict, tensor_type: type, builds_graph: bool) -> None:
        """A torch call at ``site``; ``builds_graph``: it made a device tensor (a lazy op)."""
        line = (site.path, site.line)
        steps = self.lines_ran.get(line)
        if steps is None:
            steps = self.lines_ran[line] = set()
        steps.add(self.step)
        self._lines.add(line)
        if builds_graph:
            # every call's input shapes, and which Python numbers are 0 or 1 (torch_xla compiles those
            # into the graph, any other number is an input), folded into one digest per line
            shapes = tuple(tuple(a.shape) for a in args if isinstance(a, tensor_type))
            special = tuple(_compiled_in(a) for a in (*args, *kwargs.values()) if type(a) in (int, float))
            self._digests[line] = hash((self._digests.get(line), shapes, special))
            if line not in self._shapes:
                self._shapes[line] = shapes

    def event(self, key: Key, count: int, cut: bool = True, callers: Tuple[Line, ...] = (),
              grad: bool = True) -> None:
        """``count`` events of ``key`` in this step; ``cut``: a graph may have run for them;
        ``callers``: the project's call sites further out; ``grad``: autograd was on."""
        if callers:
            self.callers.setdefault(key, set()).update(callers)
        if grad:
            self.with_grad.add(key)
        steps = self.hits.get(key)
        if steps is None:
            steps = self.hits[key] = {}
        steps[self.step] = steps.get(self.step, 0) + count
        if cut:
            cuts = self.cuts.setdefault(key, {})
            cuts[self.step] = cuts.get(self.step, 0) + count

    def compiled(self, site: Optional[Site], library: Optional[Site], graphs: int) -> None:
        self._compiles.append((site, library, graphs))

    def boundary(self, site: Optional[Site]) -> None:
        """A step ended at ``site``'s line: explain its compiles, then start the next step."""
        line = None if site is None else (site.path, site.line)
        self._end_step(line)
        self.step += 1
        self._opened_at = line

    def close(self) -> None:
        if not self.closed:
            self._end_step(None)
            self.closed = True

    def _end_step(self, closed_at: Optional[Line]) -> None:
        boundaries = {self._opened_at, closed_at}
        # the project's code made a torch call other than on the lines of the boundaries around the step
        # (`for batch in loader:` syncs, and the loader's next() makes torch calls)
        active = bool(self._lines - boundaries)
        # warm-up: a graph compiled in a step is expected until each line that built graph ops in it
        # has done so in `warmup` earlier steps (a step's code is traced anew the first times it runs:
        # the first step, the step where the optimizer's state first exists, the first evaluation batch)
        graph_lines = set(self._shapes) - boundaries
        seen = self._graph_line_steps
        warming = self.step == 0 or not graph_lines or min(seen.get(line, 0) for line in graph_lines) < self.warmup
        for line in graph_lines:
            seen[line] = seen.get(line, 0) + 1
        if graph_lines and self.step:
            self.graph_steps.add(self.step)
        if warming:
            self._compiles = []
        if self.backward_in_step:
            self.training_steps.add(self.step)
        self.backward_in_step = False
        if self._compiles:  # one finding per cause: the first sync that compiled stands for the others
            change = _change(self._previous_shapes, self._shapes)
            if change.line is None and self._previous_shapes is not None:
                change = _inner_change(self._previous_digests, self._digests)
            site, library, _ = self._compiles[0]
            if change.line is not None:
                site, library = Site(change.line[0], change.line[1], ""), None
            self.event(Key("compile", site, library, change), sum(graphs for _, _, graphs in self._compiles))
            self._compiles = []
        if active:  # an empty step (between two syncs of a loader's next()) is no comparison
            self._previous_shapes, self._previous_digests = self._shapes, self._digests
        self._shapes, self._lines, self._digests = {}, set(), {}


def _change(before: Optional[Dict[Line, Shapes]], after: Dict[Line, Shapes]) -> Change:
    if before is None:
        return Change("", None, "", "")
    for line, shapes in after.items():
        old = before.get(line)
        if old is not None and old != shapes:
            changed = [(a, b) for a, b in zip(old, shapes) if a != b] or [(old, shapes)]
            return Change("shapes", line, ", ".join(_shape_text(a) for a, _ in changed),
                          ", ".join(_shape_text(b) for _, b in changed))
    for line in after:
        if line not in before:
            return Change("path", line, "did not run", "ran")
    for line in before:
        if line not in after:
            return Change("path", line, "ran", "did not run")
    return Change("", None, "", "")


def _compiled_in(number: float) -> bool:
    """Whether torch_xla compiles this Python number into the graph: 0 or 1 once in float32
    (``1 - 2.955e-6 * 0.01`` is 1.0 there)."""
    return struct.unpack("f", struct.pack("f", number))[0] in (0.0, 1.0)


def _inner_change(before: Dict[Line, int], after: Dict[Line, int]) -> Change:
    """The first line whose calls beyond its first one changed: a shape further in, or a Python
    number that became (or stopped being) 0 or 1 (``param.mul_(1 - lr * wd)`` once ``lr * wd``
    rounds to 0)."""
    for line, digest in after.items():
        if line in before and before[line] != digest:
            return Change("inner", line, "", "")
    return Change("", None, "", "")


def _shape_text(shape: Tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
