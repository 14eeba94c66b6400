"""Shared wording and small queries of the graph rules (XLA3xx): where a step region runs, and
how a flagged expression is named in a message."""
from __future__ import annotations

import ast
import copy
import functools
import os
from typing import List, NamedTuple

from flake8_xla.analysis.hooks import EVALUATION, TRAINING
from flake8_xla.analysis.calls import ProjectCalls
from flake8_xla.analysis.project import FunctionSummary, HostRead
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.values import DEVICE, HOST, HOST_TENSOR, MODULE
from flake8_xla.analysis.loops import RegionKind, StepRegion

# where a step region runs, as a message's first line says it; IN_FULL: the help's words where those are short
WHERE = {
    RegionKind.TRAINING_LOOP: "on every training step",
    RegionKind.MODEL_LOOP: "on every model-loop iteration",
    RegionKind.DEVICE_LOOP: "on every device-loop iteration",
    RegionKind.CALLBACK: "in a per-iteration callback",
    RegionKind.FORWARD: "on every forward pass",
    RegionKind.COMPILED: "in a torch_xla.compile step",
    RegionKind.DYNAMO: 'in a torch.compile(backend="openxla") function',
}
IN_FULL = {
    RegionKind.MODEL_LOOP: "on every iteration of a loop that runs the model",
    RegionKind.DEVICE_LOOP: "on every iteration of a loop that works on the device",
    RegionKind.CALLBACK: "in a callback that runs on every iteration (output_transform)",
}
# a loop over a loader that runs the model without a training step (XLA302, XLA307)
EVALUATION_BATCH = "on every evaluation batch"
_LONGEST = 48
BUDGET = 100  # the length a first line keeps to, abridging the expressions it names (fit())
FIRST_LINE = 16  # what an expression may take of a first line whatever the rest of the line takes
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
HAND_OFF_REGIONS = frozenset({RegionKind.MODEL_LOOP, RegionKind.DEVICE_LOOP, RegionKind.CALLBACK})


def hands_off(region: StepRegion) -> bool:
    """Evaluation and generation code: loops that run the model or work on the device without a
    training step, library callbacks, and a framework's evaluation hooks (validation_step)."""
    hook = region.hook
    return region.kind in HAND_OFF_REGIONS or (hook is not None and hook.phase == EVALUATION)


def where(region: StepRegion) -> str:
    """Where a step region runs, for a message's first line: "on every training step", "in training_step"."""
    hook = region.hook
    if region.caller is not None:
        return "on every step of its caller"
    return WHERE[region.kind] if hook is None else f"in {hook.name}"


def where_in_full(region: StepRegion) -> str:
    """Where a step region runs, in the words :func:`where` may shorten: "in training_step, which Lightning
    runs on every training batch", "on every iteration of a loop that runs the model"."""
    hook, caller = region.hook, region.caller
    if caller is not None:
        return f"on every step of its caller ({caller})"
    if hook is not None:
        return f"in {hook.name}, which {hook.framework} runs on every {_batch(hook)}"
    return IN_FULL.get(region.kind, WHERE[region.kind])


def runs(region: StepRegion) -> str:
    """The help's opening sentence on where a step region runs, for the kinds whose first-line phrase
    (:func:`where`) is short for it: "training_step runs on every training batch (Lightning). "; else ""."""
    hook = region.hook
    if hook is not None:
        return f"{hook.name} runs on every {_batch(hook)} ({hook.framework}). "
    full = where_in_full(region)
    return "" if full == where(region) else f"It runs {full}. "


def _batch(hook) -> str:
    return "training batch" if hook.phase == TRAINING else "batch"


def spelled(node: ast.AST, short: str) -> str:
    """The source of ``node`` for a message, or ``short`` when it is too long to read there."""
    text = ast.unparse(node)
    return text if len(text) <= _LONGEST and "\n" not in text else short


def fit(node: ast.AST, short: str, room: int = BUDGET, before: str = "", after: str = "") -> str:
    """``before``, the source of ``node`` and ``after``, within ``room`` characters where abridging the
    source (:func:`abridged`, down to FIRST_LINE characters) can make it so."""
    return before + abridged(node, short, max(FIRST_LINE, room - len(before) - len(after))) + after


def abridged(node: ast.AST, short: str, longest: int = _LONGEST) -> str:
    """The source of ``node`` for a first line: whole when it fits ``longest``, else with parts shortened
    (:func:`_parts`: ``accuracy(...).item()``, ``seq_len > ...``, ``softmax(logits)``): the smallest change
    that makes it fit, else the largest and again; when nothing more can be shortened, what is left if
    :func:`spelled` would show it, else ``short``."""
    def fits(text: str) -> bool:
        return len(text) <= longest and "\n" not in text

    node = copy.deepcopy(node)
    text = ast.unparse(node)
    while not fits(text):
        options = []  # (the text with one part elided, how to elide it)
        for elide in list(_parts(node)):
            undo = elide()
            options.append((ast.unparse(node), elide))
            undo()
        options = [o for o in options if len(o[0]) < len(text)]
        if not options:
            return text if len(text) <= _LONGEST and "\n" not in text else short
        fitting = [o for o in options if fits(o[0])]
        text, elide = max(fitting, key=lambda o: len(o[0])) if fitting else min(options, key=lambda o: len(o[0]))
        elide()
    return text


def _parts(node: ast.AST):
    """What abridged() may shorten: each call's arguments and each operand (written ``...``), and the
    module path of a library function (``torch.nn.functional.softmax`` as ``softmax``); as functions that
    shorten it and return their undo."""
    elided = ast.Constant(...)
    for n in ast.walk(node):
        if type(n) is ast.Call and (n.args or n.keywords) and \
                not (len(n.args) == 1 and type(n.args[0]) is ast.Constant and n.args[0].value is ...):
            yield functools.partial(_elide_arguments, n, elided)
        if type(n) is ast.Call and type(n.func) is ast.Attribute and _module_path(n.func.value):
            yield functools.partial(_elide_module, n)
        for field in _OPERANDS.get(type(n), ()):
            value = getattr(n, field)
            for i in range(len(value)) if isinstance(value, list) else (None,):
                yield functools.partial(_elide_operand, n, field, i, elided)


# the usual names of the modules whose functions a message may name without their path
_MODULES = frozenset({"torch", "nn", "F", "functional", "np", "numpy"})


def _module_path(node: ast.AST) -> bool:
    while type(node) is ast.Attribute:
        node = node.value
    return type(node) is ast.Name and node.id in _MODULES


def _elide_module(call: ast.Call):
    func = call.func
    call.func = ast.Name(func.attr)
    return lambda: setattr(call, "func", func)


def _elide_arguments(call: ast.Call, elided: ast.AST):
    args, keywords = call.args, call.keywords
    call.args, call.keywords = [elided], []
    return lambda: (setattr(call, "args", args), setattr(call, "keywords", keywords))


def _elide_operand(parent: ast.AST, field: str, i, elided: ast.AST):
    value = getattr(parent, field)
    if i is None:
        setattr(parent, field, elided)
        return lambda: setattr(parent, field, value)
    old, value[i] = value[i], elided
    return lambda: value.__setitem__(i, old)


_OPERANDS = {ast.Compare: ("left", "comparators"), ast.BinOp: ("left", "right"), ast.BoolOp: ("values",)}


class HelperRead(NamedTuple):
    summary: FunctionSummary
    read: HostRead
    argument: ast.expr  # what the call passes for the parameter it reads

    def label(self, room: int = BUDGET) -> str:
        """``accuracy(preds)``: the call, for a first line (within ``room`` where it can)."""
        return fit(self.argument, "...", room, f"{self.name}(", ")")

    def detail(self) -> str:
        """``accuracy() calls .cpu() on its preds at utils.py:36.``: the helper's line, for the help."""
        where = os.path.basename(self.summary.path)
        return f"{self.name}() calls {self.read.how} on its {self.read.parameter} at {where}:{self.read.line}."

    @property
    def name(self) -> str:
        return self.summary.name.rsplit('.', 1)[-1]

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
