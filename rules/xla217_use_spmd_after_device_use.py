"""XLA217 use-spmd-after-device-use."""
import ast
import re
from typing import Iterator, List

from flake8_xla.analysis.fsdp import EXAMPLE_XR, USE_SPMD
from flake8_xla.analysis.flow import dotted, within
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.flow import FlowFacts

# Calls that hand out the XLA device: the first one locks the runtime out of SPMD mode.
DEVICE_CALLS = frozenset({"torch_xla.device", "torch_xla.torch_xla.device", "torch_xla.core.xla_model.xla_device",
                          "xla_compat.device", "xla_compat.runtime.device"})
_XLA_DEVICE_TEXT = re.compile(r"xla(:\d+)?")
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
            expect=((6, 1, "use_spmd() is called after the XLA device was used (line 5): torch_xla then "
                           "replicates every tensor already on the device to force SPMD mode; call use_spmd() "
                           "first, at the start of the program"),),
        ),
        Example(
            HEADER + "import torch_xla.core.xla_model as xm\n\ndef main():\n    device = xm.xla_device()\n"
            "    x = torch.randn(4, 4, device=device)\n    xr.use_spmd()\n",
            expect=((9, 5, "use_spmd() is called after the XLA device was used (line 7): torch_xla then "
                           "replicates every tensor already on the device to force SPMD mode; call use_spmd() "
                           "first, at the start of the program"),),
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
            elif ref.qualname in DEVICE_CALLS:
                uses.append(ref.call)
        if not calls:
            return
        uses.extend(_placements(ctx.tree))
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
                yield self.diagnostic(ctx, call, (
                    f"use_spmd() is called after the XLA device was used (line {first}): torch_xla then "
                    "replicates every tensor already on the device to force SPMD mode; call use_spmd() first, "
                    "at the start of the program"))


def _placements(tree: ast.AST) -> Iterator[ast.AST]:
    """``.to(<xla device>)`` calls and ``device=<xla device>`` keywords, the device written out."""
    for node in ast.walk(tree):
        if type(node) is not ast.Call:
            continue
        func = node.func
        if type(func) is ast.Attribute and func.attr == "to" and node.args and _names_xla(node.args[0]):
            yield node
            continue
        for keyword in node.keywords:
            if keyword.arg == "device" and _names_xla(keyword.value):
                yield keyword.value
                break


def _names_xla(node: ast.AST) -> bool:
    """``'xla'``, ``'xla:0'`` or ``torch.device('xla')``."""
    if type(node) is ast.Call and dotted(node.func) in ("torch.device", "device") and node.args:
        node = node.args[0]
    return type(node) is ast.Constant and type(node.value) is str and bool(_XLA_DEVICE_TEXT.fullmatch(node.value))
