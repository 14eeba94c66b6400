"""XLA213 checkpoint-outside-fsdp."""
from typing import Iterator

from flake8_xla.analysis.fsdp import CHECKPOINT_MODULE
from flake8_xla.rules.examples import EXAMPLE_FSDPV2
from flake8_xla.analysis.wraps import FSDP_V1, FsdpWraps
from flake8_xla.analysis.syntax import dotted
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel

FSDP1 = "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP, checkpoint_module\n"
FSDP2 = "from torch_xla.distributed.fsdp import checkpoint_module\n" + EXAMPLE_FSDPV2


class CheckpointOutsideFsdp(Rule):
    code = "XLA213"
    name = "checkpoint-outside-fsdp"
    summary = "Gradient checkpointing applied to an FSDP wrapper instead of the module inside it"
    what_it_does = (
        "Flags `checkpoint_module(FSDP(...))` and `checkpoint_module(FSDPv2(...))` (also inside an "
        "`auto_wrapper_callable` lambda), and `checkpoint_module(x)` where `x` is bound to an FSDP wrapper "
        "earlier in the same function."
    )
    why_bad = (
        "torch_xla checkpoints the module first and wraps the checkpointed module with FSDP: the FSDPv1 "
        "reference scripts say \"wrap with `checkpoint_module` first BEFORE wrapping with FSDP\", the "
        "wrapper's own docs give `auto_wrapper_callable=lambda m, *args, **kwargs: "
        "XlaFullyShardedDataParallel(checkpoint_module(m), *args, **kwargs)`, and the FSDPv2 guide requires "
        "gradient checkpointing to be applied to the module before the wrapper, warning that recursing into "
        "the children otherwise ends in an infinite loop. Checkpointing the wrapper instead replaces the "
        "wrapper's own `forward`, so the backward pass re-runs all of it (parameter gathering and hooks "
        "included) inside the checkpoint: an order the wrappers are not documented to support."
    )
    fix_safety = "No automatic fix yet."
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/test/test_train_mp_mnist_fsdp_with_ckpt.py",
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/fsdp_spmd.md",
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/distributed/fsdp/utils.py",
    )
    valid = (
        Example(FSDP1 + "\nmodel = FSDP(checkpoint_module(Net()))\n", title="checkpoint first, then wrap"),
        Example(FSDP1 + "from torch_xla.distributed.fsdp.wrap import always_wrap_policy\n\n"
                "model = FSDP(Net(), auto_wrap_policy=always_wrap_policy,\n"
                "             auto_wrapper_callable=lambda m, *a, **k: FSDP(checkpoint_module(m), *a, **k))\n",
                title="the documented auto-wrap recipe"),
        Example(FSDP1 + "\ndef build(model):\n    return checkpoint_module(model)\n",
                title="the argument is unknown: silent"),
    )
    invalid = (
        Example(
            FSDP1 + "\nmodel = checkpoint_module(FSDP(Net()))\n",
            expect=((3, 9, "checkpoint_module() is applied to an FSDP wrapper; checkpoint the module first",
                     "Checkpoint the module before wrapping it: FSDP(checkpoint_module(module))."),),
        ),
        Example(
            FSDP2 + "\ndef build(net, mesh):\n    model = FSDPv2(net, mesh=mesh)\n"
            "    model = checkpoint_module(model)\n    return model\n",
            expect=((8, 13, "checkpoint_module() is applied to `model`, already an FSDPv2 wrapper; checkpoint "
                            "the module first",
                     "`model` is wrapped at line 7. Checkpoint the module before wrapping it: "
                     "FSDPv2(checkpoint_module(module), mesh=mesh)."),),
            title="FSDPv2, through a name",
        ),
        Example(
            FSDP1 + "from torch_xla.distributed.fsdp.wrap import always_wrap_policy\n\n"
            "model = FSDP(Net(), auto_wrap_policy=always_wrap_policy,\n"
            "             auto_wrapper_callable=lambda m, *a, **k: checkpoint_module(FSDP(m, *a, **k)))\n",
            expect=((5, 55, "checkpoint_module() is applied to an FSDP wrapper; checkpoint the module first",
                     "Checkpoint the module before wrapping it: FSDP(checkpoint_module(module))."),),
            title="inside an auto_wrapper_callable",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps)
        if not wraps.refs:
            return
        flow = wraps.flow
        kinds = {id(r.call): "FSDP" if r.qualname in FSDP_V1 else "FSDPv2" for r in wraps.refs if r.call}
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or ref.qualname not in CHECKPOINT_MODULE or not call.args:
                continue
            argument = call.args[0]
            label = kinds.get(id(argument))
            if label is not None:
                yield self.diagnostic(ctx, call, f"checkpoint_module() is applied to an {label} wrapper; "
                                                 "checkpoint the module first",
                                      help=f"Checkpoint the module before wrapping it: {_instead(label)}.")
                continue
            name = dotted(argument)
            wrap = wraps.wrapper_at(name, call)
            at = flow.position(call)
            if wrap is not None and at is not None and flow.runs_before(wrap.at, at):
                yield self.diagnostic(
                    ctx, call, f"checkpoint_module() is applied to `{name}`, already an {wrap.label} wrapper; "
                    "checkpoint the module first",
                    help=(f"`{name}` is wrapped at line {wrap.call.lineno}. Checkpoint the module before wrapping it: "
                          f"{_instead(wrap.label)}."))


def _instead(label: str) -> str:
    return "FSDP(checkpoint_module(module))" if label == "FSDP" else "FSDPv2(checkpoint_module(module), mesh=mesh)"
