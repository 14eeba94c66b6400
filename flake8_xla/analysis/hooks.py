"""Framework hooks that run once per batch: the step code a training framework calls for you.

A method is a hook when its class derives (directly, or through classes of the same file) from a
framework's base class and overrides one of the per-batch methods that base calls in its own loop:

- Lightning ``LightningModule``: ``training_step``, ``validation_step``, ``test_step``, ``predict_step``;
- Hugging Face ``transformers.Trainer`` (and subclasses such as ``Seq2SeqTrainer``, TRL's trainers):
  ``training_step``, ``compute_loss``, ``prediction_step``;
- fastai ``Callback``: the per-batch events (``after_batch``, ``after_loss``, ..., v1's ``on_batch_end``);

and a function is one when it is handed to pytorch-ignite's ``Engine(process_function)``, which
calls it on every iteration. Part of the shared semantic layer: the step regions and the value
analysis (a hook's batch argument is device data) both read it.
"""
from __future__ import annotations

import ast
from typing import Callable, Dict, NamedTuple, Optional

from .semantic import QualifiedNames
from .syntax import NodeIndex

TRAINING = "training"
EVALUATION = "evaluation"


class Hook(NamedTuple):
    framework: str  # as named in messages: "Lightning", "Trainer", "ignite's Engine"
    name: str  # the hook: "training_step"
    phase: str  # TRAINING or EVALUATION
    # parameter name -> "device" (the batch), "module" (the model), "host" (an index)
    parameters: Dict[str, str]


_LIGHTNING = {
    "training_step": TRAINING, "validation_step": EVALUATION, "test_step": EVALUATION, "predict_step": EVALUATION,
}
_TRAINER = {"training_step": TRAINING, "compute_loss": TRAINING, "prediction_step": EVALUATION}
# fastai's Callback events that fire on every batch (v2 names, then v1's)
_FASTAI = dict.fromkeys(("before_batch", "after_pred", "after_loss", "before_backward", "after_backward",
                         "before_step", "after_step", "after_batch", "on_batch_begin", "on_loss_begin",
                         "on_backward_begin", "on_backward_end", "on_step_end", "on_batch_end"), TRAINING)
_IGNITE_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine", "ignite.engine.DeterministicEngine",
                             "ignite.engine.deterministic.DeterministicEngine"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# fastai classes whose subclasses are callbacks (a star import leaves them unresolved)
_FASTAI_BASES = frozenset({"Callback", "LearnerCallback", "ParamScheduler", "LRFinder", "Recorder", "AvgSmoothLoss"})


def _positional(fn: ast.AST) -> list:
    args = fn.args
    return [a.arg for a in args.posonlyargs + args.args]


def _lightning_parameters(fn: ast.AST) -> Dict[str, str]:
    """training_step(self, batch, batch_idx, dataloader_idx=0): Lightning moved the batch to the device."""
    names = _positional(fn)[1:]
    out = {names[0]: "device"} if names else {}
    out.update({n: "host" for n in names[1:]})
    return out


def _trainer_parameters(fn: ast.AST) -> Dict[str, str]:
    """compute_loss(self, model, inputs, ...): the model, then the batch on the device."""
    names = _positional(fn)[1:]
    out = {}
    if len(names) >= 1:
        out[names[0]] = "module"
    if len(names) >= 2:
        out[names[1]] = "device"
    return out


class FrameworkHooks:
    """The file's per-batch hooks, by id() of their def."""

    @classmethod
    def from_context(cls, ctx) -> "FrameworkHooks":
        return cls(ctx.get(NodeIndex), ctx.get(QualifiedNames).qualname)

    def __init__(self, index: NodeIndex, qualname: Callable[[ast.AST], Optional[str]]) -> None:
        self.hooks: Dict[int, Hook] = {}
        classes = index.of(ast.ClassDef)
        # ``from fastai.basics import *`` brings Callback without a name we can resolve
        fastai_star = any(n.module and n.module.split(".")[0] == "fastai" for n in index.of(ast.ImportFrom))
        kinds: Dict[str, str] = {}  # class name -> "lightning" / "trainer" / "fastai"
        for cls in classes:
            kind = next((k for k in (_base_kind(b, qualname, fastai_star) for b in cls.bases) if k), None)
            if kind:
                kinds[cls.name] = kind
        changed = True
        while changed:  # subclasses of the file's own LightningModule / Trainer subclasses
            changed = False
            for cls in classes:
                if cls.name not in kinds:
                    inherited = next((kinds[b.id] for b in cls.bases if type(b) is ast.Name and b.id in kinds), None)
                    if inherited:
                        kinds[cls.name] = inherited
                        changed = True
        for cls in classes:
            kind = kinds.get(cls.name)
            if kind is None:
                continue
            table, framework, parameters = {
                "lightning": (_LIGHTNING, "Lightning", _lightning_parameters),
                "trainer": (_TRAINER, "the Trainer", _trainer_parameters),
                "fastai": (_FASTAI, "fastai's Learner", lambda fn: {}),
            }[kind]
            for fn in cls.body:
                if type(fn) in _DEFS and fn.name in table:
                    self.hooks[id(fn)] = Hook(framework, fn.name, table[fn.name], parameters(fn))
        engines = [call for call in index.of(ast.Call) if call.args and qualname(call.func) in _IGNITE_ENGINES]
        if engines:
            by_name: Dict[str, list] = {}
            for fn in index.of(*_DEFS):
                by_name.setdefault(fn.name, []).append(fn)
            for call in engines:
                target = call.args[0]
                for fn in by_name.get(target.id, ()) if type(target) is ast.Name else ():
                    names = _positional(fn)
                    # process_function(engine, batch)
                    params = {names[1]: "device"} if len(names) >= 2 else {}
                    self.hooks.setdefault(id(fn), Hook("ignite's Engine", fn.name, "", params))

    def of(self, fn: ast.AST) -> Optional[Hook]:
        return self.hooks.get(id(fn))


def _base_kind(base: ast.expr, qualname: Callable[[ast.AST], Optional[str]], fastai_star: bool) -> Optional[str]:
    name = qualname(base) or ""
    written = ast.unparse(base).rsplit(".", 1)[-1]
    if name.endswith("LightningModule") or (not name and written == "LightningModule"):
        return "lightning"
    if name.startswith(("transformers.", "trl.")) and name.endswith("Trainer"):
        return "trainer"
    if (name.startswith("fastai.") or not name and fastai_star) and written in _FASTAI_BASES:
        return "fastai"
    return None
