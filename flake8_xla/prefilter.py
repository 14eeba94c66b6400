"""What a front-end asks of a file before it lints it, and the guards a lint runs under.

Kept apart from :mod:`flake8_xla.engine` so that a run whose files fail the pre-filter or hit the
result cache never imports the engine (nor the rules, their tables and analyses it loads).
"""
from __future__ import annotations

import contextlib
import gc
import re
from typing import Optional

# A file that matches none of these cannot contain anything a rule reports, unless the project
# says it runs on XLA anyway (``assume_xla``: model code in modules that never import torch_xla).
_PREFILTER = re.compile(r"torch_xla|XRT_|XLA_|GPU_NUM_DEVICES|PJRT_DEVICE")
# A Lightning script that trains on TPUs (``Trainer(accelerator="tpu")``) may never name torch_xla, nor
# a module that takes ``xm`` from ``from transformers.trainer import *``. Asked only after a substring
# test: alternatives in the one pattern above doubled the regex time of a run over cached files.
_TPU_TRAINER = re.compile(r"accelerator\s*=\s*[\"']tpu[\"']|tpu_cores")
_STAR_TRAINER = "from transformers.trainer import *"
# TorchTPU code (torch.tpu, torch_tpu, device "tpu", TORCH_TPU_* variables) under --migrate-to torchtpu
# what code moving to TorchTPU may hold without naming torch_xla: TPU words, the "xla" device by name
_TPU_WORDS = re.compile(r"tpu|TPU|[\"']xla[\"':]")


def might_match(source: str) -> bool:
    return _PREFILTER.search(source) is not None or _STAR_TRAINER in source or \
        (("accelerator" in source or "tpu_cores" in source) and _TPU_TRAINER.search(source) is not None)


def concerns_xla(source: str, assume_xla: bool = False, migrate_to: Optional[str] = None) -> bool:
    """The pre-filter, the one place it is decided: whether a source can hold anything a rule
    reports (it mentions torch_xla), or the project says it runs on XLA anyway (``assume_xla``); when
    the code moves to TorchTPU (``migrate_to``), also code that already speaks of the TPU.
    Front-ends ask once per file and then call the engine with ``assume_xla=True``."""
    return assume_xla or might_match(source) or (migrate_to is not None and _TPU_WORDS.search(source) is not None)


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off while one file is analysed: the analysis allocates many
    short-lived objects that reference counting frees, and each collection it would trigger
    scans every object the host process holds (flake8's trees and tokens too). Restored after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Input nested deeper than Python's parser or our walks can recurse: reported like a file that
# does not parse (E999), never as an internal error.
TOO_DEEP = (RecursionError, MemoryError)


def too_deep_message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: too deeply nested to analyse"
