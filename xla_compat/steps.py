"""Per-step helpers: step closures, a throughput meter, and the DDP-style gradient step."""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _upstream as up
from .collectives import all_reduce
from .fsdp_checks import check_not_fsdp_sharded
from .runtime import sync, world_size


def add_step_closure(closure: Callable[..., Any], args: Sequence = (), run_async: bool = False) -> None:
    """Run ``closure(*args)`` after the current step's graph has executed, so reading tensor values
    there costs no extra sync. Upstream: ``xm.add_step_closure`` (planned for removal, no
    replacement yet); it is used while it exists."""
    up.xm().add_step_closure(closure, args=tuple(args), run_async=run_async)


class RateTracker:
    """Throughput meter (items per second): ``rate()`` since the previous call, exponentially
    smoothed, and ``global_rate()`` since creation. A replacement for ``xm.RateTracker``, which
    the usability plan makes internal; pure Python, no device sync."""

    def __init__(self, smooth_factor: Optional[float] = None, clock: Callable[[], float] = time.monotonic) -> None:
        if smooth_factor is None:  # upstream's default, and the variable it reads it from
            smooth_factor = float(os.environ.get("RATE_TRACKER_SMOOTHING", 0.4))
        if not 0.0 <= smooth_factor < 1.0:
            raise ValueError(f"smooth_factor must be in [0, 1), got {smooth_factor}")
        self._smooth = smooth_factor
        self._clock = clock
        self._start = self._last = clock()
        self._total = 0.0
        self._pending = 0.0
        self._rate: Optional[float] = None

    def add(self, count: float) -> None:
        self._pending += count
        self._total += count

    def rate(self) -> float:
        now = self._clock()
        elapsed = now - self._last
        if elapsed <= 0:  # as upstream: no time, no rate (and nothing is consumed)
            return 0.0
        current = self._pending / elapsed
        self._rate = current if self._rate is None else (1 - self._smooth) * current + self._smooth * self._rate
        self._pending = 0.0
        self._last = now
        return self._rate

    def global_rate(self) -> float:
        elapsed = self._clock() - self._start
        return self._total / elapsed if elapsed > 0 else 0.0


def _gradients(optimizer) -> List[Any]:
    return [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]


def reduce_gradients(optimizer, groups: Optional[List[List[int]]] = None, pin_layout: bool = True) -> None:
    """Average the gradients of ``optimizer``'s parameters over all replicas (in place).

    A replacement for ``xm.reduce_gradients`` (planned to become internal). With one process it
    does nothing; otherwise it all-reduces through XLA (``xm.all_reduce``), which is what
    data-parallel training on XLA devices needs, or over a torch.distributed process group wider
    than XLA's world (:func:`xla_compat.all_reduce`). The runtime twin of XLA202: it raises
    ``ValueError`` when the optimizer holds parameters sharded by ``XlaFullyShardedDataParallel``
    (also in one process), because FSDP already reduce-scatters their gradients; with FSDP call
    ``optimizer.step()`` directly."""
    check_not_fsdp_sharded(optimizer, "reduce_gradients")
    _reduce(optimizer, groups, pin_layout)


def _reduce(optimizer, groups: Optional[List[List[int]]], pin_layout: bool) -> None:
    count = world_size()
    if count <= 1:
        return
    grads = _gradients(optimizer)
    if grads:
        all_reduce("sum", grads, scale=1.0 / count, groups=groups, pin_layout=pin_layout)


def optimizer_step(optimizer, barrier: bool = False, optimizer_args: Optional[Dict[str, Any]] = None,
                   groups: Optional[List[List[int]]] = None, pin_layout: bool = True) -> Any:
    """``reduce_gradients`` + ``optimizer.step(**optimizer_args)`` (+ ``sync()`` when ``barrier``).
    A replacement for ``xm.optimizer_step`` (planned for removal); returns what ``step`` returns.
    The runtime twin of XLA202: like :func:`reduce_gradients` it raises ``ValueError``, before
    stepping, when the optimizer holds parameters sharded by ``XlaFullyShardedDataParallel``, whose
    gradients would be reduced twice; with FSDP call ``optimizer.step()`` directly."""
    check_not_fsdp_sharded(optimizer, "optimizer_step")
    _reduce(optimizer, groups, pin_layout)
    loss = optimizer.step(**(optimizer_args or {}))
    if barrier:
        sync()
    return loss
