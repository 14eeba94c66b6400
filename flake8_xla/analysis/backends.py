"""Which backend a test selects: ``if torch.cuda.is_available():`` never runs on XLA,
``if is_torch_xla_available():`` does. Part of the shared semantic layer: the step regions leave
code that never runs on XLA alone, and the value analysis ignores what such code assigns."""
from __future__ import annotations

import ast
import functools
import re
from typing import Optional, Set

from .syntax import NodeIndex, dotted, walk

_XLA_WORD = re.compile(r"(?i)xla|tpu")
_CUDA_WORD = re.compile(r"(?i)cuda|gpu|nccl|(?<![a-z])mps(?![a-z])")
# string constants naming a backend that is not XLA (``_attn_implementation == "flash_attention_2"``)
_CUDA_CONSTANT = re.compile(r"(?i)cuda(:\d+)?|gpu|nccl|mps|triton|flash_attention\w*")


def on_xla(test: ast.AST) -> Optional[bool]:
    """True for a test that holds on XLA and not on CUDA (``is_torch_xla_available()``,
    ``device.type == "xla"``, ``not torch.cuda.is_available()``), False for one that never holds
    on XLA (``torch.cuda.is_available()``, ``device.type == "cuda"``), None for anything else."""
    kind = type(test)
    if kind is ast.UnaryOp and type(test.op) is ast.Not:
        inner = on_xla(test.operand)
        return None if inner is None else not inner
    if kind is ast.BoolOp:
        found = [on_xla(v) for v in test.values]
        if type(test.op) is ast.And and False in found:
            return False  # ``... and not on_xla and ...`` never holds on XLA
        return True if type(test.op) is ast.And and True in found else None
    if kind is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) in (ast.Eq, ast.NotEq):
        equal = type(test.ops[0]) is ast.Eq
        for side in (test.left, test.comparators[0]):
            if type(side) is ast.Constant and isinstance(side.value, str):
                if _XLA_WORD.fullmatch(side.value):
                    return equal
                if _CUDA_CONSTANT.fullmatch(side.value):
                    return not equal
        return None
    if kind in (ast.Call, ast.Name, ast.Attribute):
        target = test.func if kind is ast.Call else test
        text = dotted(target) or ast.unparse(target)
        if _XLA_WORD.search(text):
            return True
        return False if _CUDA_WORD.search(text) else None
    return None


class BranchesOffXla:
    """id() of every node in a branch that never runs on XLA: the body of ``if torch.cuda.is_available():``,
    the ``else`` of ``if IS_TPU:`` (statements and conditional expressions), found once per file."""

    @classmethod
    def from_context(cls, ctx) -> "BranchesOffXla":
        return cls(ctx.get(NodeIndex))

    def __init__(self, index: NodeIndex) -> None:
        self.index = index

    @functools.cached_property
    def nodes(self) -> Set[int]:
        out: Set[int] = set()
        for node in self.index.of(ast.If, ast.IfExp):
            xla = on_xla(node.test)
            if xla is not None:
                branch = (node.body if xla is False else node.orelse) if type(node) is ast.If else \
                    [node.body if xla is False else node.orelse]
                out.update(id(n) for n in walk(branch))
        # ``if is_xla(): return xm.xla_device()`` ... ``return torch.device("cpu")``: what follows a branch
        # that XLA takes and always leaves is the other backends' code
        for block in self._blocks():
            for index, stmt in enumerate(block):
                if type(stmt) is ast.If and on_xla(stmt.test) is True and _leaves(stmt.body):
                    out.update(id(n) for n in walk(block[index + 1:]))
                    break
        return out

    def _blocks(self):
        for node in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.While, ast.With, ast.Try):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if block:
                    yield block


def _leaves(body) -> bool:
    """A block that always returns or raises (its last statement does)."""
    return bool(body) and type(body[-1]) in (ast.Return, ast.Raise)
