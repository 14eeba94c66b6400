"""XLA209 native-fsdp-on-xla."""
import ast
from typing import Dict, Iterator, Optional

from flake8_xla.analysis.devices import RUNTIME_STARTS
from flake8_xla.analysis.launches import LAUNCH, SPAWN
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.syntax import Parents

NATIVE_FSDP = frozenset({
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard.fully_shard",
})
# references that put work on an XLA device: taking or listing it, launching one process per device
XLA_DEVICE = RUNTIME_STARTS | LAUNCH | SPAWN | {"torch_xla.runtime.xla_device"}
XLA_FSDP_PREFIXES = ("torch_xla.distributed.fsdp", "torch_xla.experimental.spmd_fully_sharded_data_parallel")


class NativeFsdpOnXla(Rule):
    code = "XLA209"
    name = "native-fsdp-on-xla"
    summary = "PyTorch's own FSDP (FullyShardedDataParallel, fully_shard) applied to a model on an XLA device"
    what_it_does = (
        "Flags calls of `torch.distributed.fsdp.FullyShardedDataParallel` and `fully_shard` in a function "
        "(or module body) that also puts work on an XLA device (`torch_xla.device()`, `xm.xla_device()`, "
        "`torch_xla.launch`) and does not use torch_xla's own FSDP wrappers there. Code that picks a "
        "wrapper per backend stays silent."
    )
    why_bad = (
        "PyTorch's FSDP does not support XLA tensors. On torch_xla 2.9 `FullyShardedDataParallel` fails "
        "with `AttributeError: Device 'xla:0' does not have a corresponding backend registered as "
        "'torch.xla'` and `fully_shard` with `RuntimeError: Attempted to call variable.set_data(tensor)`."
    )
    fix_safety = "No automatic fix: the XLA wrappers take different arguments."
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/perf/fsdp_collectives.md",)
    valid = (
        Example("import torch_xla\nfrom torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\n"
                "model = FSDP(Net().to(torch_xla.device()))\n", title="torch_xla's FSDP"),
        Example("import torch_xla\nfrom torch.distributed.fsdp import FullyShardedDataParallel\n"
                "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel\n\n"
                "def wrap(model, on_tpu):\n    if on_tpu:\n"
                "        return XlaFullyShardedDataParallel(model.to(torch_xla.device()))\n"
                "    return FullyShardedDataParallel(model.cuda())\n",
                title="a wrapper chosen per backend"),
        Example("import torch_xla\nfrom torch.distributed.fsdp import FullyShardedDataParallel\n\n"
                "def wrap_for_gpu(model):\n    return FullyShardedDataParallel(model.cuda())\n",
                title="no XLA device in that function"),
    )
    invalid = (
        Example(
            "import torch_xla\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\n"
            "model = FSDP(Net().to(torch_xla.device()))\n",
            expect=((4, 9, "PyTorch's FullyShardedDataParallel does not support XLA devices; use "
                           "XlaFullyShardedDataParallel",
                     "torch.distributed.fsdp.FullyShardedDataParallel is PyTorch's FSDP. Use "
                     "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel, or FSDPv2 "
                     "(SpmdFullyShardedDataParallel) under SPMD."),),
        ),
        Example(
            "import torch_xla.core.xla_model as xm\nfrom torch.distributed.fsdp import fully_shard\n\n"
            "def main():\n    model = Net().to(xm.xla_device())\n    fully_shard(model)\n",
            expect=((6, 5, "PyTorch's fully_shard does not support XLA devices; use XlaFullyShardedDataParallel",
                     "torch.distributed.fsdp.fully_shard is PyTorch's FSDP. Use "
                     "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel, or FSDPv2 "
                     "(SpmdFullyShardedDataParallel) under SPMD."),),
            title="fully_shard (FSDP2)",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        refs = ctx.get(SemanticModel).references
        native = [r for r in refs if r.qualname in NATIVE_FSDP and r.call is not None]
        if not native:
            return
        parents = ctx.get(Parents)
        function: Dict[int, Optional[ast.AST]] = {}  # id(reference node) -> its function
        for ref in refs:
            if not ref.is_import:
                function[id(ref.node)] = parents.function_of(ref.node)
        for ref in native:
            scope = function[id(ref.node)]
            inside = [r for r in refs if not r.is_import and function[id(r.node)] is scope]
            if any(r.qualname.startswith(XLA_FSDP_PREFIXES) for r in inside):
                continue  # this code chooses between the wrappers
            if not any(r.qualname in XLA_DEVICE for r in inside):
                continue
            leaf = ref.qualname.rsplit('.', 1)[-1]
            yield self.diagnostic(
                ctx, ref.call, f"PyTorch's {leaf} does not support XLA devices; use XlaFullyShardedDataParallel",
                help=(f"torch.distributed.fsdp.{leaf} is PyTorch's FSDP. Use "
                      "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel, or FSDPv2 "
                      "(SpmdFullyShardedDataParallel) under SPMD."))
