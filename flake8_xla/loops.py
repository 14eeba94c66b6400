"""Per-step loop detection for the graph rules (XLA3xx), part of the shared semantic layer.

A training loop is a ``for``/``while`` loop whose own body (nested functions and inner loops
excluded) calls ``.backward()``, an optimizer's ``.step()`` or ``xm.optimizer_step``. Code inside
it runs once per step; code after it, in an epoch loop around it, or in an evaluation loop (no
backward, no optimizer step) does not count. A statement under ``if step % N == 0`` (or any
test using ``%``) is throttled: it runs every N steps, which the rules accept for logging and
checkpoints.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterator, List, Sequence

from .semantic import Reference

# calls that mark a loop body as one training step
STEP_MARKERS: FrozenSet[str] = frozenset({"torch_xla.core.xla_model.optimizer_step", "xla_compat.optimizer_step"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass(frozen=True)
class StepLoop:
    loop: ast.AST  # the For/While node
    throttled: FrozenSet[int]  # id() of the nodes under an `if ... % ...:` inside it


def _own_nodes(nodes: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Nodes under ``nodes`` without entering nested functions, classes, lambdas or loops (an
    inner loop is its own step loop; an epoch loop around it is not one)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES + _LOOPS):
            stack.extend(ast.iter_child_nodes(node))


def _marks_a_step(node: ast.AST, qualnames: Dict[int, str]) -> bool:
    if type(node) is not ast.Call:
        return False
    func = node.func
    if qualnames.get(id(func)) in STEP_MARKERS:
        return True
    # loss.backward() / optimizer.step() / opt.step(closure): the receiver's type is unknown, so the
    # method name with no (or one) argument is the signal
    return type(func) is ast.Attribute and (
        (func.attr == "backward" and not node.keywords) or
        (func.attr == "step" and len(node.args) <= 1 and "optim" in ast.unparse(func.value).lower()))


def _throttled(body: Sequence[ast.stmt]) -> FrozenSet[int]:
    out = set()
    for node in _own_nodes(body):
        if type(node) is ast.If and any(type(n) is ast.BinOp and type(n.op) is ast.Mod for n in ast.walk(node.test)):
            out.update(id(n) for n in _own_nodes(node.body))
    return frozenset(out)


def step_loops(tree: ast.AST, references: Sequence[Reference]) -> List[StepLoop]:
    """Every loop in the file that runs a training step per iteration."""
    qualnames = {id(r.node): r.qualname for r in references if not r.is_import}
    loops = []
    for node in ast.walk(tree):
        if isinstance(node, _LOOPS) and any(_marks_a_step(n, qualnames) for n in _own_nodes(node.body)):
            loops.append(StepLoop(node, _throttled(node.body)))
    return loops


def in_step(node: ast.AST, loops: Sequence[StepLoop]) -> bool:
    """Whether ``node`` runs on every step of a training loop (not throttled, not in a nested def)."""
    for step in loops:
        body = step.loop.body
        if any(n is node for n in _own_nodes(body)) and id(node) not in step.throttled:
            return True
    return False
