"""The tracer: a torch function mode that reads torch_xla's counters around every torch call of the
traced thread, and wrappers of torch_xla's step marker and device wait.

Step boundaries are torch_xla's step marker (``torch_xla._XLAC._xla_step_marker``), which
``torch_xla.sync()``, ``xm.mark_step()``, ``xm.optimizer_step(barrier=True)``, a device loader's
next batch, ``torch_xla.step()`` and a compiled function's call all go through. Step 0 is what runs
before the first boundary (set-up, and with a sync at the end of the loop body the first step too).
The mode only reads counters and frames: every call runs with the arguments it was given.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Callable, List, Optional, Tuple

from .. import _upstream as up
from .events import FALLBACK, KINDS, WAIT, Counters, Reading, kind_of
from .frames import FrameClassifier, Site
from .record import Key, Recording


class TraceStop(SystemExit):
    """Raised at the step boundary that ends the last traced step: the program stops there, its
    ``finally`` blocks run, and the trace is reported. A ``SystemExit`` so that ``except Exception``
    in the program does not swallow it."""

    def __init__(self, steps: int) -> None:
        super().__init__(0)
        self.steps = steps


class Tracer:
    """Records the events of one thread's torch calls into a :class:`Recording`."""

    def __init__(self, project_root: str, warmup: int, stop_after: Optional[int]) -> None:
        import torch
        from torch.overrides import TorchFunctionMode

        self._torch = torch
        self._xla_c = up.torch_xla()._XLAC
        self._needs_materialization = self._xla_c._check_tensor_need_materialization
        self.counters = Counters(self._xla_c)
        self.frames = FrameClassifier(project_root)
        self.recording = Recording(warmup=warmup)
        self.stop_after = stop_after
        self._thread = threading.get_ident()
        self._patched: List[Tuple[Any, str, Any]] = []
        tracer = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return tracer._call(func, args, kwargs or {})

        self._mode = _Mode()

    # -- starting and stopping -----------------------------------------------------------------

    def start(self) -> None:
        self._patch(self._xla_c, "_xla_step_marker", self._step_marker)
        self._patch(self._xla_c, "_xla_wait_device_ops", self._wait_device_ops)
        # the launched function runs here, in the traced thread: one process, as on a CPU
        self._patch(up.xmp(), "spawn", _single_process)
        self._mode.__enter__()

    def stop(self) -> None:
        self._mode.__exit__(None, None, None)
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched.clear()
        self.recording.close()

    def _patch(self, owner: Any, name: str, make: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        self._patched.append((owner, name, original))
        setattr(owner, name, make(original))

    # -- torch calls -----------------------------------------------------------------------------

    def _call(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        name = getattr(func, "__name__", "")
        # a named read of a device tensor: does it cut the graph (pending work) or read computed data?
        pending = None
        if name in KINDS and args and _on_xla(args[0]):
            pending = self._needs_materialization([args[0]])[0]
        read = self.counters.read
        before = read()
        result = func(*args, **kwargs)
        after = read()
        frame = sys._getframe(2)  # _call <- the mode's __torch_function__ <- the caller
        site, library = self.frames.attribute(frame)
        recording = self.recording
        if site is not None:
            recording.ran(site, args, kwargs, self._torch.Tensor, _on_xla(result))
        if name == "backward":
            recording.backward_in_step = True
        if before != after or pending is not None:
            self._classify(name, args, result, before, after, site, library, pending, frame)
        return result

    def _classify(self, name: str, args: tuple, result: Any, before: Reading, after: Reading,
                  site: Optional[Site], library: Optional[Site], pending: Optional[bool], frame: Any) -> None:
        recording = self.recording
        if after.compiled != before.compiled:
            recording.compiled(site, library, after.compiled - before.compiled)
        if after.to_cpu != before.to_cpu:
            fallbacks = self.counters.new_fallbacks()
            for op, calls in fallbacks:
                recording.event(Key(FALLBACK, site, library, op), calls, callers=self.frames.callers(frame))
            if fallbacks:
                return
        kind = kind_of(name, before, after, _on_xla(args[0] if args else None), _on_xla(result))
        if kind is None or _in_step_closure(frame):  # a closure runs after the step's graph, by design
            return
        cut = after.executed != before.executed if pending is None else pending
        key = Key(kind, site, library, name)
        recording.event(key, 1, cut=cut, callers=self.frames.callers(frame),
                        grad=self._torch.is_grad_enabled())

    # -- torch_xla entry points ----------------------------------------------------------------

    def _step_marker(self, original: Callable) -> Callable:
        def step_marker(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self._thread:
                return original(*args, **kwargs)
            before = self.counters.read()
            result = original(*args, **kwargs)
            after = self.counters.read()
            site, library = self.frames.attribute(sys._getframe(1))
            recording = self.recording
            if after.compiled != before.compiled:
                recording.compiled(site, library, after.compiled - before.compiled)
            if kwargs.get("wait") or (len(args) > 2 and args[2]):
                recording.event(Key(WAIT, site, library, "sync(wait=True)"), 1)
            # an op that fell back outside a traced call (in backward, say) is blamed on no call
            for op, calls in self.counters.new_fallbacks():
                recording.event(Key(FALLBACK, site, library, op), calls)
            recording.boundary(site)
            if self.stop_after is not None and len(recording.graph_steps) >= self.stop_after:
                raise TraceStop(recording.step)
            return result

        return step_marker

    def _wait_device_ops(self, original: Callable) -> Callable:
        def wait_device_ops(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if threading.get_ident() == self._thread:
                site, library = self.frames.attribute(sys._getframe(1))
                self.recording.event(Key(WAIT, site, library, "wait_device_ops"), 1)
            return result

        return wait_device_ops


def _single_process(original: Callable) -> Callable:
    def spawn(fn: Callable, args: tuple = (), nprocs: Optional[int] = None, **kwargs: Any) -> Any:
        return original(fn, args=args, nprocs=1, **kwargs)

    return spawn


def _in_step_closure(frame: Any) -> bool:
    """Whether torch_xla is running step closures (``xm.add_step_closure``) further up the stack."""
    while frame is not None:
        if frame.f_code.co_name == "_run_step_closures":
            return True
        frame = frame.f_back
    return False


def _on_xla(value: Any) -> bool:
    device = getattr(value, "device", None)
    return getattr(device, "type", None) == "xla"

