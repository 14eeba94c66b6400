"""XLA606 fp16-autocast-on-tpu."""
import ast
from typing import Callable, Iterator, Optional, Tuple

from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.syntax import NodeIndex, argument, dotted, is_constant
from flake8_xla.analysis.bindings import Bindings
from flake8_xla.fixing.edits import Edit, Fix
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.versions import Version

AUTOCAST = frozenset({"torch_xla.amp.autocast", "torch_xla.amp.autocast_mode.autocast"})
FLOAT16 = frozenset({"torch.float16", "torch.half"})
# torch_xla.amp.autocast(device, enabled=True, dtype=None, cache_enabled=True)
_ENABLED, _DTYPE = 1, 2
# the TPU branch refuses float16 since #5505 (v2.2.0); XLA:GPU (float16's home) is gone in 2.9
_CHECKED_SINCE = Version(2, 2)
_NO_GPU_SINCE = Version(2, 9)
HEADER = "import torch\nimport torch_xla\nimport torch_xla.amp\n\ndevice = torch_xla.device()\n"


class Fp16AutocastOnTpu(Rule):
    code = "XLA606"
    name = "fp16-autocast-on-tpu"
    summary = "torch_xla.amp.autocast(..., dtype=torch.float16): disabled on TPU, the region runs in float32"
    since = "0.2.0"
    what_it_does = (
        "Flags `torch_xla.amp.autocast(device, dtype=torch.float16)` (also `torch.half`, the dtype given "
        "positionally, a name given one of them by its one assignment, any import form such as "
        "`from torch_xla.amp import autocast`), unless `enabled=False` is written. A dtype the rule cannot "
        "read (a parameter, `torch.float16 if gpu else torch.bfloat16`) is not reported, and neither is a "
        "`with` block that asks whether autocast is on (a test of the refusal). `torch.autocast('xla', "
        "dtype=torch.float16)` is not reported either: torch's own autocast accepts float16 for the `xla` "
        "device type and does cast to it (measured below), so it does not silently turn itself off."
    )
    why_bad = (
        "On TPU (and Neuron, from 2.6) `torch_xla.amp.autocast` supports only bfloat16: for any other dtype "
        "it warns 'In XLA:TPU autocast, but the target dtype is not supported. Disabling autocast.' and "
        "enters the region with autocast off (torch_xla/amp/autocast_mode.py, v2.9.0 lines 26-34, added in "
        "v2.2.0 by pytorch/xla#5505; upstream's test_autocast_tpu_check_dtype asserts that autocast is off). "
        "The code then runs in float32: slower and using more memory than the mixed precision it asks for, "
        "with nothing but a warning in the log. float16 autocast was for XLA:GPU, which torch_xla 2.9 no "
        "longer has. Measured on torch_xla 2.9, CPU, with `xla_device_hw` made to answer 'TPU' so that the "
        "TPU branch runs: dtype=torch.float16 gave `_enabled == False`, the warning, and a float32 matmul; "
        "dtype=torch.bfloat16 and no dtype gave a bfloat16 matmul. `torch.autocast('xla', "
        "dtype=torch.float16)` on the same device stayed enabled and gave a float16 matmul."
    )
    fix_safety = (
        "The fix writes `torch.bfloat16` for `torch.float16` / `torch.half` at the call (the same module "
        "prefix). It is unsafe: the region then really runs in mixed precision, which changes the numbers "
        "it computes (bfloat16 has float32's range but fewer mantissa bits). A dtype that comes from a name "
        "gets no fix."
    )
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/amp/autocast_mode.py",
                  "https://github.com/pytorch/xla/pull/5505",
                  "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/amp.md")
    valid = (
        Example(HEADER + "with torch_xla.amp.autocast(device, dtype=torch.bfloat16):\n    y = model(x)\n",
                title="bfloat16"),
        Example(HEADER + "with torch_xla.amp.autocast(device):\n    y = model(x)\n",
                title="the default dtype (bfloat16 on TPU)"),
        Example(HEADER + "def run(model, x, dtype):\n    with torch_xla.amp.autocast(device, dtype=dtype):\n"
                "        return model(x)\n",
                title="a dtype the rule cannot read"),
        Example(HEADER + "with torch_xla.amp.autocast(device, enabled=False, dtype=torch.float16):\n"
                "    y = model(x)\n",
                title="autocast switched off on purpose"),
        Example(HEADER + "with torch.autocast('xla', dtype=torch.float16):\n    y = model(x)\n",
                title="torch.autocast('xla', dtype=torch.float16) does cast to float16"),
        Example(HEADER + "with torch_xla.amp.autocast(device, dtype=torch.float16):\n"
                "    assert not torch.is_autocast_xla_enabled()\n",
                title="a test that the TPU refuses float16"),
    )
    invalid = (
        Example(
            HEADER + "with torch_xla.amp.autocast(device, dtype=torch.float16):\n    y = model(x)\n",
            expect=((6, 6, "torch_xla.amp.autocast(..., dtype=torch.float16) is disabled on TPU; use "
                           "dtype=torch.bfloat16",
                     "On TPU it warns 'the target dtype is not supported' and disables autocast: the region "
                     "runs in float32. bfloat16 is the TPU default."),),
            fixed=HEADER + "with torch_xla.amp.autocast(device, dtype=torch.bfloat16):\n    y = model(x)\n",
        ),
        Example(
            "import torch\nfrom torch_xla.amp import autocast\n\nAMP_DTYPE = torch.half\n\n\n"
            "def train_step(model, x, device):\n    with autocast(device, True, AMP_DTYPE):\n"
            "        return model(x).sum()\n",
            target="2.8",
            expect=((8, 10, "autocast(..., dtype=torch.half) is disabled on TPU; use dtype=torch.bfloat16",
                     "On TPU it warns 'the target dtype is not supported' and disables autocast: the region "
                     "runs in float32 (float16 is for XLA:GPU only). bfloat16 is the TPU default."),),
            title="from a constant, positionally, torch_xla 2.8",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (diagnostic for diagnostic, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        if ctx.target.version < _CHECKED_SINCE:
            return
        probes: Optional[set] = None
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or ref.qualname not in AUTOCAST:
                continue
            dtype = argument(call, _DTYPE, "dtype")
            if dtype is None or is_constant(argument(call, _ENABLED, "enabled"), False):
                continue
            if probes is None:
                probes = _probing_autocast(ctx)
            if id(call) in probes:
                continue
            written, value = dtype, dtype
            if type(dtype) is ast.Name:
                value = ctx.get(Bindings).assigned_value(dtype) or dtype
            qualname = ctx.get(QualifiedNames).qualname(value)
            if qualname not in FLOAT16:
                continue
            gpu = "" if ctx.target.version >= _NO_GPU_SINCE else " (float16 is for XLA:GPU only)"
            message = (f"{ref.written_prefix(ref.qualname)}(..., dtype={qualname}) is disabled on TPU; use "
                       "dtype=torch.bfloat16")
            help = (f"On TPU it warns 'the target dtype is not supported' and disables autocast: the region runs in "
                    f"float32{gpu}. bfloat16 is the TPU default.")
            fix = _bfloat16(written) if written is value and type(written) is ast.Attribute else None
            yield self.diagnostic(ctx, call, message, help=help), fix


def _probing_autocast(ctx: FileContext) -> set:
    """id() of the autocast calls of ``with`` statements whose body asks whether autocast is on
    (``torch.is_autocast_xla_enabled()``): a test of the refusal itself."""
    out = set()
    index = ctx.get(NodeIndex)
    for node in index.of(ast.With, ast.AsyncWith):
        if any(type(n) is ast.Call and "is_autocast" in (dotted(n.func) or "") for n in index.below(node.body)):
            out.update(id(item.context_expr) for item in node.items)
    return out


def _bfloat16(dtype: ast.Attribute) -> Callable:
    def build(site) -> Fix:
        start, end = site.lines.start(dtype), site.lines.end(dtype)
        text = site.source[start:end]
        prefix = text[:text.rindex(".") + 1]
        return Fix("Use `torch.bfloat16`", (Edit(start, end, prefix + "bfloat16"),), safe=False)
    return build
