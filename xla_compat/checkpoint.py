"""Rank-aware saving: master-only CPU-copy checkpoints and per-rank FSDP shards, written atomically."""
from __future__ import annotations

import glob
import os
import re
import tempfile
from typing import Any, Dict, List, Optional, Set

from . import _upstream as up
from .collectives import rank as process_rank
from .collectives import rendezvous, to_cpu
from .collectives import world as process_world
from .runtime import local_ordinal


def atomic_save(data: Any, path: str) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename: no partial file is left."""
    import torch

    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot save checkpoint {path!r}: directory {directory!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=directory)
    except OSError as exc:
        raise PermissionError(f"cannot save checkpoint {path!r}: {directory!r} is not writable ({exc})") from exc
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(data, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(data: Any, file_or_path: str, master_only: bool = True, global_master: bool = False) -> None:
    """Save CPU copies of ``data`` like ``xm.save`` (same parameters): by default only the local
    master (local ordinal 0; global ordinal 0 with ``global_master``) writes; every rank then waits
    for the others. With ``master_only=False`` every rank writes (give each rank its own path).
    Unlike ``xm.save`` it takes a path only, because it writes atomically."""
    if not isinstance(file_or_path, (str, os.PathLike)):
        raise TypeError(f"xla_compat.save writes atomically, so it needs a path, not {type(file_or_path).__name__}")
    path = os.fspath(file_or_path)
    cpu_data = to_cpu(data)
    writer = (process_rank() if global_master else local_ordinal()) == 0
    if writer or not master_only:
        atomic_save(cpu_data, path)
    rendezvous("xla_compat.save")


def shard_path(prefix: str, rank: Optional[int] = None, world: Optional[int] = None) -> str:
    """Per-rank checkpoint path, e.g. ``ckpt_rank-00000001-of-00000004.pth``, the naming that
    ``torch_xla.distributed.fsdp.consolidate_sharded_model_checkpoints`` expects."""
    rank = process_rank() if rank is None else rank
    count = process_world() if world is None else world
    if not 0 <= rank < count:
        raise ValueError(f"rank {rank} is outside the world of {count} processes")
    return f"{prefix}_rank-{rank:08d}-of-{count:08d}.pth"


def save_sharded(model: Any, prefix: str, extra: Optional[Dict[str, Any]] = None) -> str:
    """Save this rank's FSDP shard with its shard metadata to :func:`shard_path`; every rank
    writes (``master_only=False``), then all ranks wait. Returns the path written."""
    if not hasattr(model, "get_shard_metadata"):
        raise TypeError("save_sharded needs an XlaFullyShardedDataParallel model (it has no get_shard_metadata())")
    rank, count = process_rank(), process_world()
    payload = {"model": model.state_dict(), "shard_metadata": model.get_shard_metadata(),
               "rank": rank, "world": count, **(extra or {})}
    path = shard_path(prefix, rank, count)
    save(payload, path, master_only=False)
    return path


def _written_worlds(prefix: str) -> Set[int]:
    """The world sizes in the names of the shard files present for ``prefix``."""
    names = glob.glob(glob.escape(prefix) + "_rank-*-of-*.pth")
    return {int(m.group(1)) for m in map(_SHARD_NAME.search, names) if m}


_SHARD_NAME = re.compile(r"_rank-\d{8}-of-(\d{8})\.pth$")


def shard_paths(prefix: str, world: int) -> List[str]:
    return [shard_path(prefix, rank, world) for rank in range(world)]


def consolidate_sharded(prefix: str, world: int, save_path: Optional[str] = None) -> Dict[str, Any]:
    """Merge the ``world`` shards written by :func:`save_sharded` into one full state dict (run it
    on one rank only, or offline). Upstream: ``consolidate_sharded_state_dicts`` (2.1+)."""
    import torch

    missing = [p for p in shard_paths(prefix, world) if not os.path.exists(p)]
    if missing:
        other = _written_worlds(prefix) - {world}
        hint = f" (shards on disk were written by a world of {sorted(other)} processes)" if other else ""
        raise FileNotFoundError(f"missing checkpoint shards for a world of {world}: {missing}{hint}")
    shards = [torch.load(p, map_location="cpu", weights_only=False) for p in shard_paths(prefix, world)]
    for expected_rank, (path, shard) in enumerate(zip(shard_paths(prefix, world), shards)):
        if "shard_metadata" not in shard or "model" not in shard:
            raise ValueError(f"{path} is not a shard written by save_sharded (no 'model'/'shard_metadata')")
        written = (shard.get("rank", expected_rank), shard.get("world", world))
        if written != (expected_rank, world):
            raise ValueError(f"{path} holds rank {written[0]} of a world of {written[1]}, "
                             f"not rank {expected_rank} of {world}: the files were renamed or mixed up")
    fsdp = up.module("torch_xla.distributed.fsdp")
    full = fsdp.consolidate_sharded_state_dicts([s["model"] for s in shards], shards[0]["shard_metadata"])
    if save_path is not None:
        atomic_save({"model": full}, save_path)
    return full
