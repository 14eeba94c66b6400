"""XLA214 native-checkpoint-on-xla."""
import ast
from typing import Iterator

from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel

NATIVE = frozenset({"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"})
# Using one of these means the file already knows the XLA variant (e.g. it picks one per device).
XLA_CHECKPOINTING = ("torch_xla.utils.checkpoint.", "torch_xla.distributed.fsdp.checkpoint_module",
                     "torch_xla.distributed.fsdp.utils.checkpoint_module")
FAILS = ("fails on XLA tensors (torch 2.9: AttributeError: module 'torch' has no attribute "
         "'xla') and lacks the optimization barrier XLA needs")


class NativeCheckpointOnXla(Rule):
    code = "XLA214"
    name = "native-checkpoint-on-xla"
    summary = "PyTorch's torch.utils.checkpoint used in torch_xla code"
    what_it_does = (
        "Flags calls of `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential` in a module that "
        "imports torch_xla unconditionally at its top level. Stays silent when the module also uses "
        "torch_xla's checkpointing (it then picks one per device) and in compatibility-guarded code."
    )
    why_bad = (
        "torch_xla ships its own copy of the checkpoint function because XLA \"needs to add "
        "`optimization_barrier` before saving the input for the backward\" (torch_xla/utils/checkpoint.py): "
        "without it XLA's common-subexpression elimination merges the recomputation back into the forward "
        "pass, so activations are kept and no memory is saved (pytorch/xla#3455). With torch 2.9 and "
        "torch_xla 2.9 the native function does not even run on XLA tensors: every variant (reentrant or "
        "not, with or without `preserve_rng_state`, and `checkpoint_sequential`) raises `AttributeError: "
        "module 'torch' has no attribute 'xla'` or a RuntimeError that torch has no `xla` device module."
    )
    fix_safety = (
        "No automatic fix yet: `torch_xla.utils.checkpoint.checkpoint` supports only the reentrant mode "
        "(`use_reentrant=False` raises ValueError) and takes no keyword arguments besides "
        "`preserve_rng_state`, so calls may need adjusting."
    )
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/utils/checkpoint.py",
        "https://github.com/pytorch/xla/issues/3455",
        "https://github.com/pytorch/xla/issues/6611",
    )
    valid = (
        Example("import torch_xla\nfrom torch_xla.utils.checkpoint import checkpoint\n\n"
                "def forward(self, x):\n    return checkpoint(self.block, x)\n",
                title="torch_xla's checkpoint"),
        Example("import torch.utils.checkpoint\n\ndef forward(self, x):\n"
                "    return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)\n",
                title="a module that does not use torch_xla"),
        Example("import torch.utils.checkpoint\nimport torch_xla\nimport torch_xla.utils.checkpoint\n\n"
                "def forward(self, x):\n    if x.device.type == 'xla':\n"
                "        return torch_xla.utils.checkpoint.checkpoint(self.block, x)\n"
                "    return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)\n",
                title="picks the implementation per device"),
        Example("from torch.utils.checkpoint import checkpoint\n\ndef forward(self, x):\n"
                "    import torch_xla\n    return checkpoint(self.block, x)\n",
                title="torch_xla imported only inside a function: maybe optional, silent"),
    )
    invalid = (
        Example(
            "import torch_xla\nfrom torch.utils.checkpoint import checkpoint\n\n"
            "def forward(self, x):\n    return checkpoint(self.block, x, use_reentrant=False)\n",
            expect=((5, 12, "torch.utils.checkpoint.checkpoint() is not XLA-aware; use "
                            "torch_xla.utils.checkpoint.checkpoint()",
                     "It fails on XLA tensors (torch 2.9: AttributeError: module 'torch' has no attribute "
                     "'xla') and lacks the optimization barrier XLA needs."),),
        ),
        Example(
            "import torch\nimport torch_xla.core.xla_model as xm\n\n"
            "out = torch.utils.checkpoint.checkpoint_sequential(model, 4, x)\n",
            expect=((4, 7, "torch.utils.checkpoint.checkpoint_sequential() is not XLA-aware; use torch_xla's "
                           "checkpoint()",
                     "It fails on XLA tensors (torch 2.9: AttributeError: module 'torch' has no attribute "
                     "'xla') and lacks the optimization barrier XLA needs. Checkpoint each segment with "
                     "torch_xla.utils.checkpoint.checkpoint(), or wrap the blocks with checkpoint_module() "
                     "from torch_xla.distributed.fsdp."),),
            title="checkpoint_sequential",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        refs = ctx.get(SemanticModel).references
        native = [r for r in refs if r.qualname in NATIVE and r.call is not None and not r.guard]
        if not native:
            return
        top_level = {id(stmt) for stmt in ctx.tree.body if type(stmt) in (ast.Import, ast.ImportFrom)}
        if not any(r.is_import and r.qualname.split(".", 1)[0] == "torch_xla" and id(r.statement) in top_level
                   for r in refs):
            return
        if any(r.qualname.startswith(XLA_CHECKPOINTING) for r in refs):
            return
        for ref in native:
            leaf = ref.qualname.rsplit(".", 1)[-1]
            if leaf == "checkpoint":
                instead, detail = "torch_xla.utils.checkpoint.checkpoint()", ""
            else:
                instead, detail = "torch_xla's checkpoint()", (
                    " Checkpoint each segment with torch_xla.utils.checkpoint.checkpoint(), or wrap the blocks "
                    "with checkpoint_module() from torch_xla.distributed.fsdp.")
            yield self.diagnostic(ctx, ref.call, f"torch.utils.checkpoint.{leaf}() is not XLA-aware; use {instead}",
                                  help=f"It {FAILS}.{detail}")
