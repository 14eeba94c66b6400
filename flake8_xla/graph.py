"""Shared wording and small queries of the graph rules (XLA3xx): where a step region runs, and
how a flagged expression is named in a message."""
from __future__ import annotations

import ast

from .analysis.loops import CALLBACK, COMPILED, DEVICE_LOOP, DYNAMO, FORWARD, MODEL_LOOP, TRAINING_LOOP

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


def spelled(node: ast.AST, short: str) -> str:
    """The source of ``node`` for a message, or ``short`` when it is too long to read there."""
    text = ast.unparse(node)
    return text if len(text) <= _LONGEST and "\n" not in text else short
