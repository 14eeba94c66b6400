"""Shared wording and small queries of the graph rules (XLA3xx): where a step region runs, and
how a flagged expression is named in a message."""
from __future__ import annotations

import ast
import os
from typing import List, NamedTuple

from .analysis.hooks import EVALUATION, TRAINING
from .analysis.calls import ProjectCalls
from .analysis.project import FunctionSummary, HostRead
from .analysis.tensors import DEVICE, HOST, HOST_TENSOR, MODULE, TensorFacts
from .analysis.loops import (CALLBACK, COMPILED, DEVICE_LOOP, DYNAMO, FORWARD, MODEL_LOOP, TRAINING_LOOP,
                             called_from, hook_of)

WHERE = {
    TRAINING_LOOP: "on every training step",
    MODEL_LOOP: "on every iteration of a loop that runs the model",
    DEVICE_LOOP: "on every iteration of a loop that works on the device",
    CALLBACK: "in a callback that runs on every iteration (output_transform)",
    FORWARD: "on every forward pass",
    COMPILED: "in a torch_xla.compile step",
    DYNAMO: 'in a torch.compile(backend="openxla") function',
}
_LONGEST = 48
# how values reach step code from other modules: the same words on every graph rule's page that relies on it
ACROSS_MODULES = (
    "A value passed across the project counts too (`flake8-xla check`): a parameter holds what the calls from"
    " code that runs on XLA pass for it, in this module or another, through a constructor into `self` "
    "attributes as well (`Trainer(model, loader, device)`); one such call is enough, since on a TPU that is "
    "the call that runs, and a module that never names torch_xla is linted for the functions such code calls "
    "(and what they call). A function that moves tensors to CUDA and shows nothing of XLA is CUDA code, and a"
    " loop that leaves on its first batch is no step."
)


# evaluation and generation code: a copy to the host there is how results leave the device (XLA307
# reports the per-batch ones); a read of a value stays XLA303
HAND_OFF_REGIONS = frozenset({MODEL_LOOP, DEVICE_LOOP, CALLBACK})


def hands_off(kind: str) -> bool:
    """Evaluation and generation code: loops that run the model or work on the device without a
    training step, library callbacks, and a framework's evaluation hooks (validation_step)."""
    hook = hook_of(kind)
    return kind in HAND_OFF_REGIONS or (hook is not None and hook.phase == EVALUATION)


def where(kind: str) -> str:
    """Where a step region runs, for a message: "on every training step", "in training_step, which
    Lightning runs on every training batch"."""
    hook = hook_of(kind)
    caller = called_from(kind)
    if caller is not None:
        return f"on every step of its caller ({caller})"
    if hook is None:
        return WHERE[kind]
    batch = "training batch" if hook.phase == TRAINING else "batch"
    return f"in {hook.name}, which {hook.framework} runs on every {batch}"


def spelled(node: ast.AST, short: str) -> str:
    """The source of ``node`` for a message, or ``short`` when it is too long to read there."""
    text = ast.unparse(node)
    return text if len(text) <= _LONGEST and "\n" not in text else short


class HelperRead(NamedTuple):
    summary: FunctionSummary
    read: HostRead
    argument: ast.expr  # what the call passes for the parameter it reads

    def label(self) -> str:
        """``accuracy(preds) (.cpu() of its preds at utils.py:36)``: the call, and the helper's line."""
        where = os.path.basename(self.summary.path)
        return (f"{self.summary.name.rsplit('.', 1)[-1]}({spelled(self.argument, '...')}) "
                f"({self.read.how} of its {self.read.parameter} at {where}:{self.read.line})")

    @property
    def copies(self) -> bool:
        return self.read.copies


def helper_reads(ctx, call: ast.Call) -> List[HelperRead]:
    """The host reads a function of another module of the project does on the device tensors this
    call passes it (none without a project: the flake8 plugin lints one file at a time)."""
    summary = ctx.get(ProjectCalls).callee(call, ctx.get(TensorFacts).assigned_value)
    if summary is None or not summary.reads:
        return []
    kind = ctx.get(TensorFacts).kind
    out = []
    for read in summary.reads:
        value = next((k.value for k in call.keywords if k.arg == read.parameter), None)
        if value is None and read.position < len(call.args) and \
                not any(type(a) is ast.Starred for a in call.args[:read.position + 1]):
            value = call.args[read.position]
        # a tensor method the helper calls (.cpu(), .item()) says the argument is a tensor; float()
        # or int() could be of a number: those need a known device tensor
        if value is not None and (kind(value) == DEVICE or read.how.startswith(".") and
                                  kind(value) not in (HOST, HOST_TENSOR, MODULE)):
            out.append(HelperRead(summary, read, value))
    return out
