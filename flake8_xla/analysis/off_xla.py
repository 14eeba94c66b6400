"""Which code never runs on XLA, where the graph rules stay silent: branches on a CUDA-only test, classes
made for CUDA, data collators, functions that set up apex or move tensors to CUDA only, and the file's
functions called only from such code."""
from __future__ import annotations

import ast
import functools
import re
from typing import Dict, List, Set

from .backends import BranchesOffXla
from .callgraph import LocalFunctions
from .device_values import DeviceValues
from .semantic import QualifiedNames, SemanticModel
from .syntax import LOOPS, Fact, NodeIndex, walk

# classes that only run on CUDA (Hugging Face's FlashAttention2 variants, Triton kernels)
CUDA_ONLY_CLASS = re.compile(r"Flash|Cuda|CUDA|Triton")
# data collators run in the DataLoader, on CPU batches, before anything reaches the device
_COLLATE = re.compile(r"(?i)collat")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class OffXla(Fact):
    def __init__(self, ctx) -> None:
        self.ctx = ctx

    @functools.cached_property
    def nodes(self) -> Set[int]:
        """id() of the nodes that never run on XLA (the graph rules stay silent there): branches on a CUDA-only test
        (``if torch.cuda.is_available():``, ``if attn_implementation == "flash_attention_2":``),
        classes made for CUDA (``LlamaFlashAttention2``), functions that use apex (CUDA-only),
        data collators (``DataCollatorForSupervisedDataset``, ``collate_fn``: CPU batches), and the
        file's functions called only from such code (silence is the safe side here)."""
        ctx = self.ctx
        out: Set[int] = set(ctx.get(BranchesOffXla).nodes)
        for cls in ctx.get(NodeIndex).of(ast.ClassDef):
            if CUDA_ONLY_CLASS.search(cls.name) or _COLLATE.search(cls.name):
                out.update(id(n) for n in walk(cls.body))
        for name, defs in self.ctx.get(LocalFunctions).functions.items():
            if _COLLATE.search(name):
                out.update(id(n) for fn in defs for n in walk(fn.body))
        apex = [r.node for r in ctx.get(SemanticModel).references if not r.is_import and r.qualname.startswith("apex.")]
        if apex:  # the function that sets up apex (CUDA-only) is the CUDA path; at module level, its loops
            index, at_top = ctx.get(NodeIndex), set()
            for node in apex:
                scope = index.scope_of(node)
                if type(scope) in _DEFS:
                    out.update(id(n) for n in walk(scope.body))
                else:
                    at_top.add(id(node))
            if at_top:
                for loop in ctx.get(NodeIndex).of(*LOOPS):
                    inside = walk([loop])
                    if any(id(n) in at_top for n in inside):
                        out.update(id(n) for n in inside)
        out.update(self._cuda_functions)
        functions = self.ctx.get(LocalFunctions).functions
        if out and functions:
            sites: Dict[str, List[ast.AST]] = {}
            for call in ctx.get(NodeIndex).of(ast.Call):
                if type(call.func) is ast.Name and call.func.id in functions:
                    sites.setdefault(call.func.id, []).append(call)
            # a function also referred to other than by a call (``xm.add_step_closure(fn, ...)``) may run anywhere
            loads: Dict[str, int] = {}
            for node in ctx.get(NodeIndex).of(ast.Name):
                if node.id in sites and type(node.ctx) is ast.Load:
                    loads[node.id] = loads.get(node.id, 0) + 1
            changed = True
            while changed:  # a helper of a CUDA-only helper is CUDA-only too
                changed = False
                for name, calls in sites.items():
                    defs = functions[name]
                    if id(defs[0].body[0]) not in out and loads.get(name) == len(calls) and \
                            all(id(c) in out for c in calls):
                        out.update(id(n) for fn in defs for n in walk(fn.body))
                        changed = True
        return out

    @functools.cached_property
    def _cuda_functions(self) -> Set[int]:
        """id() of the nodes of functions that move tensors to CUDA (``x.cuda()``, ``.to("cuda")``) and
        show nothing of XLA (no torch_xla name, nothing moved to the XLA device): the CUDA copy of a
        loop in a file that also holds the XLA one."""
        devices, index = self.ctx.get(DeviceValues), self.ctx.get(NodeIndex)
        moving = {}  # the functions that move something to CUDA (their own code, not nested defs)
        for call in index.of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and func.attr in ("cuda", "to") and devices.moves_to_cuda(call):
                scope = index.scope_of(call)
                if type(scope) in _DEFS:
                    moving[id(scope)] = scope
        out: Set[int] = set()
        qualnames = self.ctx.get(QualifiedNames).by_node
        for fn in moving.values():
            nodes = walk(fn.body)
            if any(qualnames.get(id(n), "").startswith(("torch_xla", "xla_compat")) for n in nodes) or \
                    any(type(c) is ast.Call and type(c.func) is ast.Attribute and c.func.attr == "to" and
                        bool(c.args) and devices.is_xla_device(c.args[0]) for c in nodes):
                continue
            out.update(id(n) for n in nodes)
        return out
