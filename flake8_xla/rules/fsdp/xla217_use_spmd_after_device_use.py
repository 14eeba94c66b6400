"""XLA217 use-spmd-after-device-use."""
import ast
from typing import Iterator, List

from flake8_xla.analysis.devices import XLA_DEVICE_CALLS, placements
from flake8_xla.analysis.control import FlowFacts, within
from flake8_xla.analysis.fsdp import USE_SPMD
from flake8_xla.rules.examples import EXAMPLE_XR
from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.syntax import NodeIndex
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

HEADER = "import torch\nimport torch_xla\n" + EXAMPLE_XR


class UseSpmdAfterDeviceUse(Rule):
    code = "XLA217"
    name = "use-spmd-after-device-use"
    summary = "use_spmd() called after the XLA device was already used"
    what_it_does = (
        "Flags `torch_xla.runtime.use_spmd()` when, earlier in the same function (or at top level), "
        "the XLA device was taken (`torch_xla.device()`, `xm.xla_device()`) or tensors and modules "
        "were placed on it by name (`.to('xla')`, `device='xla:0'`, `torch.device('xla')`). Device "
        "use inside an `if` branch that `use_spmd()` is not in, or in another function, is not "
        "reported. `torch.device('xla')` alone and `xr.global_runtime_device_count()` do not count: "
        "they leave SPMD mode open."
    )
    why_bad = (
        "SPMD runs on a virtual device that spans all chips. Once the real device is in use, "
        "`use_spmd()` has to force the switch: it warns `Replicating tensors already initialized on "
        "non-virtual XLA device for SPMD to force SPMD mode` and copies every existing device tensor "
        "to all devices, a one-time overhead in time and memory that calling it first avoids."
    )
    fix_safety = "No automatic fix: moving use_spmd() up can cross other setup code."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/runtime.py",)
    valid = (
        Example(HEADER + "\nxr.use_spmd()\ndevice = torch_xla.device()\nmodel = Net().to(device)\n",
                title="SPMD first, then the device"),
        Example(HEADER + "\nnum_devices = xr.global_runtime_device_count()\nxr.use_spmd()\n",
                title="counting devices does not lock the mode"),
        Example(HEADER + "\nDEVICE = torch_xla.device()\n\ndef main():\n    xr.use_spmd()\n",
                title="another scope: the order is unknown"),
        Example(HEADER + "\nif on_cpu:\n    x = torch.zeros(2, device='xla')\nxr.use_spmd()\n",
                title="device use in a branch that may not run"),
    )
    invalid = (
        Example(
            HEADER + "\nmodel = Net().to('xla')\nxr.use_spmd()\n",
            expect=((6, 1, "use_spmd() is called after the XLA device was used; call it first, at the start of "
                           "the program",
                     "The device is used at line 5: torch_xla then replicates every tensor already on the "
                     "device to force SPMD mode."),),
        ),
        Example(
            HEADER + "import torch_xla.core.xla_model as xm\n\ndef main():\n    device = xm.xla_device()\n"
            "    x = torch.randn(4, 4, device=device)\n    xr.use_spmd()\n",
            expect=((9, 5, "use_spmd() is called after the XLA device was used; call it first, at the start of "
                           "the program",
                     "The device is used at line 7: torch_xla then replicates every tensor already on the "
                     "device to force SPMD mode."),),
            title="taking the device is enough",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        calls = []
        uses: List[ast.AST] = []
        for ref in ctx.get(SemanticModel).references:
            if ref.call is None:
                continue
            if ref.qualname == USE_SPMD:
                calls.append(ref.call)
            elif ref.qualname in XLA_DEVICE_CALLS:  # taking the device locks the runtime out of SPMD
                uses.append(ref.call)
        if not calls:
            return
        uses.extend(node for node, _ in placements(ctx.get(NodeIndex), ctx.get(QualifiedNames).qualname))
        if not uses:
            return
        placed = [(use, ctx.get(FlowFacts).place(use)) for use in uses]
        for call in calls:
            at = ctx.get(FlowFacts).place(call)
            if at is None:
                continue
            earlier = [use for use, where in placed if (use.lineno, use.col_offset) < (call.lineno, call.col_offset)
                       and where is not None and within(at, where)]
            if earlier:
                first = min(use.lineno for use in earlier)
                yield self.diagnostic(
                    ctx, call, "use_spmd() is called after the XLA device was used; call it first, at the start of "
                    "the program",
                    help=(f"The device is used at line {first}: torch_xla then replicates every tensor already on "
                          "the device to force SPMD mode."))
