"""XLA216 fsdpv2-without-spmd."""
import ast
from typing import Iterator, List

from flake8_xla.rules.examples import EXAMPLE_FSDPV2 as FSDP2
from flake8_xla.rules.examples import EXAMPLE_SPMD as SPMD
from flake8_xla.analysis.fsdp import USE_SPMD, runs_as_program, spmd_api
from flake8_xla.analysis.wraps import FSDP_V2
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel


class FsdpV2WithoutSpmd(Rule):
    code = "XLA216"
    name = "fsdpv2-without-spmd"
    summary = "FSDPv2 or mark_sharding in a program that never enables SPMD"
    what_it_does = (
        "Flags the first `SpmdFullyShardedDataParallel` call (or, without one, the first "
        "`xs.mark_sharding`) in a program that never calls `torch_xla.runtime.use_spmd()`, in any "
        "function. Only programs are checked: files with an `if __name__ == \"__main__\":` block or "
        "with the call at top level. A library module, a method of a class that inherits from "
        "another module (a test base class may enable SPMD in `setUpClass`), and files that set "
        "`XLA_USE_SPMD` stay silent."
    )
    why_bad = (
        "FSDPv2 shards with SPMD annotations, which only work on the SPMD virtual device. Without "
        "`use_spmd()` the wrap fails with `RuntimeError: ... Please enable SPMD via "
        "torch_xla.runtime.use_spmd()`. The FSDPv2 guide's own snippet leaves the call out."
    )
    fix_safety = "No automatic fix: use_spmd() belongs at the start of the program, before any device use."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/spmd_basic.md",
                  "https://github.com/pytorch/xla/blob/v2.9.0/examples/fsdp/train_decoder_only_fsdp_v2.py")
    valid = (
        Example(FSDP2 + SPMD + "\nxr.use_spmd()\nmesh = xs.get_1d_mesh('fsdp')\n"
                "model = FSDPv2(Net(), mesh=mesh)\n", title="SPMD enabled first"),
        Example(FSDP2 + SPMD + "\ndef main():\n    xs.set_global_mesh(xs.get_1d_mesh('fsdp'))\n"
                "    model = FSDPv2(Net())\n\nif __name__ == '__main__':\n    xr.use_spmd()\n    main()\n",
                title="use_spmd() anywhere in the file counts, as in the official example"),
        Example(FSDP2 + "\ndef shard(model, mesh):\n    return FSDPv2(model, mesh=mesh)\n",
                title="a library function: its caller may have enabled SPMD"),
        Example(FSDP2 + "import unittest\n\nimport spmd_test_base\n\n"
                "class FsdpTest(spmd_test_base.SpmdTestCase):\n    def test_wrap(self):\n"
                "        FSDPv2(Net(), mesh=self.mesh)\n\nif __name__ == '__main__':\n    unittest.main()\n",
                title="a test whose base class comes from another module"),
    )
    invalid = (
        Example(
            FSDP2 + SPMD + "\nmesh = xs.get_1d_mesh('fsdp')\nmodel = FSDPv2(Net(), mesh=mesh)\n",
            expect=((8, 9, "FSDPv2 fails without SPMD; call torch_xla.runtime.use_spmd() at the start of the "
                           "program",
                     "This program never calls use_spmd(): the wrap fails with RuntimeError (Please enable "
                     "SPMD via torch_xla.runtime.use_spmd())."),),
        ),
        Example(
            FSDP2 + SPMD + "\ndef main():\n    mesh = xs.get_1d_mesh('fsdp')\n"
            "    model = FSDPv2(Net(), mesh=mesh)\n\nif __name__ == '__main__':\n    main()\n",
            expect=((9, 13, "FSDPv2 fails without SPMD; call torch_xla.runtime.use_spmd() at the start of the "
                            "program",
                     "This program never calls use_spmd(): the wrap fails with RuntimeError (Please enable "
                     "SPMD via torch_xla.runtime.use_spmd())."),),
            title="a script with a main function",
        ),
        Example(
            SPMD + "import torch\n\nmesh = xs.Mesh(list(range(8)), (8,), ('data',))\n"
            "x = torch.zeros(16, 128, device='xla')\nxs.mark_sharding(x, mesh, ('data', None))\n",
            expect=((7, 1, "mark_sharding() fails without SPMD; call torch_xla.runtime.use_spmd() at the start "
                           "of the program",
                     "This program never calls use_spmd(): it fails with RuntimeError (Please enable SPMD via "
                     "torch_xla.runtime.use_spmd())."),),
            title="plain SPMD sharding",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps: List[ast.Call] = []
        shardings: List[ast.Call] = []
        for ref in ctx.get(SemanticModel).references:
            qualname = ref.qualname
            if qualname == USE_SPMD:
                return
            call = ref.call
            if call is None:
                continue
            if qualname in FSDP_V2:
                wraps.append(call)
            elif spmd_api(qualname, "mark_sharding", "mark_sharding_with_gradients"):
                shardings.append(call)
        if not (wraps or shardings) or any("XLA_USE_SPMD" in line for line in ctx.lines):
            return
        for calls, what, fails in ((wraps, "FSDPv2", "the wrap fails"), (shardings, "mark_sharding()", "it fails")):
            first = next((c for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset))
                          if runs_as_program(ctx, c)), None)
            if first is not None:
                yield self.diagnostic(
                    ctx, first, f"{what} fails without SPMD; call torch_xla.runtime.use_spmd() at the start of "
                    "the program",
                    help=(f"This program never calls use_spmd(): {fails} with RuntimeError (Please enable SPMD via "
                          "torch_xla.runtime.use_spmd())."))
                return
