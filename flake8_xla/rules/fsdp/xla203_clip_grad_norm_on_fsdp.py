"""XLA203 clip-grad-norm-on-fsdp."""
import ast
from typing import Iterator

from flake8_xla.rules.examples import EXAMPLE_FSDP
from flake8_xla.analysis.syntax import dotted
from flake8_xla.analysis.wraps import FsdpWraps, HelperWraps
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel

HEADER = "import torch\n" + EXAMPLE_FSDP
CLIPPERS = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_"})


class ClipGradNormOnFsdp(Rule):
    code = "XLA203"
    name = "clip-grad-norm-on-fsdp"
    summary = "torch.nn.utils.clip_grad_norm_ over an FSDP model's sharded parameters"
    what_it_does = (
        "Flags `torch.nn.utils.clip_grad_norm_(model.parameters(), ...)` when `model` is bound, in the "
        "same function, to an `XlaFullyShardedDataParallel` wrapper: built there, or returned by a helper that "
        "builds one (a function of the file, or, under `flake8-xla check`, of another module of the project; "
        "one such return is enough, the others are other backends')."
    )
    why_bad = (
        "Each rank holds only a shard of every gradient, so the generic utility computes a per-shard "
        "norm and every rank clips by a different factor: the model diverges across ranks, silently. "
        "The FSDP wrapper's own `clip_grad_norm_` all-reduces the norm first; it must be called on the "
        "root (outermost) wrapper, on all ranks."
    )
    fix_safety = "No automatic fix yet: the method takes the same `max_norm` and `norm_type` but not the parameters."
    valid = (
        Example(HEADER + "\nmodel = FSDP(Net())\nloss = model(x).sum()\nloss.backward()\n"
                "model.clip_grad_norm_(1.0)\n", title="the FSDP method on the root wrapper"),
        Example(HEADER + "\nmodel = Net().to('xla')\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
                title="no FSDP"),
    )
    invalid = (
        Example(
            HEADER + "\nmodel = FSDP(Net())\nloss = model(x).sum()\nloss.backward()\n"
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
            expect=((7, 1, "clip_grad_norm_ clips each FSDP shard by its own norm; call "
                           "model.clip_grad_norm_(max_norm)",
                     "torch.nn.utils.clip_grad_norm_ gets the parameters of `model`, FSDP-wrapped at line 4: "
                     "each rank clips its gradient shard by a different factor. Call the root FSDP wrapper's "
                     "clip_grad_norm_, on every rank."),),
        ),
        Example(
            HEADER + "from torch.nn.utils import clip_grad_norm_\n\ndef step(net, opt):\n"
            "    model = FSDP(net)\n    model(x).sum().backward()\n"
            "    clip_grad_norm_(model.parameters(), max_norm=0.5)\n    opt.step()\n",
            expect=((8, 5, "clip_grad_norm_ clips each FSDP shard by its own norm; call "
                           "model.clip_grad_norm_(max_norm)",
                     "torch.nn.utils.clip_grad_norm_ gets the parameters of `model`, FSDP-wrapped at line 6: "
                     "each rank clips its gradient shard by a different factor. Call the root FSDP wrapper's "
                     "clip_grad_norm_, on every rank."),),
            title="imported by name",
        ),
        Example(
            HEADER + "\ndef shard(module):\n    if not on_tpu():\n        return module\n    return FSDP(module)\n\n\n"
            "model = shard(Net())\nmodel(x).sum().backward()\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
            expect=((12, 1, "clip_grad_norm_ clips each FSDP shard by its own norm; call "
                            "model.clip_grad_norm_(max_norm)",
                     "torch.nn.utils.clip_grad_norm_ gets the parameters of `model`, FSDP-wrapped at line 10: "
                     "each rank clips its gradient shard by a different factor. Call the root FSDP wrapper's "
                     "clip_grad_norm_, on every rank."),),
            title="a wrapper returned by a helper",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps)
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or ref.qualname not in CLIPPERS or not call.args:
                continue
            params = call.args[0]  # exactly `model.parameters()`: anything else is unknown
            if type(params) is not ast.Call or type(params.func) is not ast.Attribute or \
                    params.func.attr != "parameters":
                continue
            owner = dotted(params.func.value)
            wrap = wraps.wrapper_at(owner, call) or ctx.get(HelperWraps).wrapper_at(owner, call)
            if wrap is not None and wrap.kind == "v1":
                yield self.diagnostic(
                    ctx, call, f"clip_grad_norm_ clips each FSDP shard by its own norm; call "
                    f"{owner}.clip_grad_norm_(max_norm)",
                    help=(f"torch.nn.utils.clip_grad_norm_ gets the parameters of `{owner}`, FSDP-wrapped at line "
                          f"{wrap.call.lineno}: each rank clips its gradient shard by a different factor. Call the "
                          "root FSDP wrapper's clip_grad_norm_, on every rank."))
