"""Rank-aware saving: master-only CPU-copy checkpoints and per-rank FSDP shards, written atomically,
to a local path or a URL in object storage (``gs://``, ``s3://``, ``memory://``: :mod:`xla_compat.storage`)."""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Set

from . import _upstream as up
from . import storage
from .collectives import rank as process_rank
from .collectives import rendezvous, to_cpu
from .collectives import world as process_world
from .runtime import local_ordinal


def atomic_save(data: Any, path: str, storage_options: Optional[Dict[str, Any]] = None) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename: no partial file is left.
    A URL (``gs://bucket/run/model.pt``; ``storage_options`` go to fsspec) is uploaded in one
    object write, which is atomic too."""
    import torch

    folder, name = storage.split(path, storage_options)
    if folder.is_local:
        directory = os.path.abspath(folder.path)
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"cannot save checkpoint {path!r}: directory {directory!r} does not exist")
        try:
            pending = folder.begin_write(name, suffix=".pt")
        except OSError as exc:
            raise PermissionError(f"cannot save checkpoint {path!r}: {directory!r} is not writable ({exc})") from exc
    else:
        pending = folder.begin_write(name, suffix=".pt")
    try:
        torch.save(data, pending.file)
    except BaseException:
        pending.discard()
        raise
    pending.commit()


def load(path: str, storage_options: Optional[Dict[str, Any]] = None) -> Any:
    """``torch.load`` onto the CPU of a file written by :func:`save` or :func:`atomic_save`, at a
    local path or a URL (``gs://bucket/run/model.pt``; ``storage_options`` go to fsspec)."""
    return _load(*storage.split(path, storage_options))


def _load(folder: storage.Directory, name: str) -> Any:
    import torch

    with folder.open_read(name) as handle:
        return torch.load(handle, map_location="cpu", weights_only=False)


def save(data: Any, file_or_path: str, master_only: bool = True, global_master: bool = False,
         storage_options: Optional[Dict[str, Any]] = None) -> None:
    """Save CPU copies of ``data`` like ``xm.save`` (same parameters): by default only the local
    master (local ordinal 0; global ordinal 0 with ``global_master``) writes; every rank then waits
    for the others. With ``master_only=False`` every rank writes (give each rank its own path).
    Unlike ``xm.save`` it takes a path only, because it writes atomically; a URL such as
    ``gs://bucket/run/model.pt`` works too (:func:`load` reads it back)."""
    if not isinstance(file_or_path, (str, os.PathLike)):
        raise TypeError(f"xla_compat.save writes atomically, so it needs a path, not {type(file_or_path).__name__}")
    path = os.fspath(file_or_path)
    cpu_data = to_cpu(data)
    writer = (process_rank() if global_master else local_ordinal()) == 0
    if writer or not master_only:
        atomic_save(cpu_data, path, storage_options)
    rendezvous("xla_compat.save")


def shard_path(prefix: str, rank: Optional[int] = None, world: Optional[int] = None) -> str:
    """Per-rank checkpoint path, e.g. ``ckpt_rank-00000001-of-00000004.pth``, the naming that
    ``torch_xla.distributed.fsdp.consolidate_sharded_model_checkpoints`` expects."""
    rank = process_rank() if rank is None else rank
    count = process_world() if world is None else world
    if not 0 <= rank < count:
        raise ValueError(f"rank {rank} is outside the world of {count} processes")
    return f"{prefix}_rank-{rank:08d}-of-{count:08d}.pth"


def save_sharded(model: Any, prefix: str, extra: Optional[Dict[str, Any]] = None,
                 storage_options: Optional[Dict[str, Any]] = None) -> str:
    """Save this rank's FSDP shard with its shard metadata to :func:`shard_path`; every rank
    writes (``master_only=False``), then all ranks wait. Returns the path written."""
    if not hasattr(model, "get_shard_metadata"):
        raise TypeError("save_sharded needs an XlaFullyShardedDataParallel model (it has no get_shard_metadata())")
    rank, count = process_rank(), process_world()
    payload = {"model": model.state_dict(), "shard_metadata": model.get_shard_metadata(),
               "rank": rank, "world": count, **(extra or {})}
    path = shard_path(prefix, rank, count)
    save(payload, path, master_only=False, storage_options=storage_options)
    return path


def _written_worlds(folder: storage.Directory, stem: str) -> Set[int]:
    """The world sizes in the names of the shard files present for the prefix ``stem`` in ``folder``."""
    matches = map(_SHARD_NAME.fullmatch, folder.names())
    return {int(m.group("world")) for m in matches if m and m.group("stem") == stem}


_SHARD_NAME = re.compile(r"(?P<stem>.*)_rank-\d{8}-of-(?P<world>\d{8})\.pth")


def shard_paths(prefix: str, world: int) -> List[str]:
    return [shard_path(prefix, rank, world) for rank in range(world)]


def consolidate_sharded(prefix: str, world: int, save_path: Optional[str] = None,
                        storage_options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Merge the ``world`` shards written by :func:`save_sharded` into one full state dict (run it
    on one rank only, or offline). Upstream: ``consolidate_sharded_state_dicts`` (2.1+)."""
    folder, stem = storage.split(prefix, storage_options)
    present = set(folder.names())
    names = [shard_path(stem, rank, world) for rank in range(world)]
    missing = [path for path, name in zip(shard_paths(prefix, world), names) if name not in present]
    if missing:
        other = _written_worlds(folder, stem) - {world}
        hint = f" (shards on disk were written by a world of {sorted(other)} processes)" if other else ""
        raise FileNotFoundError(f"missing checkpoint shards for a world of {world}: {missing}{hint}")
    shards = [_load(folder, name) for name in names]
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
        atomic_save({"model": full}, save_path, storage_options)
    return full
