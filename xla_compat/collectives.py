"""Object collectives and barriers that work with XLA workers.

``torch.distributed.all_gather_object`` fails on the ``xla`` process group ("Expected XLA
tensor"), so these run over a gloo group: the default group when it is gloo, otherwise one
gloo group created once over the same ranks.
"""
from __future__ import annotations

import pickle
from typing import Any, Callable, List, Optional, Sequence

from .runtime import global_ordinal, world_size

_GLOO_GROUP: Optional[Any] = None


def _group():
    """The gloo group to run object collectives on, or None for a single process."""
    global _GLOO_GROUP
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        if world_size() <= 1:
            return None
        raise RuntimeError(
            "xla_compat collectives need a torch.distributed process group: call "
            "torch.distributed.init_process_group('xla', init_method='xla://') (or 'gloo') in every worker first")
    if dist.get_backend() == "gloo":
        return dist.group.WORLD
    if _GLOO_GROUP is None:
        _GLOO_GROUP = dist.new_group(backend="gloo")
    return _GLOO_GROUP


def rank() -> int:
    """This process's rank: the process group's when there is one, else torch_xla's global ordinal."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return global_ordinal()


def world() -> int:
    """The number of processes: the process group's when there is one, else torch_xla's world size.
    Pairs with :func:`rank` so both always come from the same source."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return world_size()


def _check_picklable(obj: Any, what: str) -> None:
    try:
        pickle.dumps(obj)
    except Exception as exc:
        raise TypeError(f"{what}: the payload cannot be pickled ({type(exc).__name__}: {exc})") from exc


def to_cpu(data: Any) -> Any:
    """``data`` with every tensor (in lists, tuples, dicts) copied to the CPU."""
    import torch

    if isinstance(data, torch.Tensor):
        return data.detach().cpu()
    if isinstance(data, dict):
        return type(data)((k, to_cpu(v)) for k, v in data.items())
    if isinstance(data, (list, tuple)) and not hasattr(data, "_fields"):
        return type(data)(to_cpu(v) for v in data)
    if isinstance(data, tuple):  # a namedtuple
        return type(data)(*(to_cpu(v) for v in data))
    return data


def all_gather_object(obj: Any) -> List[Any]:
    """Every rank's ``obj``, in rank order. Tensors are gathered as CPU copies."""
    obj = to_cpu(obj)
    _check_picklable(obj, "all_gather_object")
    group = _group()
    if group is None:
        return [obj]
    import torch.distributed as dist

    gathered: List[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, obj, group=group)
    return gathered


def mesh_reduce(tag: str, data: Any, reduce_fn: Callable[[List[Any]], Any]) -> Any:
    """``reduce_fn`` over every rank's ``data``: a replacement for ``xm.mesh_reduce``. ``tag`` is
    kept for call compatibility (collectives on one group are ordered already)."""
    del tag
    return reduce_fn(all_gather_object(data))


def rendezvous(tag: str = "", payload: bytes = b"", replicas: Sequence[int] = ()) -> List[bytes]:
    """A barrier: every rank waits until all ranks arrive; returns every rank's ``payload``.
    A replacement for ``xm.rendezvous``/``xm.xla_rendezvous`` without the XLA syncs and host
    transfers those perform."""
    del tag
    if replicas:
        raise NotImplementedError("rendezvous over a subset of replicas is not supported; use a process subgroup")
    if not isinstance(payload, (bytes, bytearray)):
        raise TypeError(f"rendezvous payload must be bytes, not {type(payload).__name__}")
    group = _group()
    if group is None:
        return [bytes(payload)]
    import torch.distributed as dist

    if payload:
        return [bytes(p) for p in all_gather_object(bytes(payload))]
    dist.barrier(group=group)
    return [b""] * dist.get_world_size(group)


def do_on_ordinals(target: Callable[..., Any], data: Sequence = (), ordinals: Sequence[int] = (0,)) -> Any:
    """Run ``target(*data)`` on the listed global ordinals only, then wait for all ranks.
    A replacement for ``xm.do_on_ordinals``; returns ``target``'s result there, None elsewhere."""
    count = world()
    outside = sorted(o for o in ordinals if not 0 <= o < count)
    if outside:
        raise ValueError(f"do_on_ordinals: ordinals {outside} are outside the world of {count} processes")
    result = target(*data) if rank() in ordinals else None
    rendezvous("do_on_ordinals")
    return result
