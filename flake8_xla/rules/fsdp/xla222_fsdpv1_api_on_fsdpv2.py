"""XLA222 fsdpv1-api-on-fsdpv2."""
import ast
from typing import Dict, Iterator, Optional

from flake8_xla.rules.examples import EXAMPLE_FSDP as FSDP1
from flake8_xla.rules.examples import EXAMPLE_FSDPV2 as FSDP2
from flake8_xla.rules.examples import EXAMPLE_SPMD as SPMD
from flake8_xla.analysis.fsdp import CONSOLIDATE
from flake8_xla.analysis.control import FlowFacts
from flake8_xla.analysis.wraps import FSDP_V2, FsdpWraps, Wrap
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.syntax import NodeIndex, dotted
from flake8_xla.analysis.assignments import Assignments

CHECKPOINT_ADVICE = ("Save and load FSDPv2 state with torch.distributed.checkpoint and SPMDSavePlanner/SPMDLoadPlanner "
                     "from torch_xla.experimental.distributed_checkpoint.")
# FSDPv1 method -> (what to do under FSDPv2 instead, why and how in full; {0} is the wrapper's name)
METHODS = {
    "clip_grad_norm_": ("use torch.nn.utils.clip_grad_norm_",
                        "Use torch.nn.utils.clip_grad_norm_({0}.parameters(), max_norm): under SPMD the parameters "
                        "are global tensors."),
    "get_shard_metadata": ("use torch.distributed.checkpoint",
                           "FSDPv2 writes no per-rank shard files. " + CHECKPOINT_ADVICE),
    "no_sync": ("drop it", "SPMD has no separate gradient reduction to skip, so run backward on each micro-batch "
                           "before optimizer.step()."),
}
HEADER = FSDP2 + SPMD + "import torch\n\nxr.use_spmd()\nmesh = xs.get_1d_mesh('fsdp')\n"


class FsdpV1ApiOnFsdpV2(Rule):
    code = "XLA222"
    name = "fsdpv1-api-on-fsdpv2"
    summary = "An FSDPv1-only method or checkpoint helper used with FSDPv2"
    what_it_does = (
        "Flags `.clip_grad_norm_(...)`, `.get_shard_metadata()` and `.no_sync()` called on a name "
        "bound to an `SpmdFullyShardedDataParallel` wrapper (in the same function, or a `self.` "
        "attribute that the class's methods only ever end up assigning an FSDPv2 wrapper), and "
        "`consolidate_sharded_model_checkpoints(...)` in a file whose only FSDP wrapper is FSDPv2. "
        "Files that define a method of the same name stay silent: the wrapped module may provide it."
    )
    why_bad = (
        "These belong to `XlaFullyShardedDataParallel`. FSDPv2 defines none of them and forwards "
        "unknown attributes to the wrapped module, so the call raises `AttributeError: '<Model>' "
        "object has no attribute ...`. FSDPv2 keeps global (SPMD-sharded) tensors, so the plain "
        "PyTorch utilities and distributed checkpointing take their place."
    )
    fix_safety = "No automatic fix: the replacements take different arguments."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/spmd_distributed_checkpoint.md",)
    valid = (
        Example(HEADER + "model = FSDPv2(Net(), mesh=mesh)\nmodel(x).sum().backward()\n"
                "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
                title="the PyTorch utility under SPMD"),
        Example(FSDP1 + "\nmodel = FSDP(Net())\nmodel.clip_grad_norm_(1.0)\n", title="FSDPv1 has the method"),
        Example(HEADER + "class Net(torch.nn.Module):\n    def clip_grad_norm_(self, max_norm):\n        pass\n\n"
                "model = FSDPv2(Net(), mesh=mesh)\nmodel.clip_grad_norm_(1.0)\n",
                title="the wrapped module defines it"),
    )
    invalid = (
        Example(
            HEADER + "model = FSDPv2(Net(), mesh=mesh)\nmodel(x).sum().backward()\nmodel.clip_grad_norm_(1.0)\n",
            expect=((12, 1, "model.clip_grad_norm_() raises AttributeError on FSDPv2; use "
                            "torch.nn.utils.clip_grad_norm_",
                     "`model` is an FSDPv2 wrapper (line 10): SpmdFullyShardedDataParallel has no "
                     "clip_grad_norm_ (an FSDPv1 method). Use "
                     "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm): under SPMD the parameters "
                     "are global tensors."),),
        ),
        Example(
            HEADER + "class Trainer:\n    def __init__(self):\n        self.model = FSDPv2(Net(), mesh=mesh)\n\n"
            "    def step(self, batches):\n        with self.model.no_sync():\n"
            "            self.model(batches[0]).sum().backward()\n",
            expect=((15, 14, "self.model.no_sync() raises AttributeError on FSDPv2; drop it",
                     "`self.model` is an FSDPv2 wrapper (line 12): SpmdFullyShardedDataParallel has no no_sync "
                     "(an FSDPv1 method). SPMD has no separate gradient reduction to skip, so run backward on "
                     "each micro-batch before optimizer.step()."),),
            title="a trainer attribute",
        ),
        Example(
            HEADER + "from torch_xla.distributed.fsdp import consolidate_sharded_model_checkpoints\n\n"
            "model = FSDPv2(Net(), mesh=mesh)\nconsolidate_sharded_model_checkpoints('ckpt/', '_rank-*-of-*.pth')\n",
            expect=((13, 1, "consolidate_sharded_model_checkpoints() is FSDPv1-only; use "
                            "torch.distributed.checkpoint",
                     "It merges the per-rank shard files of FSDPv1, which FSDPv2 never writes. Save and load "
                     "FSDPv2 state with torch.distributed.checkpoint and SPMDSavePlanner/SPMDLoadPlanner from "
                     "torch_xla.experimental.distributed_checkpoint."),),
            title="FSDPv1 checkpoint consolidation",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps)
        if not wraps.refs or not any(wrap.kind == "v2" for wrap in wraps.wraps):
            return
        if all(ref.qualname in FSDP_V2 for ref in wraps.refs):
            for ref in ctx.get(SemanticModel).references:
                if ref.call is not None and ref.qualname in CONSOLIDATE:
                    yield self.diagnostic(
                        ctx, ref.call, "consolidate_sharded_model_checkpoints() is FSDPv1-only; use "
                        "torch.distributed.checkpoint",
                        help="It merges the per-rank shard files of FSDPv1, which FSDPv2 never writes. " +
                        CHECKPOINT_ADVICE)
        index = ctx.get(NodeIndex)
        calls = [node for node in index.of(ast.Call)
                 if type(node.func) is ast.Attribute and node.func.attr in METHODS]
        defined = {node.name for node in index.of(ast.FunctionDef, ast.AsyncFunctionDef)}
        class_of: Dict[int, ast.ClassDef] = {  # id(method) -> its class
            id(stmt): node for node in index.of(ast.ClassDef) for stmt in node.body}
        for call in calls:
            method = call.func.attr
            name = dotted(call.func.value)
            if method in defined or name is None:
                continue
            wrap = wraps.wrapper_at(name, call) or _attribute_wrap(ctx, name, call, class_of)
            if wrap is not None and wrap.kind == "v2":
                instead, detail = METHODS[method]
                yield self.diagnostic(
                    ctx, call, f"{name}.{method}() raises AttributeError on FSDPv2; {instead}",
                    help=(f"`{name}` is an FSDPv2 wrapper (line {wrap.call.lineno}): SpmdFullyShardedDataParallel "
                          f"has no {method} (an FSDPv1 method). {detail.format(name)}"))


def _attribute_wrap(ctx: FileContext, name: str, call: ast.Call, class_of: Dict[int, ast.ClassDef]) -> Optional[Wrap]:
    """The FSDPv2 wrap held by ``self.<attr>`` when every method of the class that assigns the
    attribute ends up assigning that wrapper (e.g. built in ``__init__``, used in ``step``)."""
    at = ctx.get(FlowFacts).position(call)
    if at is None or not name.startswith("self.") or id(at.scope) not in class_of:
        return None
    methods = {id(stmt) for stmt in class_of[id(at.scope)].body}
    last: Dict[int, ast.AST] = {}  # id(method) -> value of its last assignment to the attribute
    for binding in ctx.get(Assignments).bindings:  # in statement order
        if binding.name == name and id(binding.at.scope) in methods:
            if binding.at.scope is at.scope and binding.at.order < at.order:
                return None  # assigned in this method before the call: FsdpWraps.wrapper_at's case
            last[id(binding.at.scope)] = binding.value
    wraps = {id(wrap.call): wrap for wrap in ctx.get(FsdpWraps).wraps}
    found = [wraps.get(id(value)) for value in last.values()]
    if not found or None in found or len({id(w.call) for w in found if w}) != 1:
        return None
    return found[0]
