"""Which device tensors are boolean masks (a comparison, ``~m``, ``m & n``, ``.isnan()``, a bool
dtype), and whether the file can index with one at all. A name is a mask when every assignment
that reaches it gives one (:mod:`flake8_xla.analysis.bindings`)."""
from __future__ import annotations

import ast
import functools
from typing import Dict, Optional

from .bindings import AUGMENTED, VALUE, Binding
from .syntax import dotted, keyword_value
from .tensors import TensorFacts

_BOOL_METHODS = frozenset({"eq", "ne", "gt", "lt", "ge", "le", "greater", "less", "logical_and", "logical_or",
                           "logical_xor", "logical_not", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
                           "isclose", "isin", "signbit", "bool"})


class Masks:
    """Boolean device tensors of one file, computed on demand and memoized."""

    @classmethod
    def from_context(cls, ctx) -> "Masks":
        return cls(ctx.get(TensorFacts))

    def __init__(self, tensors: TensorFacts) -> None:
        self.tensors = tensors
        self.index = tensors.index
        self.qualname = tensors.qualname
        self._masks: Dict[int, bool] = {}

    def is_mask(self, node: Optional[ast.AST]) -> bool:
        """A boolean tensor that may be on the device: a comparison, ``~m``, ``m & n``, ``.isnan()``..."""
        if node is None or not self.tensors.is_device(node):
            return False
        key = id(node)
        if key not in self._masks:
            self._masks[key] = False  # cycles: not a mask
            self._masks[key] = self._mask(node)
        return self._masks[key]

    @functools.cached_property
    def may_have_masks(self) -> bool:
        """Whether some subscript could index with a boolean mask, judged from syntax alone: its
        index is a comparison, ``~x``, ``a & b``, a bool-valued call, or a name assigned one."""
        def mask_like(node: ast.AST) -> bool:
            kind = type(node)
            if kind is ast.Compare:
                return not all(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops)
            if kind is ast.UnaryOp:
                return type(node.op) is ast.Invert
            if kind is ast.BinOp:
                return type(node.op) in (ast.BitAnd, ast.BitOr, ast.BitXor)
            if kind is ast.Call:
                func = node.func
                return (type(func) is ast.Attribute and func.attr in _BOOL_METHODS) or \
                    any(k.arg == "dtype" for k in node.keywords)
            return False

        named = {t.id for node in self.index.of(ast.Assign) if mask_like(node.value)
                 for t in node.targets if type(t) is ast.Name}
        return any(type(node.ctx) is ast.Load and (
            mask_like(node.slice) or (type(node.slice) is ast.Name and node.slice.id in named))
            for node in self.index.of(ast.Subscript))

    def _mask(self, node: ast.AST) -> bool:
        kind = type(node)
        if kind is ast.Compare:
            return not all(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops)
        if kind is ast.UnaryOp:
            return type(node.op) is ast.Invert and self.is_mask(node.operand)
        if kind is ast.BinOp:
            return type(node.op) in (ast.BitAnd, ast.BitOr, ast.BitXor) and \
                (self.is_mask(node.left) or self.is_mask(node.right))
        if kind is ast.Name or (kind is ast.Attribute and (dotted(node) or "").startswith("self.")):
            bound = self.tensors.named(node, dotted(node))[1]
            return bool(bound) and all(self._binding_mask(b) for b in bound)
        if kind is ast.Call:
            qualname = self.qualname(node.func) or ""
            if qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1] in _BOOL_METHODS:
                return True
            func = node.func
            if type(func) is ast.Attribute and qualname == "":
                if func.attr in _BOOL_METHODS:
                    return True
                if func.attr == "to" and node.args and self.qualname(node.args[0]) == "torch.bool":
                    return True
            dtype = keyword_value(node, "dtype")
            return dtype is not None and self.qualname(dtype) == "torch.bool"
        return False

    def _binding_mask(self, binding: Binding) -> bool:
        _, how, a, _ = binding
        if how == VALUE:
            return self.is_mask(a)
        return how == AUGMENTED and type(a.op) in (ast.BitAnd, ast.BitOr) and self.is_mask(a.target)
