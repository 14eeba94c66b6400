"""xla_compat: the replacements flake8-xla recommends, portable across torch_xla 2.1-2.9.

Importing this package imports neither torch nor torch_xla; each call does, and raises an
ImportError naming the install command when torch_xla is missing.
"""
from .checkpoint import atomic_save, consolidate_sharded, load, save, save_sharded, shard_path
from .collectives import all_gather_object, all_reduce, do_on_ordinals, mesh_reduce, rendezvous, to_cpu
from .fsdp_checks import check_fsdp_optimizer, is_fsdp_parameter
from .graph_watch import GraphReport, GraphWarning, GraphWatch, watch_steps
from .runtime import (compile, device, device_hw, device_type, devices, get_rng_state, global_ordinal,
                      local_ordinal, manual_seed, real_devices, spmd, sync, world_size)
from .resume import CheckpointManager
from .supervisor import JobFailed, launch
from .watchdog import Watchdog
from .worker_logs import log_worker
from .steps import RateTracker, add_step_closure, optimizer_step, reduce_gradients



def __getattr__(name: str):
    if name == "trace":  # the module is callable: xla_compat.trace() is its context manager
        import importlib

        return importlib.import_module(__name__ + ".trace")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "add_step_closure", "all_gather_object", "all_reduce", "atomic_save", "check_fsdp_optimizer",
    "CheckpointManager", "compile", "consolidate_sharded", "device", "device_hw", "device_type", "devices",
    "do_on_ordinals", "get_rng_state", "global_ordinal", "GraphReport", "GraphWarning", "GraphWatch",
    "is_fsdp_parameter", "JobFailed", "launch", "load", "local_ordinal", "log_worker", "manual_seed", "mesh_reduce",
    "optimizer_step", "RateTracker", "real_devices", "reduce_gradients", "rendezvous", "save", "save_sharded",
    "shard_path", "spmd", "sync", "to_cpu", "trace", "watch_steps", "Watchdog", "world_size",
]
