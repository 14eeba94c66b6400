"""XLA202 gradient-reduction-with-fsdp."""
import ast
from typing import Iterator

from flake8_xla.rules.examples import EXAMPLE_FSDP, EXAMPLE_XM
from flake8_xla.analysis.syntax import dotted
from flake8_xla.analysis.wraps import FsdpWraps, HelperWraps
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel

HEADER = "import torch\n" + EXAMPLE_XM + EXAMPLE_FSDP

# calls that all-reduce an optimizer's gradients across replicas
REDUCERS = {
    "torch_xla.core.xla_model.optimizer_step": "xm.optimizer_step()",
    "torch_xla.core.xla_model.reduce_gradients": "xm.reduce_gradients()",
    "xla_compat.optimizer_step": "xla_compat.optimizer_step()",
    "xla_compat.reduce_gradients": "xla_compat.reduce_gradients()",
}


class GradientReductionWithFsdp(Rule):
    code = "XLA202"
    name = "gradient-reduction-with-fsdp"
    summary = "Gradients of an FSDP model all-reduced again by optimizer_step or reduce_gradients"
    what_it_does = (
        "Flags `xm.optimizer_step(optimizer)` and `xm.reduce_gradients(optimizer)` (and their "
        "`xla_compat` companions) when `optimizer` was built, in the same function, from the "
        "parameters of a model wrapped with `XlaFullyShardedDataParallel`, also when a helper does either: "
        "returns the wrapper it builds, or passes the optimizer it is given to one of them (a function of the "
        "file, or, under `flake8-xla check`, of another module of the project)."
    )
    why_bad = (
        "Both all-reduce (average) the gradients across replicas, which data-parallel training needs. "
        "FSDP already reduce-scatters the gradients of its sharded parameters, so they are reduced "
        "a second time and the update is wrong, without an error. The FSDP docs: call "
        "`optimizer.step()` directly."
    )
    fix_safety = "No automatic fix: removing the reduction is right only for FSDP-managed parameters."
    valid = (
        Example(HEADER + "\nmodel = FSDP(Net())\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "optimizer.step()\n", title="FSDP: plain optimizer.step()"),
        Example(HEADER + "\nmodel = Net().to('xla')\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "xm.optimizer_step(optimizer)\n", title="data-parallel training without FSDP"),
        Example(HEADER + "\ndef step(optimizer):\n    xm.optimizer_step(optimizer)\n",
                title="an optimizer from elsewhere: unknown, silent"),
    )
    invalid = (
        Example(
            HEADER + "import xla_compat\n\nmodel = FSDP(Net())\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nxla_compat.optimizer_step(optimizer)\n",
            expect=((8, 1, "xla_compat.optimizer_step() all-reduces FSDP gradients again; call "
                           "optimizer.step() directly",
                     "`optimizer` holds the parameters of the FSDP-wrapped `model` (line 6), which FSDP "
                     "already reduce-scatters: they are reduced twice and the update is wrong."),),
        ),
        Example(
            HEADER + "\ndef train(net, loader):\n    model = FSDP(net)\n"
            "    opt = torch.optim.AdamW(model.parameters())\n    for batch in loader:\n"
            "        model(batch).sum().backward()\n        xm.reduce_gradients(opt)\n        opt.step()\n",
            expect=((10, 9, "xm.reduce_gradients() all-reduces FSDP gradients again; call optimizer.step() "
                            "directly",
                     "`opt` holds the parameters of the FSDP-wrapped `model` (line 6), which FSDP already "
                     "reduce-scatters: they are reduced twice and the update is wrong."),),
            title="inside the training loop",
        ),
        Example(
            HEADER + "\ndef shard(module):\n    return FSDP(module)\n\n\ndef step(optimizer):\n"
            "    xm.optimizer_step(optimizer)\n\n\nmodel = shard(Net())\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nstep(optimizer)\n",
            expect=((15, 1, "step() all-reduces FSDP gradients again; call optimizer.step() directly",
                     "`optimizer` holds the parameters of the FSDP-wrapped `model` (line 13), which FSDP "
                     "already reduce-scatters: they are reduced twice and the update is wrong. step() calls "
                     "optimizer_step or reduce_gradients."),),
            title="through helpers",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps, helpers = ctx.get(FsdpWraps), ctx.get(HelperWraps)
        reductions = [(ref.call, REDUCERS[ref.qualname], False, ref.call.args[0])
                      for ref in ctx.get(SemanticModel).references
                      if ref.qualname in REDUCERS and ref.call is not None and ref.call.args]
        if not reductions and not wraps.wraps and getattr(ctx, "project", None) is None:
            return  # a helper of the file that wraps or reduces shows in its own FSDP or reduction call
        if not reductions and not helpers.reductions:
            return
        reductions.extend((call, f"{ast.unparse(call.func)}()", True,
                           call.args[position]) for call, position in helpers.reductions)
        for call, spelled, by_helper, optimizer in reductions:
            name = dotted(optimizer)
            build = wraps.optimizer_named(name, call)
            if build is None:
                continue
            for owner in build.params_of:
                wrap = wraps.wrapper_at(owner, build.call) or helpers.wrapper_at(owner, build.call)
                if wrap is not None and wrap.kind == "v1":
                    yield self.diagnostic(
                        ctx, call, f"{spelled} all-reduces FSDP gradients again; call optimizer.step() directly",
                        help=(f"`{name}` holds the parameters of the FSDP-wrapped `{owner}` (line {wrap.call.lineno}), "
                              "which FSDP already reduce-scatters: they are reduced twice and the update is wrong."
                              + (f" {spelled} calls optimizer_step or reduce_gradients." if by_helper else "")))
                    break
