"""XLA513 torchtpu-fork-start-method."""
import ast
from typing import Iterator, Optional

from flake8_xla.analysis.environment import string_value
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.migration.facts import MANUAL, MigrationFacts
from flake8_xla.migration.matching import TORCHTPU, speaks_torchtpu
from flake8_xla.migration.rules import migration_diagnostic
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

# callee -> (position, keyword) of its start method
_START_METHOD = {
    "multiprocessing.set_start_method": (0, "method"),
    "multiprocessing.get_context": (0, "method"),
    "torch.multiprocessing.set_start_method": (0, "method"),
    "torch.multiprocessing.get_context": (0, "method"),
    "torch.multiprocessing.start_processes": (None, "start_method"),
    "torch.multiprocessing.spawn.start_processes": (None, "start_method"),
}
API = "start method 'fork'"
MESSAGE = f"{API} fails on TorchTPU once a child uses the TPU; use 'spawn'"
FACTS = MigrationFacts(API, MANUAL, (
    "a forked child that uses the TPU raises 'cannot access or re-initialize TPU in a forked subprocess', the "
    "device being set up at import torch on a TPU host; needs a human: use 'spawn' (the worker and its arguments "
    "must pickle)"))


class TorchTpuForkStartMethod(Rule):
    code = "XLA513"
    name = "torchtpu-fork-start-method"
    summary = "A fork start method for processes that use the TPU under TorchTPU"
    migration = TORCHTPU
    what_it_does = (
        "Under `--migrate-to torchtpu`, flags the start method `\"fork\"` given to "
        "`multiprocessing.set_start_method` / `get_context` (also `torch.multiprocessing`'s), "
        "and `torch.multiprocessing.start_processes(..., start_method=\"fork\")`, in TorchTPU code (a file that "
        "imports `torch_tpu` or uses `torch.tpu`). In torch_xla code the launcher itself changes (`xmp.spawn` is "
        "XLA502), and a fork elsewhere in a torch_xla file is likelier to serve CUDA or CPU workers."
    )
    why_bad = (
        "On a TPU host TorchTPU initializes the device when `import torch` runs (the wheel's `torch.backends` "
        "entry point autoloads it), so every fork happens after the device is set up, and a forked child that "
        "touches the TPU raises `RuntimeError: cannot access or re-initialize TPU in a forked subprocess. To use "
        "TPU with multiprocessing, you must use the 'spawn' start method` (torch-tpu 0.2.0, "
        "`_internal/device/_device_module.py:587-596`)."
    )
    fix_safety = ("No automatic fix: with `spawn` the worker function and its arguments must be picklable and the "
                  "module importable, which a human has to check.")
    since = "0.2.0"
    references = ("https://github.com/pytorch/xla/issues/9684",)
    valid = (
        Example("import torch.multiprocessing as mp\nimport torch_tpu\n\nmp.set_start_method('spawn')\n",
                title="spawn"),
        Example("import multiprocessing\nimport torch_tpu\n\nctx = multiprocessing.get_context()\n",
                title="the default start method"),
        Example("import torch_xla.distributed.xla_multiprocessing as xmp\nimport torch.multiprocessing as mp\n\n"
                "mp.set_start_method('fork')\n", title="torch_xla code: the launcher is XLA502's matter"),
    )
    invalid = (
        Example(
            "import torch.multiprocessing as mp\nimport torch_tpu\n\nmp.set_start_method('fork', force=True)\n",
            expect=((4, 21, "start method 'fork' fails on TorchTPU once a child uses the TPU; use 'spawn'",
                            "a forked child that uses the TPU raises 'cannot access or re-initialize TPU in a "
                            "forked subprocess', the device being set up at import torch on a TPU host; needs a "
                            "human: use 'spawn' (the worker and its arguments must pickle)"),),
        ),
        Example(
            "import multiprocessing\nimport torch\n\ntorch.tpu.set_eager_mode(mode)\n"
            "ctx = multiprocessing.get_context(method='fork')\n",
            expect=((5, 42, "start method 'fork' fails on TorchTPU once a child uses the TPU; use 'spawn'"),),
            title="the standard library's multiprocessing in a file that uses torch.tpu",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        model = ctx.get(SemanticModel)
        if not speaks_torchtpu(model):
            return
        for ref in model.references:
            where = _START_METHOD.get(ref.qualname)
            call = ref.call
            if where is None or call is None:
                continue
            node = _argument(call, *where)
            if string_value(node) == "fork":
                yield migration_diagnostic(self, ctx, node, MESSAGE, FACTS)


def _argument(call: ast.Call, position: Optional[int], keyword: str) -> Optional[ast.AST]:
    found = next((k.value for k in call.keywords if k.arg == keyword), None)
    if found is None and position is not None and len(call.args) > position:
        found = call.args[position]
    return found
