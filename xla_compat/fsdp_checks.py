"""Runtime twins of the static FSDP rules: an optimizer holding parameters FSDP replaced (XLA201),
and gradients reduced a second time on top of FSDP's own reduce-scatter (XLA202).

Nothing here imports torch_xla: a model can only be an FSDP wrapper if the module defining the
wrapper class is already loaded, so the classes are looked up in ``sys.modules``.
"""
from __future__ import annotations

import sys
from typing import Any, Iterator, List, Optional

# (module, class) of the two torch_xla FSDP wrappers: FSDPv1 and FSDPv2 (SPMD)
_WRAPPERS = (
    ("torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel", "XlaFullyShardedDataParallel"),
    ("torch_xla.experimental.spmd_fully_sharded_data_parallel", "SpmdFullyShardedDataParallel"),
)
# XlaFullyShardedDataParallel names each sharded parameter it registers "_fsdp_shard" + separator + name
_SHARD_NAME_PREFIX = "_fsdp_shard"


def is_fsdp_parameter(p: Any) -> bool:
    """Whether ``p`` is a parameter sharded by ``XlaFullyShardedDataParallel`` (FSDPv1), whose
    gradient FSDP reduce-scatters itself. FSDPv1 registers a new ``Parameter`` per (flattened)
    original and marks it with ``_is_sharded = True``, ``_orig_size`` (the full size) and ``_name``
    (``"_fsdp_shard..."``); all three are required. FSDPv2 (SPMD) parameters carry no such mark."""
    return (getattr(p, "_is_sharded", None) is True and hasattr(p, "_orig_size")
            and str(getattr(p, "_name", "")).startswith(_SHARD_NAME_PREFIX))


def _wrapper_classes() -> List[type]:
    classes = []
    for module_name, class_name in _WRAPPERS:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type):
            classes.append(cls)
    return classes


def _fsdp_wrapper(model: Any) -> Optional[str]:
    """The class name of the outermost FSDP wrapper in ``model`` (``model`` itself first), or None."""
    classes = _wrapper_classes()
    if not classes:
        return None
    modules = model.modules() if callable(getattr(model, "modules", None)) else [model]
    for module in modules:
        for cls in classes:
            if isinstance(module, cls):
                return cls.__name__
    return None


def _optimizer_parameters(optimizer: Any) -> Iterator[Any]:
    for group in optimizer.param_groups:
        yield from group["params"]


def check_fsdp_optimizer(model: Any, optimizer: Any) -> None:
    """Raise ``ValueError`` if ``optimizer`` holds parameters that are not ``model``'s current ones.
    The runtime twin of XLA201 (optimizer built before the FSDP wrap): ``XlaFullyShardedDataParallel``
    always replaces the parameters of the module it wraps, and ``SpmdFullyShardedDataParallel`` does
    when it moves a CPU model to the XLA device, so an optimizer built earlier (or from parameters
    saved earlier) silently never updates the model. Call it once after building the optimizer;
    returns None when every optimizer parameter is one of ``model.parameters()`` (by identity).
    ``model`` is the FSDP wrapper, or a module containing FSDP wrappers. A plain model gets the same
    check, since an optimizer over another module's parameters does not train it either; an
    optimizer over a subset of the parameters (e.g. frozen layers left out) passes. Imports no
    torch_xla."""
    current = {id(p) for p in model.parameters()}
    held = list(_optimizer_parameters(optimizer))
    stale = sum(id(p) not in current for p in held)
    if not stale:
        return None
    counted = f"{stale} of the optimizer's {len(held)} parameters"
    wrapper = _fsdp_wrapper(model)
    if wrapper is None:
        raise ValueError(f"check_fsdp_optimizer: {counted} are not parameters of the {type(model).__name__} "
                         "model, so the optimizer never updates the model with them; "
                         "build the optimizer from model.parameters()")
    raise ValueError(f"check_fsdp_optimizer: {counted} are not parameters of the {wrapper} model: FSDP "
                     "replaces a module's parameters when it wraps it, so an optimizer holding the old ones "
                     "never updates the model; build the optimizer after wrapping, from model.parameters()")


def check_not_fsdp_sharded(optimizer: Any, caller: str) -> None:
    """Raise ``ValueError`` when ``optimizer`` holds parameters sharded by FSDPv1 (see XLA202)."""
    held = list(_optimizer_parameters(optimizer))
    sharded = sum(map(is_fsdp_parameter, held))
    if sharded:
        raise ValueError(f"{caller}: {sharded} of the optimizer's {len(held)} parameters are sharded by "
                         "XlaFullyShardedDataParallel, which already reduce-scatters their gradients, so they "
                         "would be reduced twice; call optimizer.step() directly")
