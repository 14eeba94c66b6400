"""Topology, devices, sync, launch and seeding: one call that works on torch_xla 2.1 through 2.9.

Each function dispatches by feature detection to the newest upstream API the installed
torch_xla has; its docstring names that API and the release that introduced it.
"""
from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any, Callable, List, Optional, Sequence

from . import _upstream as up


def world_size() -> int:
    """Number of processes. Upstream: ``torch_xla.runtime.world_size()`` (2.1+). When a
    torch.distributed process group spans more processes than XLA's world (CPU or GPU processes
    over gloo, each an XLA world of one), its size."""
    wider = wider_process_group()
    return wider.get_world_size() if wider is not None else _xla_world_size()


def global_ordinal() -> int:
    """Rank of this process across all hosts. Upstream: ``torch_xla.runtime.global_ordinal()`` (2.1+).
    Under a process group wider than XLA's world, the process group's rank."""
    wider = wider_process_group()
    if wider is not None:
        return wider.get_rank()
    return up.newest(lambda: up.xr().global_ordinal, lambda: up.xm().get_ordinal)()


def local_ordinal() -> int:
    """Rank of this process on its host. Upstream: ``torch_xla.runtime.local_ordinal()`` (2.1+).
    Under a process group wider than XLA's world, ``LOCAL_RANK`` (set by torchrun and
    :func:`xla_compat.launch`), else the process group's rank."""
    wider = wider_process_group()
    if wider is not None:
        return int(os.environ.get("LOCAL_RANK", wider.get_rank()))
    return up.newest(lambda: up.xr().local_ordinal, lambda: up.xm().get_local_ordinal)()


def _xla_world_size() -> int:
    return up.newest(lambda: up.xr().world_size, lambda: up.xm().xrt_world_size)()


def wider_process_group() -> Optional[ModuleType]:
    """``torch.distributed`` when its default process group has more processes than XLA's world,
    else None. Then XLA collectives reach this process only, and the companions count, rank and
    reduce over the process group instead (on a TPU the two are the same world)."""
    xla_world = _xla_world_size()  # first: without torch_xla, the error says what to install
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > xla_world:
        return dist
    return None


def device(index: Optional[int] = None):
    """The XLA device of this process (or device ``index``). Upstream: ``torch_xla.device()`` (2.3+)."""
    return up.newest(lambda: up.torch_xla().device, lambda: up.xm().xla_device)(index)


def devices() -> list:
    """All XLA devices of this process as ``torch.device``. Upstream: ``torch_xla.devices()`` (2.3+)."""
    fn = getattr(up.torch_xla(), "devices", None)
    if fn is not None:
        return fn()
    import torch

    return [torch.device(d) for d in up.xm().get_xla_supported_devices()]


def real_devices() -> List[str]:
    """Hardware names of the local devices, e.g. ``['TPU:0']``. Upstream: ``torch_xla.real_devices()`` (2.3+)."""
    fn = getattr(up.torch_xla(), "real_devices", None)
    if fn is not None:
        return list(fn())
    xm = up.xm()
    return list(xm.xla_real_devices(xm.get_xla_supported_devices()))


def device_type() -> Optional[str]:
    """Hardware type of the default device, e.g. ``'TPU'``. Upstream: ``torch_xla.runtime.device_type()`` (2.1+)."""
    return up.xr().device_type()


def device_hw(device: Any = None) -> str:
    """Hardware type of ``device`` (default: this process's device), like ``xm.xla_device_hw``.

    Upstream: ``torch_xla.runtime.device_type()`` (2.1+) for the default device; there is no
    public per-device equivalent, so other devices are looked up in :func:`real_devices`.
    """
    if device is None:
        kind = device_type()
        if kind is None:
            raise RuntimeError("no XLA device type is configured (set PJRT_DEVICE, e.g. PJRT_DEVICE=CPU)")
        return kind
    import torch

    index = torch.device(device).index or 0
    names = real_devices()
    if index >= len(names):
        raise ValueError(f"device {device!s} is not one of this process's devices {names}")
    return names[index].split(":", 1)[0]


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """Execute the pending lazy graph. Upstream: ``torch_xla.sync()`` (2.4+; ``wait=`` from 2.5,
    ``reset_scope=`` from 2.8); otherwise ``xm.mark_step(wait=..., reset_scope=...)``. A release
    whose ``mark_step`` always resets the IR scope raises NotImplementedError for ``reset_scope=False``."""
    fn = getattr(up.torch_xla(), "sync", None)
    if fn is not None and (not wait or up.accepts(fn, "wait")) and (reset_scope or up.accepts(fn, "reset_scope")):
        kwargs = {"wait": wait} if wait else {}
        if not reset_scope:
            kwargs["reset_scope"] = False
        fn(**kwargs)
        return
    mark_step = up.xm().mark_step
    if reset_scope:
        mark_step(wait=wait)
    elif up.accepts(mark_step, "reset_scope"):
        mark_step(wait=wait, reset_scope=False)
    else:
        raise NotImplementedError(f"torch_xla {up.torch_xla().__version__} resets the IR scope at every sync: "
                                  "sync(reset_scope=False) needs a release whose xm.mark_step takes reset_scope")


def manual_seed(seed: int, device: Any = None) -> None:
    """Seed the XLA random generator. Upstream: ``torch_xla.manual_seed`` (2.5+); before, ``xm.set_rng_state``."""
    fn = up.newest(lambda: up.torch_xla().manual_seed, lambda: up.xm().set_rng_state)
    fn(seed, device)


def get_rng_state(device: Any = None) -> int:
    """The XLA random generator's current seed state. No public upstream replacement is planned;
    dispatches to ``xm.get_rng_state`` and, once that is gone, to the binding it wraps."""
    fn = getattr(up.xm(), "get_rng_state", None)
    if fn is not None:
        return fn(device)
    txla = up.torch_xla()
    name = str(device) if device is not None else txla._XLAC._xla_get_default_device()
    return txla._XLAC._xla_get_rng_seed(name)


# what upstream's compile() calls to set the graph limit, by the parameter it takes it as: 2.5-2.7's
# _XLAC has no such binding (upstream fails at the first call), 2.8's has
_LIMIT_BINDING = {"max_different_graphs": "_dynamic_shape_detector_set_max_different_graphs",
                  "num_different_graphs_allowed": "_dynamic_shape_detector_set_max_num_different_graphs_allowed"}
_FULL_GRAPH_BINDINGS = ("_get_allow_execution", "_set_allow_execution")
_NAME_BINDINGS = ("_get_current_graph_name", "_set_current_graph_name")


def compile(f: Optional[Callable] = None, full_graph: bool = False, name: Optional[str] = None,
            max_different_graphs: Optional[int] = None):
    """Trace ``f`` (or, without ``f``, the body of a ``with``) into one graph: pending work is
    synced first and the traced graph runs at the end. Upstream: ``torch_xla.compile`` (2.5+), whose
    graph-count parameter is ``num_different_graphs_allowed`` in 2.5-2.7 and ``max_different_graphs``
    from 2.8. Before 2.5 the same tracing is done here. An argument the installed release cannot
    honour raises NotImplementedError instead of being dropped: ``full_graph`` and ``name`` before
    2.5, the graph limit before 2.8."""
    txla = up.torch_xla()
    upstream = getattr(txla, "compile", None)
    if upstream is None:
        _require(txla, "full_graph", full_graph, _FULL_GRAPH_BINDINGS)
        _require(txla, "name", name is not None, _NAME_BINDINGS)
        if max_different_graphs is not None:  # upstream's detector sessions are not rebuilt here
            raise _cannot(txla, "max_different_graphs")
        tracing = _tracing(txla._XLAC, full_graph, name)
        return tracing if f is None else tracing(f)  # a decorated f enters a fresh context per call
    kwargs: dict = {"full_graph": full_graph, "name": name}
    if max_different_graphs is not None:
        key = "max_different_graphs" if up.accepts(upstream, "max_different_graphs") else "num_different_graphs_allowed"
        _require(txla, "max_different_graphs", True, (_LIMIT_BINDING[key],))
        kwargs[key] = max_different_graphs
    return upstream(f, **kwargs) if f is not None else upstream(**kwargs)


def _cannot(txla: ModuleType, argument: str) -> NotImplementedError:
    return NotImplementedError(f"torch_xla {txla.__version__} cannot honour compile({argument}=...): the release "
                               "lacks what enforces it; use a newer torch_xla or drop the argument")


def _require(txla: ModuleType, argument: str, asked: bool, bindings: Sequence[str]) -> None:
    if asked and not all(hasattr(txla._XLAC, b) for b in bindings):
        raise _cannot(txla, argument)


def _tracing(bindings: Any, full_graph: bool, name: Optional[str]):
    """What torch_xla.compile does, for releases without it: no eager mode inside (2.4 has one),
    pending work synced before, execution forbidden inside when ``full_graph``, the graph named,
    and the traced graph run at the end; every setting restored afterwards."""

    @contextlib.contextmanager
    def tracing():
        eager = bindings._get_use_eager_mode() if hasattr(bindings, "_get_use_eager_mode") else None
        if eager:
            bindings._set_use_eager_mode(False)
        previous_name = bindings._get_current_graph_name() if name is not None else None
        allowed = bindings._get_allow_execution() if full_graph else None
        try:
            sync()
            if name is not None:
                bindings._set_current_graph_name(name)
            if full_graph:
                bindings._set_allow_execution(False)
            try:
                yield
            finally:
                if full_graph:
                    bindings._set_allow_execution(allowed)
                sync()
        finally:
            if eager:
                bindings._set_use_eager_mode(True)
            if name is not None:
                bindings._set_current_graph_name(previous_name)

    return tracing()


def spmd() -> ModuleType:
    """The SPMD sharding module. Upstream: ``torch_xla.distributed.spmd`` (2.2+); before,
    ``torch_xla.experimental.xla_sharding``."""
    try:
        return up.module("torch_xla.distributed.spmd")
    except ModuleNotFoundError as exc:
        if exc.name != "torch_xla.distributed.spmd":
            raise
        return up.module("torch_xla.experimental.xla_sharding")
