"""Tensor and object collectives and barriers that work with XLA workers.

``torch.distributed.all_gather_object`` fails on the ``xla`` process group ("Expected XLA
tensor"), so these run over a gloo group: the default group when it is gloo, otherwise one
gloo group created once over the same ranks. Without a process group, several processes
exchange objects and wait through torch_xla's own rendezvous, as the ``xm`` helpers they
replace do, so a rewrite to them keeps working where the original did.
"""
from __future__ import annotations

import pickle
from typing import Any, Callable, List, Optional, Sequence

from . import _upstream as up
from .runtime import global_ordinal, wider_process_group, world_size

_GLOO_GROUP: Optional[Any] = None


_NEEDS_GROUP = ("xla_compat collectives need a torch.distributed process group: call "
                "torch.distributed.init_process_group('xla', init_method='xla://') (or 'gloo') in every worker first")


def _process_group():
    """The gloo group to run object collectives on, or None without a torch.distributed process group."""
    global _GLOO_GROUP
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    if dist.get_backend() == "gloo":
        return dist.group.WORLD
    if _GLOO_GROUP is None:
        _GLOO_GROUP = dist.new_group(backend="gloo")
    return _GLOO_GROUP


def _group():
    """The gloo group, or None for a single process; several processes need a process group."""
    group = _process_group()
    if group is None and world_size() > 1:
        raise RuntimeError(_NEEDS_GROUP)
    return group


def _torch_xla_rendezvous(tag: str, payload: bytes) -> List[bytes]:
    """Every process's ``payload`` through torch_xla's rendezvous (XLA collectives, with the syncs and
    host transfers ``xm.rendezvous`` performs): the way without a process group. On the CPU XLA
    collectives do not run across processes, for ``xm.rendezvous`` either."""
    upstream = getattr(up.xm(), "rendezvous", None)
    if upstream is None:  # a release after its planned removal
        raise RuntimeError(_NEEDS_GROUP)
    return upstream(tag, payload)


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


# xm.REDUCE_* values -> torch.distributed.ReduceOp names
_REDUCE_OPS = {"sum": "SUM", "mul": "PRODUCT", "and": "BAND", "or": "BOR", "min": "MIN", "max": "MAX"}


def all_reduce(reduce_type: str, inputs: Any, scale: float = 1.0, groups: Optional[List[List[int]]] = None,
               pin_layout: bool = True) -> Any:
    """``inputs`` reduced over every replica with ``reduce_type`` (``"sum"``, ``"mul"``, ``"and"``,
    ``"or"``, ``"min"``, ``"max"``: the ``xm.REDUCE_*`` values), then multiplied by ``scale``: a
    new tensor for one tensor, in place for a list (returned). Upstream: ``xm.all_reduce``. Under
    a process group wider than XLA's world (CPU or GPU processes over gloo) the reduction runs
    over that group through CPU copies, so data-parallel code also averages on a CPU machine."""
    if reduce_type not in _REDUCE_OPS:
        raise ValueError(f"all_reduce: unknown reduce_type {reduce_type!r}; use one of {sorted(_REDUCE_OPS)}")
    dist = wider_process_group()
    if dist is None:
        return up.xm().all_reduce(reduce_type, inputs, scale=scale, groups=groups, pin_layout=pin_layout)
    if groups:
        raise NotImplementedError("all_reduce over replica groups needs XLA's world; on a wider torch.distributed "
                                  "process group reduce over a subgroup (torch.distributed.new_group) instead")
    import torch

    single = isinstance(inputs, torch.Tensor)
    tensors = [inputs] if single else list(inputs)
    op = getattr(dist.ReduceOp, _REDUCE_OPS[reduce_type])
    reduced = []
    for dtype in dict.fromkeys(t.dtype for t in tensors):  # one exchange per dtype
        same = [t for t in tensors if t.dtype == dtype]
        flat = torch.cat([t.detach().reshape(-1).cpu() for t in same])  # a copy even of CPU tensors
        dist.all_reduce(flat, op=op, group=_group())
        if scale != 1.0:
            flat.mul_(scale)
        reduced += zip(same, flat.split([t.numel() for t in same]))
    if single:
        return reduced[0][1].reshape(inputs.shape).to(inputs.device)
    with torch.no_grad():
        for tensor, values in reduced:
            tensor.copy_(values.reshape(tensor.shape).to(tensor.device))
    return inputs


def all_gather_object(obj: Any) -> List[Any]:
    """Every rank's ``obj``, in rank order. Tensors are gathered as CPU copies. Over the gloo
    group of the torch.distributed process group; without one, several processes exchange it
    through torch_xla's rendezvous, as ``xm.mesh_reduce`` does."""
    obj = to_cpu(obj)
    _check_picklable(obj, "all_gather_object")
    group = _process_group()
    if group is None:
        if world_size() <= 1:
            return [obj]
        return [pickle.loads(p) for p in _torch_xla_rendezvous("all_gather_object", pickle.dumps(obj))]
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
    A replacement for ``xm.rendezvous``/``xm.xla_rendezvous``: over a torch.distributed process
    group it is a gloo barrier, without the XLA syncs and host transfers those perform; without
    one, several processes meet in torch_xla's rendezvous, as ``xm.rendezvous`` does."""
    if replicas:
        raise NotImplementedError("rendezvous over a subset of replicas is not supported; use a process subgroup")
    if not isinstance(payload, (bytes, bytearray)):
        raise TypeError(f"rendezvous payload must be bytes, not {type(payload).__name__}")
    group = _process_group()
    if group is None:
        return [bytes(payload)] if world_size() <= 1 else _torch_xla_rendezvous(tag, bytes(payload))
    import torch.distributed as dist

    if payload:
        return [bytes(p) for p in all_gather_object(bytes(payload))]
    dist.barrier(group=group)
    return [b""] * dist.get_world_size(group)


def do_on_ordinals(target: Callable[..., Any], data: Sequence = (), ordinals: Sequence[int] = (0,)) -> Any:
    """Run ``target(*data)`` on the listed global ordinals only, then wait for all ranks.
    A replacement for ``xm.do_on_ordinals``: as there, ``target`` gets CPU copies of the tensors
    in ``data``; returns ``target``'s result there, None elsewhere."""
    count = world()
    outside = sorted(o for o in ordinals if not 0 <= o < count)
    if outside:
        raise ValueError(f"do_on_ordinals: ordinals {outside} are outside the world of {count} processes")
    result = target(*to_cpu(data)) if rank() in ordinals else None
    rendezvous("do_on_ordinals")
    return result
