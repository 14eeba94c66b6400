"""Lazy access to torch_xla: importing xla_compat never imports torch or torch_xla."""
from __future__ import annotations

import importlib
import inspect
from types import ModuleType
from typing import Callable, Optional

INSTALL_HINT = "pip install 'flake8-xla[runtime]'  (or: pip install torch torch_xla)"


def module(name: str) -> ModuleType:
    """Import a torch_xla module, turning a missing torch_xla into an error that says what to install."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if name.startswith("torch_xla") and _missing_torch_xla(exc):
            raise ImportError(f"xla_compat needs torch_xla, which is not installed: {INSTALL_HINT}") from exc
        raise


def _missing_torch_xla(exc: ImportError) -> bool:
    # torch_xla itself (or torch) is absent; a submodule an older release lacks is another matter
    return getattr(exc, "name", None) in ("torch_xla", "torch")


def torch_xla() -> ModuleType:
    return module("torch_xla")


def xm() -> ModuleType:
    return module("torch_xla.core.xla_model")


def xr() -> ModuleType:
    return module("torch_xla.runtime")


def xmp() -> ModuleType:
    return module("torch_xla.distributed.xla_multiprocessing")


def newest(*candidates: Callable[[], Optional[Callable]]) -> Callable:
    """The first upstream callable that exists, trying the newest API first."""
    for candidate in candidates:
        try:
            found = candidate()
        except AttributeError:  # not in this release; a missing torch_xla still raises ImportError
            continue
        if found is not None:
            return found
    raise NotImplementedError("the installed torch_xla has none of the APIs this replacement dispatches to")


def accepts(fn: Callable, parameter: str) -> bool:
    try:
        return parameter in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
