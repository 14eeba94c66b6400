"""XLA219 fsdpv2-without-mesh."""
import ast
from typing import Iterator

from flake8_xla.rules.examples import EXAMPLE_FSDPV2 as FSDP2
from flake8_xla.rules.examples import EXAMPLE_SPMD as SPMD
from flake8_xla.analysis.fsdp import runs_as_program, spmd_api
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.wraps import FsdpWraps

HEADER = FSDP2 + SPMD + "\nxr.use_spmd()\n"


class FsdpV2WithoutMesh(Rule):
    code = "XLA219"
    name = "fsdpv2-without-mesh"
    summary = "FSDPv2 without mesh= in a program that never sets a global mesh"
    what_it_does = (
        "Flags an `SpmdFullyShardedDataParallel` call with no `mesh=` keyword in a program that "
        "never calls `xs.set_global_mesh(...)`. Like XLA216 it checks only programs (a `__main__` "
        "block or the wrap at top level): a library function that wraps without `mesh=` relies on "
        "its caller's global mesh, as Hugging Face's Trainer does. Calls that forward `**kwargs`, "
        "and the positional mesh that XLA105 reports, are left alone."
    )
    why_bad = (
        "Without `mesh=`, FSDPv2 falls back to the global mesh; when none is set the wrap raises "
        "`ValueError: No mesh is provided and no global mesh is set. Please provide a mesh.`"
    )
    fix_safety = "No automatic fix: the mesh shape depends on the topology and the other parallelism axes."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/fsdp_spmd.md",)
    valid = (
        Example(HEADER + "mesh = xs.get_1d_mesh('fsdp')\nmodel = FSDPv2(Net(), mesh=mesh)\n",
                title="mesh= given"),
        Example(HEADER + "xs.set_global_mesh(xs.get_1d_mesh('fsdp'))\nmodel = FSDPv2(Net())\n",
                title="a global mesh, as in the official example"),
        Example(FSDP2 + "\ndef shard(model, **kwargs):\n    return FSDPv2(model, **kwargs)\n",
                title="keywords forwarded"),
        Example(FSDP2 + "\ndef shard(model):\n    return FSDPv2(model)\n",
                title="a library function: its caller sets the global mesh"),
    )
    invalid = (
        Example(
            HEADER + "model = FSDPv2(Net())\n",
            expect=((8, 9, "FSDPv2 without mesh= and without a global mesh raises ValueError; pass mesh=mesh",
                     "This program never sets a global mesh: FSDPv2 raises ValueError (No mesh is provided and "
                     "no global mesh is set). Pass mesh=mesh, or call xs.set_global_mesh(mesh) before wrapping."),),
        ),
        Example(
            HEADER + "from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy\n\n"
            "def main():\n    model = FSDPv2(Net(), auto_wrap_policy=transformer_auto_wrap_policy)\n\n"
            "if __name__ == '__main__':\n    main()\n",
            expect=((11, 13, "FSDPv2 without mesh= and without a global mesh raises ValueError; pass mesh=mesh",
                     "This program never sets a global mesh: FSDPv2 raises ValueError (No mesh is provided and "
                     "no global mesh is set). Pass mesh=mesh, or call xs.set_global_mesh(mesh) before wrapping."),),
            title="the official example without its set_global_mesh",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps)
        if not wraps.refs:
            return
        if any(spmd_api(ref.qualname, "set_global_mesh") for ref in ctx.get(SemanticModel).references):
            return
        bare = [wrap.call for wrap in wraps.wraps if wrap.kind == "v2" and len(wrap.call.args) <= 1
                and not any(k.arg in ("mesh", None) for k in wrap.call.keywords)
                and not any(type(a) is ast.Starred for a in wrap.call.args)]
        for call in bare:
            if runs_as_program(ctx, call):
                yield self.diagnostic(
                    ctx, call, "FSDPv2 without mesh= and without a global mesh raises ValueError; pass mesh=mesh",
                    help=("This program never sets a global mesh: FSDPv2 raises ValueError (No mesh is provided and "
                          "no global mesh is set). Pass mesh=mesh, or call xs.set_global_mesh(mesh) before "
                          "wrapping."))
