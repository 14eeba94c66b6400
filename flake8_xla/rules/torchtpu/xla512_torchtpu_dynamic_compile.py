"""XLA512 torchtpu-dynamic-compile."""
import ast
from typing import Iterator

from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.environment import string_value
from flake8_xla.migration.facts import MANUAL, MigrationFacts
from flake8_xla.migration.matching import TORCHTPU, speaks_torchtpu
from flake8_xla.migration.rules import migration_diagnostic
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

# the backends that are TorchTPU's after the move (openxla is rewritten to tpu by XLA501)
_TPU_BACKENDS = ("tpu", "openxla", "openxla_eval")
API = "dynamic=True of torch.compile()"
MESSAGE = f"{API} raises NotImplementedError on TorchTPU; compile static shapes"
FACTS = MigrationFacts(API, MANUAL, (
    "the tpu backend raises NotImplementedError, it compiles static shapes; needs a human: pad to fixed shapes, or "
    "mark the varying dimensions with torch._dynamo.mark_dynamic (compiled as bounded buckets)"))


class TorchTpuDynamicCompile(Rule):
    code = "XLA512"
    name = "torchtpu-dynamic-compile"
    summary = "torch.compile(..., dynamic=True) with TorchTPU's backend, which raises NotImplementedError"
    migration = TORCHTPU
    what_it_does = (
        "Under `--migrate-to torchtpu`, flags `dynamic=True` in `torch.compile(...)` calls whose backend is "
        "`\"tpu\"` (or `\"openxla\"`, which becomes `\"tpu\"`), or that name no backend in a file that is TorchTPU "
        "code (it imports `torch_tpu` or uses `torch.tpu`): on a TPU host TorchTPU makes `\"tpu\"` the default "
        "backend. `dynamic=None` and `dynamic=False` are fine."
    )
    why_bad = (
        "TorchTPU compiles static shapes: its backend raises `NotImplementedError: TPU backend does not support "
        "torch.compile(..., dynamic=True, ...)` (torch-tpu 0.2.0, `_internal/compile/_backend.py:739-744`) at the "
        "first call. Dimensions that vary are compiled as bounded buckets when marked with "
        "`torch._dynamo.mark_dynamic` (`options={\"num_dynamic_buckets\": ..., \"bucket_size\": ...}`)."
    )
    fix_safety = ("No automatic fix: dropping `dynamic=True` recompiles for every new shape; whether to pad, bucket "
                  "or mark dimensions is a human's choice.")
    since = "0.2.0"
    references = ("https://github.com/pytorch/xla/issues/9684",)
    valid = (
        Example("import torch\n\nstep = torch.compile(train_step, backend='tpu')\n", title="static shapes"),
        Example("import torch\n\nmodel = torch.compile(model, dynamic=True)\n",
                title="no backend, and nothing says the file is TorchTPU code"),
        Example("import torch\n\nstep = torch.compile(train_step, backend='inductor', dynamic=True)\n",
                title="another backend"),
    )
    invalid = (
        Example(
            "import torch\n\nstep = torch.compile(train_step, backend='tpu', dynamic=True)\n",
            expect=((3, 49, "dynamic=True of torch.compile() raises NotImplementedError on TorchTPU; compile "
                            "static shapes",
                            "the tpu backend raises NotImplementedError, it compiles static shapes; needs a "
                            "human: pad to fixed shapes, or mark the varying dimensions with "
                            "torch._dynamo.mark_dynamic (compiled as bounded buckets)"),),
        ),
        Example(
            "import torch\nimport torch_tpu\n\nmodel = torch.compile(model, dynamic=True)\n",
            expect=((4, 30, "dynamic=True of torch.compile() raises NotImplementedError on TorchTPU; compile "
                            "static shapes"),),
            title="no backend in TorchTPU code: the default backend is tpu on a TPU host",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        model = ctx.get(SemanticModel)
        tpu_code = None
        for ref in model.references:
            call = ref.call
            if ref.qualname != "torch.compile" or call is None:
                continue
            keywords = {k.arg: k.value for k in call.keywords}
            dynamic = next((k for k in call.keywords if k.arg == "dynamic"), None)
            if dynamic is None or not (type(dynamic.value) is ast.Constant and dynamic.value.value is True):
                continue
            if "backend" in keywords or len(call.args) > 1:
                backend = keywords.get("backend", call.args[1] if len(call.args) > 1 else None)
                if string_value(backend) not in _TPU_BACKENDS:
                    continue
            else:
                if tpu_code is None:
                    tpu_code = speaks_torchtpu(model)
                if not tpu_code:
                    continue
            yield migration_diagnostic(self, ctx, dynamic, MESSAGE, FACTS)
