"""The kinds of value the graph rules (XLA3xx) tell apart: a tensor that may live on the XLA device,
a tensor on the host, a host value (number, string, numpy array, dtype, shape), or a module; and how
an op's operands decide its result. None is the unknown kind: the rules that need a tensor stay
silent on unknowns, the ones that need a host value to rule a report out flag them.

A kind's text (its ``.value``) is what summaries and messages carry; ``format()`` of a ``str``
enum differs between Python versions, so text is always taken through ``.value``.
"""
from __future__ import annotations

import enum
from typing import Iterable, Optional, Sequence


class ValueKind(str, enum.Enum):
    DEVICE = "device"  # a tensor that may be on the XLA device
    HOST_TENSOR = "host-tensor"  # a tensor known not to be on the XLA device (the CPU's, or CUDA's)
    HOST = "host"  # not a tensor: number, string, numpy array, dtype, shape, torch.device ...
    MODULE = "module"  # an nn.Module (calling it gives device tensors)


DEVICE, HOST_TENSOR, HOST, MODULE = ValueKind.DEVICE, ValueKind.HOST_TENSOR, ValueKind.HOST, ValueKind.MODULE
TENSORS = (DEVICE, HOST_TENSOR)

Kind = Optional[ValueKind]

# tensor methods and attributes whose result is a host value
HOST_METHODS = frozenset({
    "item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr",
    "is_contiguous", "is_floating_point", "is_complex", "get_device", "stride", "storage_offset", "dim_order",
    "__len__", "type", "untyped_storage", "is_pinned", "is_shared",
})
HOST_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf", "grad_fn", "layout", "names",
    "is_sparse", "itemsize", "nbytes", "is_quantized", "is_meta",
})
# builtins whose result is a host value
HOST_BUILTINS = frozenset({"float", "int", "bool", "len", "str", "repr", "round", "isinstance", "hash", "id",
                           "type", "format", "range", "callable", "hasattr", "ord", "chr"})


def join(kinds: Iterable[Kind]) -> Kind:
    """The kind of an op over operands of these kinds: a device tensor wins, then a host tensor;
    all host values stay a host value; anything unknown otherwise."""
    kinds = list(kinds)
    if DEVICE in kinds:
        return DEVICE
    if HOST_TENSOR in kinds and all(k in (HOST_TENSOR, HOST) for k in kinds):
        return HOST_TENSOR
    if kinds and all(k == HOST for k in kinds):
        return HOST
    return None


def same(kinds: Sequence[Kind]) -> Kind:
    """The one kind all of ``kinds`` share, else None (unknown)."""
    return kinds[0] if kinds and all(k == kinds[0] for k in kinds) else None
