"""Warn while a training job runs when its XLA graph is dynamic: recompiles, per-step host transfers, CPU fallbacks.

:class:`GraphWatch` reads a few ``torch_xla.debug.metrics`` values at each step boundary and compares
them with the previous boundary; it never clears or resets them, so other readers of the metrics are
unaffected. What it reads, per step:

- the ``UncachedCompile`` counter: one per graph compiled (on torch_xla 2.9 it moves with the
  ``CompileTime`` metric for LazyTensor, ``torch_xla.compile`` and dynamo graphs alike, and is a
  plain integer, while ``metric_data`` copies the metric's sample buffer);
- the sample count of the ``TransferFromDeviceTime`` metric (``TransferFromServerTime`` on 2.1): one
  per device-to-host copy (``.item()``, ``.tolist()``, ``.cpu()``, printing a tensor, and each
  CPU-fallback call);
- the ``aten::*`` counters: one per call of an op that has no XLA lowering and ran on the CPU;
  ``aten::_local_scalar_dense`` among them is a Python scalar read (``.item()``, ``float(t)``, ``if t:``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterable, Iterator, List, Optional, TypeVar

from . import _upstream as up

_COMPILES = "UncachedCompile"
_TRANSFERS = ("TransferFromDeviceTime", "TransferFromServerTime")  # the name, and 2.1's
_FALLBACK_PREFIX = "aten::"
_SCALAR_READ = "aten::_local_scalar_dense"

Item = TypeVar("Item")


class GraphWarning(UserWarning):
    """Category of the warnings :class:`GraphWatch` and :func:`watch_steps` emit, so they can be
    filtered on their own, e.g. ``warnings.filterwarnings("error", category=xla_compat.GraphWarning)``
    to fail a test run whose training loop recompiles, syncs every step or falls back to the CPU.
    Send them to ``logging`` with ``logging.captureWarnings(True)``."""


@dataclass(frozen=True)
class Finding:
    """One cause seen after warm-up: the step it was first seen at, in how many steps, how many events."""

    first_step: int
    steps: int
    count: int

    def add(self, count: int) -> "Finding":
        return replace(self, steps=self.steps + 1, count=self.count + count)


@dataclass(frozen=True)
class GraphReport:
    """What a :class:`GraphWatch` found: ``recompiles`` (graphs compiled after warm-up),
    ``host_transfers`` (device-to-host copies, from the first step of the run of consecutive
    transferring steps that triggered the warning), and ``fallbacks`` (CPU-fallback op name to its
    calls), each a :class:`Finding` (``first_step``, ``steps``, ``count``) or absent. ``clean`` is
    True when nothing was found; ``str(report)`` is the one-line summary."""

    steps: int
    warmup_steps: int
    recompiles: Optional[Finding] = None
    host_transfers: Optional[Finding] = None
    fallbacks: Dict[str, Finding] = field(default_factory=dict, hash=False)

    @property
    def clean(self) -> bool:
        return self.recompiles is None and self.host_transfers is None and not self.fallbacks

    def __str__(self) -> str:
        parts = []
        if self.recompiles:
            parts.append(_summary_part("recompiled", self.recompiles, "graph"))
        if self.host_transfers:
            parts.append(_summary_part("host transfers", self.host_transfers, "transfer"))
        for op, finding in self.fallbacks.items():
            parts.append(_summary_part(f"{op} on the CPU", finding, "call"))
        found = "; ".join(parts) or "clean"
        return f"GraphWatch summary after {_plural(self.steps, 'step')} ({self.warmup_steps} warm-up): {found}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _summary_part(what: str, finding: Finding, unit: str) -> str:
    return (f"{what}: {_plural(finding.count, unit)} in {_plural(finding.steps, 'step')}, "
            f"first at step {finding.first_step}")


@dataclass(frozen=True)
class _Reading:
    compiles: int
    transfers: int
    fallback_calls: Dict[str, int]


def _growth(before: int, after: int) -> int:
    # a value below the previous one means someone cleared the metrics; count from zero
    return after - before if after >= before else after


class GraphWatch:
    """Context manager that warns, with the step number, when a training loop's XLA graph is
    dynamic. Wrap the whole loop in ``with xla_compat.GraphWatch() as watch:`` and call
    ``watch.step()`` at the end of each step, after ``torch_xla.sync()``. After ``warmup_steps``
    steps (the first steps legitimately compile) it emits a :class:`GraphWarning` once per cause:
    when a graph is compiled again (changing input shapes, data-dependent Python control flow);
    when data is copied from the device to the host in ``transfer_window`` consecutive steps
    (``.item()``, ``.tolist()``, ``.cpu()``, printing a tensor); and when an op without an XLA
    lowering runs on the CPU, named from its ``aten::`` counter (calls made before the watch
    started are not blamed on the loop; the copies a fallback makes are reported as the fallback,
    not as host transfers). When the ``with`` block ends, unless an exception ends it, a summary
    :class:`GraphWarning` with per-cause counts follows if anything was found, and nothing if the
    loop was clean (``summary=False`` turns it off); :meth:`report` returns the counts as a
    :class:`GraphReport`. Each step costs a few counter reads, not a ``metrics_report()``; the
    watch never syncs and never clears the metrics. Constructing it imports torch_xla."""

    def __init__(self, warmup_steps: int = 2, transfer_window: int = 3, summary: bool = True) -> None:
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        if transfer_window < 1:
            raise ValueError(f"transfer_window must be >= 1, got {transfer_window}")
        self.warmup_steps = warmup_steps
        self.transfer_window = transfer_window
        self.summary = summary
        self._metrics = up.module("torch_xla.debug.metrics")
        self._last = self._read()
        self._steps = 0
        self._recompiles: Optional[Finding] = None
        self._host_transfers: Optional[Finding] = None
        self._transfer_run: Optional[Finding] = None  # consecutive transferring steps not warned about yet
        self._transfer_run_scalar_reads = 0
        self._fallbacks: Dict[str, Finding] = {}
        self._exit_depth = 2  # frames from __exit__'s warning to the user's code; watch_steps adds its own

    def __enter__(self) -> "GraphWatch":
        if self._steps == 0:  # the loop starts here, not at construction
            self._last = self._read()
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        # after a failure (a GraphWarning turned into an error among them) a summary would only bury it
        failed = exc_type is not None and issubclass(exc_type, Exception)
        if self.summary and not failed:
            report = self.report()
            if not report.clean:
                self._warn(str(report), self._exit_depth)

    def step(self) -> None:
        """Mark the end of a training step (call it after ``torch_xla.sync()``): read the metrics
        and warn about any cause seen for the first time since the previous call."""
        self._check_step(depth=2)

    def report(self) -> GraphReport:
        """The counts so far: a :class:`GraphReport`, ``clean`` when nothing was found."""
        return GraphReport(steps=self._steps, warmup_steps=self.warmup_steps, recompiles=self._recompiles,
                           host_transfers=self._host_transfers, fallbacks=dict(self._fallbacks))

    def _read(self) -> _Reading:
        metrics = self._metrics
        transfers = next(filter(None, map(metrics.metric_data, _TRANSFERS)), None)  # None until the first transfer
        fallback_calls = {name: metrics.counter_value(name) or 0
                          for name in metrics.counter_names() if name.startswith(_FALLBACK_PREFIX)}
        return _Reading(compiles=metrics.counter_value(_COMPILES) or 0,
                        transfers=transfers[0] if transfers else 0, fallback_calls=fallback_calls)

    def _check_step(self, depth: int) -> None:
        # depth: frames from here up to the user's code, so warnings point at the user's line
        reading = self._read()
        last, self._last = self._last, reading
        self._steps += 1
        if self._steps <= self.warmup_steps:
            return
        calls = {name: _growth(last.fallback_calls.get(name, 0), value)
                 for name, value in reading.fallback_calls.items()}
        scalar_reads = calls.pop(_SCALAR_READ, 0)
        op_calls = {name: count for name, count in sorted(calls.items()) if count}
        # each CPU-fallback call copies its inputs to the host once; what is left was asked for by the step
        transfers = max(scalar_reads, _growth(last.transfers, reading.transfers) - sum(op_calls.values()))
        messages = [self._note_recompiles(_growth(last.compiles, reading.compiles)),
                    self._note_transfers(transfers, scalar_reads),
                    self._note_fallbacks(op_calls)]
        for message in messages:
            if message:
                self._warn(message, depth + 1)

    def _note_recompiles(self, compiles: int) -> Optional[str]:
        if not compiles:
            return None
        if self._recompiles:
            self._recompiles = self._recompiles.add(compiles)
            return None
        self._recompiles = Finding(first_step=self._steps, steps=1, count=compiles)
        return (f"GraphWatch: {_plural(compiles, 'new graph')} compiled at step {self._steps}, after "
                f"{_plural(self.warmup_steps, 'warm-up step')}; each compilation stalls training. Typical "
                "causes: input shapes that change between steps (pad or bucket them; DataLoader(drop_last=True) "
                "avoids a short last batch) and Python control flow on tensor values (use torch.where).")

    def _note_transfers(self, transfers: int, scalar_reads: int) -> Optional[str]:
        if self._host_transfers:
            if transfers:
                self._host_transfers = self._host_transfers.add(transfers)
            return None
        if not transfers:
            self._transfer_run = None  # a one-off copy (a checkpoint, a log line) breaks the run
            return None
        if self._transfer_run:
            self._transfer_run = self._transfer_run.add(transfers)
            self._transfer_run_scalar_reads += scalar_reads
        else:
            self._transfer_run = Finding(first_step=self._steps, steps=1, count=transfers)
            self._transfer_run_scalar_reads = scalar_reads
        run = self._transfer_run
        if run.steps < self.transfer_window:
            return None
        self._host_transfers, self._transfer_run = run, None
        span = f"step {run.first_step}" if run.steps == 1 else f"each of steps {run.first_step}-{self._steps}"
        return (f"GraphWatch: data was copied from the device to the host in {span} "
                f"({_plural(run.count, 'transfer')}, {self._transfer_run_scalar_reads} of them Python scalar reads), "
                "so every step waits for the device. Typical causes: .item(), .tolist(), .cpu() or printing a "
                "tensor in the step; read values every N steps instead, inside xla_compat.add_step_closure so the "
                "read runs after the step's graph.")

    def _note_fallbacks(self, op_calls: Dict[str, int]) -> Optional[str]:
        new_ops: List[str] = []
        for op, count in op_calls.items():
            if op in self._fallbacks:
                self._fallbacks[op] = self._fallbacks[op].add(count)
            else:
                self._fallbacks[op] = Finding(first_step=self._steps, steps=1, count=count)
                new_ops.append(op)
        if not new_ops:
            return None
        return (f"GraphWatch: {', '.join(new_ops)} ran on the CPU at step {self._steps}: no XLA lowering, so "
                "each call copies its inputs to the host and its result back, and when its result shape follows "
                "the data, what comes after it recompiles. Use a static-shape form in the step (e.g. a mask "
                "multiplication or 3-argument torch.where instead of nonzero or boolean indexing) or move the op "
                "out of the step.")

    def _warn(self, message: str, depth: int) -> None:
        warnings.warn(message, GraphWarning, stacklevel=depth + 1)


def watch_steps(iterable: Iterable[Item], warmup_steps: int = 2, transfer_window: int = 3,
                summary: bool = True) -> Iterator[Item]:
    """Yield the items of ``iterable`` (a data loader) while a :class:`GraphWatch` checks each step:
    ``for batch in xla_compat.watch_steps(loader): ...``. A step ends when the loop fetches the next
    item (or finds none), and is checked after that fetch, so the sync an ``MpDeviceLoader`` does
    inside its ``next()`` counts for the step it ends; with a plain loader, call ``torch_xla.sync()``
    at the end of the loop body. The summary comes when the loop ends, also by ``break``. The
    parameters are :class:`GraphWatch`'s; torch_xla is imported when the first item is requested."""
    watch = GraphWatch(warmup_steps=warmup_steps, transfer_window=transfer_window, summary=summary)
    watch._exit_depth = 3
    with watch:
        started = False
        for item in iterable:
            if started:
                watch._check_step(depth=2)
            started = True
            yield item
        if started:
            watch._check_step(depth=2)
