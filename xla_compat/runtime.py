"""Topology, devices, sync, launch and seeding: one call that works on torch_xla 2.1 through 2.9.

Each function dispatches by feature detection to the newest upstream API the installed
torch_xla has; its docstring names that API and the release that introduced it.
"""
from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any, Callable, List, Optional, Sequence

from . import _upstream as up


def world_size() -> int:
    """Number of processes. Upstream: ``torch_xla.runtime.world_size()`` (2.1+)."""
    return up.newest(lambda: up.xr().world_size, lambda: up.xm().xrt_world_size)()


def global_ordinal() -> int:
    """Rank of this process across all hosts. Upstream: ``torch_xla.runtime.global_ordinal()`` (2.1+)."""
    return up.newest(lambda: up.xr().global_ordinal, lambda: up.xm().get_ordinal)()


def local_ordinal() -> int:
    """Rank of this process on its host. Upstream: ``torch_xla.runtime.local_ordinal()`` (2.1+)."""
    return up.newest(lambda: up.xr().local_ordinal, lambda: up.xm().get_local_ordinal)()


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
    ``reset_scope=`` from 2.8); before 2.4, ``xm.mark_step(wait=...)``."""
    fn = getattr(up.torch_xla(), "sync", None)
    if fn is not None and (not wait or up.accepts(fn, "wait")):
        kwargs = {"wait": wait} if wait else {}
        if not reset_scope and up.accepts(fn, "reset_scope"):
            kwargs["reset_scope"] = False
        fn(**kwargs)
        return
    up.xm().mark_step(wait=wait)


def launch(fn: Callable, args: Sequence = (), start_method: str = "spawn", debug_single_process: bool = False) -> Any:
    """Start ``fn(index, *args)`` in one process per device. Upstream: ``torch_xla.launch`` (2.5+);
    before, ``xmp.spawn`` (with ``nprocs=1`` for a single debug process)."""
    launcher = getattr(up.torch_xla(), "launch", None)
    if launcher is not None:
        return launcher(fn, args=tuple(args), start_method=start_method, debug_single_process=debug_single_process)
    return up.xmp().spawn(fn, args=tuple(args), nprocs=1 if debug_single_process else None, start_method=start_method)


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


def compile(f: Optional[Callable] = None, full_graph: bool = False, name: Optional[str] = None,
            max_different_graphs: Optional[int] = None):
    """Trace ``f`` into one graph. Upstream: ``torch_xla.compile`` (2.5+); its graph-count parameter
    is ``num_different_graphs_allowed`` in 2.5-2.7 and ``max_different_graphs`` from 2.8; on 2.4,
    ``torch_xla.experimental.compile``."""
    upstream = getattr(up.torch_xla(), "compile", None)
    if upstream is None:
        legacy = up.newest(lambda: up.module("torch_xla.experimental").compile)
        return legacy(f) if f is not None else legacy
    kwargs: dict = {"full_graph": full_graph, "name": name}
    if max_different_graphs is not None and not hasattr(
            up.torch_xla()._XLAC, "_dynamic_shape_detector_set_max_num_different_graphs_allowed"):
        # e.g. 2.5.1: the Python side accepts the limit but the binding it calls is missing.
        warnings.warn(f"torch_xla {up.torch_xla().__version__} cannot enforce max_different_graphs; "
                      "compiling without the limit", UserWarning, stacklevel=2)
        max_different_graphs = None
    if max_different_graphs is not None:
        key = "max_different_graphs" if up.accepts(upstream, "max_different_graphs") else "num_different_graphs_allowed"
        kwargs[key] = max_different_graphs
    return upstream(f, **kwargs) if f is not None else upstream(**kwargs)


def spmd() -> ModuleType:
    """The SPMD sharding module. Upstream: ``torch_xla.distributed.spmd`` (2.2+); before,
    ``torch_xla.experimental.xla_sharding``."""
    try:
        return up.module("torch_xla.distributed.spmd")
    except ModuleNotFoundError as exc:
        if exc.name != "torch_xla.distributed.spmd":
            raise
        return up.module("torch_xla.experimental.xla_sharding")
