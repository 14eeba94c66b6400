"""One traced stretch of a program: :func:`xla_compat.trace` and the CLI's run both use a :class:`Trace`."""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional

from .findings import TraceFinding, findings, lines_ran
from .tracer import TraceStop, Tracer


class Trace:
    """Records, while active, every place the traced thread's torch calls cut the XLA graph.

    ``with xla_compat.trace() as t: train(...)``, then ``t.findings``: a list of
    :class:`~xla_compat.tracing.findings.TraceFinding` (code, path, line, message, level, help, and
    how often). ``project_root`` decides which frames are the user's code (default: the directory of the
    file that calls ``trace()``); ``warmup`` is the number of steps whose compiles are expected;
    ``steps``, when given, stops the program with :class:`~xla_compat.tracing.tracer.TraceStop`
    (a ``SystemExit``, which the ``with`` block absorbs) at the boundary that ends that many steps
    after warm-up (a step: what ran between two step boundaries, when it built graph ops; a barrier's
    or a loader's sync alone is no step). Tracing reads torch_xla's counters and never syncs, so the program computes the
    same values; launches (``torch_xla.launch``, ``xmp.spawn``) are not followed into their
    processes. Imports torch_xla."""

    def __init__(self, project_root: Optional[str] = None, warmup: int = 2, steps: Optional[int] = None) -> None:
        if warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {warmup}")
        if steps is not None and steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        if project_root is None:
            project_root = os.path.dirname(os.path.abspath(sys._getframe(1).f_code.co_filename))
        self.project_root = project_root
        self.warmup = warmup
        self.steps = steps
        self.stopped_early = False
        self._tracer: Optional[Tracer] = None

    def __enter__(self) -> "Trace":
        stop_after = None if self.steps is None else self.warmup + self.steps
        self._tracer = Tracer(self.project_root, self.warmup, stop_after)
        self._tracer.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> bool:
        assert self._tracer is not None
        self._tracer.stop()
        if exc_type is not None and issubclass(exc_type, TraceStop):
            self.stopped_early = True
            return True
        return False

    @property
    def boundaries(self) -> int:
        """Step boundaries seen."""
        return self._tracer.recording.step if self._tracer else 0

    @property
    def steps_traced(self) -> int:
        """Steps seen: what ran between two boundaries, when the project's code built graph ops in it."""
        return len(self._tracer.recording.graph_steps) if self._tracer else 0

    @property
    def findings(self) -> List[TraceFinding]:
        return findings(self._tracer.recording) if self._tracer else []

    def document(self) -> Dict[str, Any]:
        """The trace as ``--format json`` writes it, and ``flake8-xla check --trace`` reads it."""
        recording = self._tracer.recording if self._tracer else None
        return {
            "tool": "xla_compat.trace",
            "format": 1,
            "torch_xla": _torch_xla_version(),
            "project_root": os.path.abspath(self.project_root),
            "step_boundaries": self.boundaries,
            "steps": self.steps_traced,
            "warmup": self.warmup,
            "stopped_early": self.stopped_early,
            "findings": [f.as_json() for f in self.findings],
            "lines_ran": lines_ran(recording) if recording else {},
        }


def _torch_xla_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch_xla")
    except Exception:  # an unpackaged build
        return "unknown"
