"""Checkpoints that survive preemption: save every N steps, keep K, never load a half-written one.

Layout: ``DIRECTORY/step-00000120/rank-00000.pt`` per rank, and ``DIRECTORY/step-00000120/COMMITTED``,
written by rank 0 after every rank's file is in place. A step without ``COMMITTED`` (a process killed
while writing) is never restored and is removed by the next save. ``DIRECTORY`` may be a URL
(``gs://bucket/run``, ``s3://...``, ``memory://...``; :mod:`xla_compat.storage`): object stores have
no rename, so each file is uploaded whole in one object write and ``COMMITTED`` last. On SIGTERM (how a preemptible TPU
VM is told to stop) the manager only records the request; at the next :meth:`CheckpointManager.step`
every rank agrees on it (one all-reduce over the gloo group when there are several processes),
saves that step, and the process exits with :data:`PREEMPTED_EXIT_CODE`.
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import signal
import sys
import threading
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from . import _upstream as up
from . import storage
from .checkpoint import _load, atomic_save
from .collectives import _group, rendezvous, to_cpu
from .collectives import rank as process_rank
from .exits import PREEMPTED_EXIT_CODE, record_exit

COMMITTED = "COMMITTED"
DISTRIBUTED = "distributed"  # the torch.distributed.checkpoint folder of an SPMD model's step
_STEP_DIR = re.compile(r"step-(\d{8})")
_requested = threading.Event()  # a preemption signal arrived in this process
_managers = 0  # CheckpointManagers that will act on it
_caught: set = set()


def catch_preemption(signals: Sequence[int] = (signal.SIGTERM,)) -> None:
    """Catch the preemption signals in this process (call it on the main thread, before starting
    the threads that train: torch_xla's launchers run each device's function in a thread, where
    Python cannot install signal handlers). While no CheckpointManager exists the signal keeps its
    default effect; once one does, it only records the request. ``xla_compat.launch(log_dir=...)``
    calls this in every worker."""
    for signum in signals:
        signal.signal(signum, _on_signal)
        _caught.add(signum)


def _on_signal(signum: int, frame: Any) -> None:
    if _managers == 0:  # nothing will save: stop as if uncaught
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _requested.set()  # acted on at the next step boundary, where the state is consistent


class CheckpointManager:
    """Periodic, atomic, preemption-aware checkpoints of one training job.

    ``restore()`` returns ``(step, state)`` of the newest committed checkpoint (this rank's state)
    or None (for an SPMD model, ``restore(into=model.state_dict())`` loads it in place); call
    ``step(n, state_fn)`` after each training step: it saves ``state_fn()`` every ``save_every``
    steps and, once a preemption signal (SIGTERM) arrived on any rank, saves that step and exits
    with status 75 (``xla_compat.resume.PREEMPTED_EXIT_CODE``: restart the job to resume). An
    FSDPv1 model's state (with its ``get_shard_metadata()``) is saved per rank (:meth:`consolidate`
    merges it); an SPMD-sharded one with distributed checkpointing. Several processes need a
    torch.distributed process group (as the collectives do). ``directory`` may be a URL such as
    ``gs://bucket/run`` (install gcsfs; ``storage_options`` go to fsspec): see :mod:`xla_compat.storage`."""

    def __init__(self, directory: str, save_every: int, keep: int = 2,
                 signals: Sequence[int] = (signal.SIGTERM,), exit_code: int = PREEMPTED_EXIT_CODE,
                 storage_options: Optional[Dict[str, Any]] = None) -> None:
        if save_every < 1 or keep < 1:
            raise ValueError(f"save_every and keep must be at least 1, got {save_every} and {keep}")
        self.directory = directory
        self.storage_options = storage_options
        self.location = storage.location(directory, storage_options)  # an unknown scheme fails here, not at a save
        self.save_every = save_every
        self.keep = keep
        self.exit_code = exit_code
        missing = set(signals) - _caught
        if missing and threading.current_thread() is threading.main_thread():
            catch_preemption(sorted(missing))
        elif missing:
            warnings.warn("CheckpointManager cannot catch SIGTERM from this thread (torch_xla's launcher runs each "
                          "device in a thread): a preemption will not be saved; start the job with "
                          "xla_compat.launch(fn, log_dir=...) or call xla_compat.resume.catch_preemption() on the "
                          "main thread first", RuntimeWarning, stacklevel=2)
        global _managers
        _managers += bool(signals)

    # -- restore ---------------------------------------------------------------------------------
    def committed_steps(self) -> list:
        """The steps with a complete checkpoint, oldest first."""
        steps = [int(m.group(1)) for m in map(_STEP_DIR.fullmatch, self.location.names()) if m]
        return sorted(s for s in steps if self._step_dir(s).exists(COMMITTED))

    def restore(self, into: Any = None) -> Optional[Tuple[int, Any]]:
        """``(step, state)`` of the newest committed checkpoint for this rank, or None. A checkpoint
        of an SPMD model (written with distributed checkpointing) is loaded in place into ``into``,
        a state dict of the same structure whose tensors carry the shardings wanted."""
        import torch

        steps = self.committed_steps()
        if not steps:
            return None
        folder = self._step_dir(steps[-1])
        if DISTRIBUTED in folder.names():
            if into is None:
                raise TypeError(f"{folder} holds a distributed (SPMD) checkpoint: pass restore(into=state_dict), "
                                "the state dict of the sharded model to load it into")
            dcp, planners = _distributed_checkpoint()
            load = getattr(dcp, "load", None) or dcp.load_state_dict  # torch 2.1 has only the latter
            load(state_dict=into, storage_reader=_storage_reader(dcp, folder.child(DISTRIBUTED)),
                 planner=planners.SPMDLoadPlanner(), **_no_dist(load))
            return steps[-1], into
        with folder.open_read(f"rank-{process_rank():05d}.pt") as handle:
            return steps[-1], torch.load(handle, weights_only=False)

    def consolidate(self, step: Optional[int] = None, key: str = "model") -> Any:
        """The whole model of an FSDPv1 checkpoint: every rank's ``state[key]`` shard merged with
        ``state["shard_metadata"]`` (run it in one process, or offline). Upstream:
        ``consolidate_sharded_state_dicts``."""
        steps = self.committed_steps()
        step = steps[-1] if step is None else step
        if step not in steps:
            raise FileNotFoundError(f"no committed checkpoint of step {step} in {self.directory} (committed: {steps})")
        folder = self._step_dir(step)
        files = sorted(name for name in folder.names() if name.startswith("rank-"))
        shards = [_load(folder, name) for name in files]
        if not all(isinstance(s, dict) and key in s and "shard_metadata" in s for s in shards):
            raise ValueError(f"{folder} does not hold FSDP shards: each rank's state needs '{key}' and "
                             "'shard_metadata' (model.get_shard_metadata())")
        fsdp = up.module("torch_xla.distributed.fsdp")
        return fsdp.consolidate_sharded_state_dicts([s[key] for s in shards], shards[0]["shard_metadata"])

    # -- save ------------------------------------------------------------------------------------
    def reached_preemption(self) -> bool:
        """Whether any rank was asked to stop (collective when there are several processes)."""
        group = _group()
        if group is None:
            return _requested.is_set()
        import torch
        import torch.distributed as dist

        flag = torch.tensor([int(_requested.is_set())])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
        return bool(flag.item())

    def step(self, step: int, state_fn: Callable[[], Any]) -> None:
        """After training step ``step``: save every ``save_every`` steps; on preemption save this
        step (if not saved already) and exit with ``exit_code``."""
        preempted = self.reached_preemption()
        if step % self.save_every == 0 or preempted:
            self.save(step, state_fn())
        if preempted:
            record_exit(self.exit_code)  # for torchrun, which cannot see it after its own SIGTERM
            sys.stdout.flush()
            sys.stderr.flush()
            sys.exit(self.exit_code)

    def save(self, step: int, state: Any) -> str:
        """Write this rank's ``state`` for ``step``; rank 0 commits once every rank has written."""
        folder = self._step_dir(step)
        folder.makedirs()
        if _is_spmd(state):  # each process writes its own shards; gathering them on every host would not scale
            dcp, planners = _distributed_checkpoint()
            write = getattr(dcp, "save", None) or dcp.save_state_dict  # torch 2.1 has only the latter
            write(state_dict=state, storage_writer=_storage_writer(dcp, folder.child(DISTRIBUTED)),
                  planner=planners.SPMDSavePlanner(), **_no_dist(write))
        else:
            atomic_save(to_cpu(state), folder.join(f"rank-{process_rank():05d}.pt"), self.storage_options)
        rendezvous("xla_compat.CheckpointManager.save")  # every rank's file is in place
        if process_rank() == 0:
            folder.write_bytes(COMMITTED, f"{step}\n".encode())  # last: a step is whole once this exists
            self._prune(step)
        rendezvous("xla_compat.CheckpointManager.commit")
        return folder.url

    def _prune(self, newest: int) -> None:
        """Keep the ``keep`` newest committed steps; drop older ones and any uncommitted step."""
        committed = self.committed_steps()
        doomed = set(committed[:-self.keep])
        for name in self.location.names():
            match = _STEP_DIR.fullmatch(name)
            if match and int(match.group(1)) != newest and (int(match.group(1)) in doomed
                                                            or int(match.group(1)) not in committed):
                self.location.remove(name)

    def _step_dir(self, step: int) -> storage.Directory:
        return self.location.child(f"step-{step:08d}")


def _is_spmd(state: Any) -> bool:
    """Whether ``state`` holds an XLA tensor sharded with SPMD."""
    import torch

    tensors = [t for t in _leaves(state) if isinstance(t, torch.Tensor) and t.device.type == "xla"]
    if not tensors:
        return False
    spec = up.torch_xla()._XLAC._get_xla_sharding_spec
    return any(spec(t) for t in tensors)


def _leaves(data: Any) -> list:
    if isinstance(data, dict):
        return [leaf for value in data.values() for leaf in _leaves(value)]
    if isinstance(data, (list, tuple)):
        return [leaf for value in data for leaf in _leaves(value)]
    return [data]


def _no_dist(function: Callable) -> dict:
    """``no_dist=True`` without a process group, where the function takes it (torch 2.2-2.5's
    ``save``/``load`` do not; they infer it)."""
    return {"no_dist": True} if _group() is None and up.accepts(function, "no_dist") else {}


def _storage_writer(dcp: Any, folder: storage.Directory) -> Any:
    """A distributed-checkpoint writer for ``folder``: the file-system one for a local directory,
    the fsspec one for a URL."""
    if folder.is_local:
        return dcp.FileSystemWriter(folder.path)
    writer = _fsspec_storage("FsspecWriter")
    # an fsspec stream has no file descriptor to fsync: some releases crash, others os.sync() the
    # whole machine; an object upload is durable once it has returned
    no_sync = {"sync_files": False} if up.accepts(writer, "sync_files") else {}
    return writer(folder.url, **no_sync, **_fsspec_options(writer, folder))


def _storage_reader(dcp: Any, folder: storage.Directory) -> Any:
    if folder.is_local:
        return dcp.FileSystemReader(folder.path)
    reader = _fsspec_storage("FsspecReader")
    return reader(folder.url, **_fsspec_options(reader, folder))


def _fsspec_storage(name: str) -> Any:
    """torch's fsspec writer or reader of distributed checkpoints, wherever this release keeps it."""
    import torch

    for module in ("torch.distributed.checkpoint._fsspec_filesystem", "torch.distributed.checkpoint"):
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    raise NotImplementedError(f"torch {torch.__version__} has no {name} (torch.distributed.checkpoint."
                              "_fsspec_filesystem): save the SPMD checkpoint to a local directory")


def _fsspec_options(storage_class: Any, folder: storage.RemoteDirectory) -> dict:
    """The directory's fsspec ``storage_options``, where the writer or reader passes them on."""
    if not folder.storage_options:
        return {}
    takes_options = any(p.kind is inspect.Parameter.VAR_KEYWORD
                        for p in inspect.signature(storage_class).parameters.values())
    if not takes_options:
        import torch

        raise NotImplementedError(f"torch {torch.__version__}'s {storage_class.__name__} takes no storage options "
                                  "(torch 2.7 and later do): set them through fsspec's configuration instead "
                                  "(FSSPEC_<PROTOCOL>_<OPTION> environment variables, such as FSSPEC_GS_TOKEN)")
    return dict(folder.storage_options)


def _distributed_checkpoint() -> tuple:
    """``torch.distributed.checkpoint`` and torch_xla's SPMD planners, where the release has them."""
    import torch.distributed.checkpoint as dcp

    try:
        planners = up.module("torch_xla.experimental.distributed_checkpoint")
    except ImportError as exc:
        raise NotImplementedError(f"torch_xla {up.torch_xla().__version__} has no distributed checkpointing "
                                  "(torch_xla.experimental.distributed_checkpoint): an SPMD model cannot be "
                                  "checkpointed by shard") from exc
    return dcp, planners
