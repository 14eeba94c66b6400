"""What each companion calls on each torch_xla release it supports (2.1 through 2.9).

The data behind docs/runtime.md's per-release table. tests/runtime/test_runtime_releases.py checks
it on the installed release (CI runs it on 2.1, 2.9 and a release in between that changes daily):
the upstream a companion uses there exists (with the argument named), and the ones it uses only
from a later release do not. Companions not listed call the same upstream on every release.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

RELEASES = ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9")


@dataclasses.dataclass(frozen=True)
class Upstream:
    since: str  # the first release on which the companion does this
    does: str  # what it does there, as docs/runtime.md shows it
    # the upstream it relies on, present from `since` on: dotted names, `name(keyword)` for a keyword
    # the callable accepts; before `since` at least one of them is missing
    needs: Tuple[str, ...] = ()


def _xm(name: str) -> str:
    return f"torch_xla.core.xla_model.{name}"


# companion -> what it does, oldest release first
DISPATCH: Dict[str, Tuple[Upstream, ...]] = {
    "device": (Upstream("2.1", "`xm.xla_device()`", (_xm("xla_device"),)),
               Upstream("2.3", "`torch_xla.device()`", ("torch_xla.device",))),
    "devices": (Upstream("2.1", "`xm.get_xla_supported_devices()` as `torch.device`",
                         (_xm("get_xla_supported_devices"),)),
                Upstream("2.3", "`torch_xla.devices()`", ("torch_xla.devices",))),
    "real_devices": (Upstream("2.1", "`xm.xla_real_devices(...)`", (_xm("xla_real_devices"),)),
                     Upstream("2.3", "`torch_xla.real_devices()`", ("torch_xla.real_devices",))),
    "sync": (Upstream("2.1", "`xm.mark_step(wait=)`; `reset_scope=False` refused", (_xm("mark_step(wait)"),)),
             Upstream("2.4", "`torch_xla.sync()`; `xm.mark_step(wait=, reset_scope=)` for an argument it lacks",
                      ("torch_xla.sync", _xm("mark_step(reset_scope)"))),
             Upstream("2.5", "`torch_xla.sync(wait=)`; `xm.mark_step(reset_scope=)` for `reset_scope=False`",
                      ("torch_xla.sync(wait)",)),
             Upstream("2.8", "`torch_xla.sync(wait=, reset_scope=)`", ("torch_xla.sync(reset_scope)",))),
    "manual_seed": (Upstream("2.1", "`xm.set_rng_state(seed, device)`", (_xm("set_rng_state"),)),
                    Upstream("2.5", "`torch_xla.manual_seed(seed, device)`", ("torch_xla.manual_seed",))),
    "compile": (Upstream("2.1", "traced here (sync, `full_graph` and `name` where the release's bindings allow, "
                                "sync); a graph limit refused"),
                Upstream("2.5", "`torch_xla.compile(...)`; a graph limit refused (the release lacks its binding)",
                         ("torch_xla.compile(num_different_graphs_allowed)",)),
                Upstream("2.8", "`torch_xla.compile(max_different_graphs=)`",
                         ("torch_xla.compile(max_different_graphs)",))),
    "spmd": (Upstream("2.1", "`torch_xla.experimental.xla_sharding`", ("torch_xla.experimental.xla_sharding",)),
             Upstream("2.2", "`torch_xla.distributed.spmd`", ("torch_xla.distributed.spmd",))),
    "launch": (Upstream("2.1", "`xmp.spawn(fn, nprocs=None)`", ("torch_xla.distributed.xla_multiprocessing.spawn",)),
               Upstream("2.5", "`torch_xla.launch(fn)`", ("torch_xla.launch",))),
}


def release_key(release: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in release.split(".")[:2])


def in_use(companion: str, release: str) -> Upstream:
    """What ``companion`` does on ``release`` (``"2.6"``; a patch number is ignored)."""
    entries = [entry for entry in DISPATCH[companion] if release_key(entry.since) <= release_key(release)]
    return entries[-1]
