"""XLA511 torchtpu-internal-device-api."""
from typing import Callable, Iterator, Optional, Tuple

from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.fixing import Edit, Fix, FixSite
from flake8_xla.migration.facts import MANUAL, MECHANICAL, MigrationFacts
from flake8_xla.migration.matching import TORCHTPU, another_torch_tpu
from flake8_xla.migration.rules import migration_diagnostic
from flake8_xla.migration.table import internal_device_apis
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule


class TorchTpuInternalDeviceApi(Rule):
    code = "XLA511"
    name = "torchtpu-internal-device-api"
    summary = "A torch.tpu device API that TorchTPU made internal: it raises RuntimeError from user code"
    migration = TORCHTPU
    what_it_does = (
        "Under `--migrate-to torchtpu`, flags uses of the `torch.tpu` device APIs that torch-tpu 0.2.0 marks "
        "internal: `current_device`, `set_device`, `is_available`, `synchronize`, `device_count`, `set_stream`, "
        "`current_stream`, `device(...)` (on torch 2.11 and newer) and `initial_seed`, `get_rng_state` (on torch "
        "2.13 and newer), and names the `torch.accelerator` API TorchTPU says to use instead. The list is read "
        "from the wheel's annotations (`rules/torchtpu_internal_apis.json`, checked by "
        "`tests/test_torchtpu_wheel.py`). A file that uses a `torch.tpu` name Google's TorchTPU does not have "
        "(`torch.tpu.empty_cache`, `torch.tpu.memory_stats`) is another package's: sophgo/torch-tpu also installs "
        "a `torch_tpu` with a `tpu` device, whose `torch.tpu.synchronize()` is public; it is left alone."
    )
    why_bad = (
        "Called from user code, an internal API raises `RuntimeError` on every call (torch-tpu 0.2.0, "
        "`_internal/utils/annotations.py` `internal_or_experimental`, `strict` unless "
        "`TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS=1`, which turns it into a one-time warning). Calls from torch "
        "itself, and code traced by `torch.compile`, are exempt, so the same line can work in a compiled "
        "function and fail eagerly."
    )
    fix_safety = (
        "`fix --migrate-to torchtpu` renames the call to its `torch.accelerator` equivalent when it passes no "
        "keyword arguments (the parameter names differ); the arguments stay. The random-state pair "
        "(`initial_seed`, `get_rng_state`) has no fix: `torch.accelerator.random` is missing from torch 2.13."
    )
    since = "0.2.0"
    references = ("https://docs.pytorch.org/docs/stable/accelerator.html",)
    valid = (
        Example("import torch\n\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n",
                title="torch.accelerator"),
        Example("import torch\n\nname = torch.tpu.get_device_name()\n", title="a public (experimental) torch.tpu API"),
        Example("import torch\nimport torch_tpu\n\ntorch.tpu.set_device(0)\ntorch.tpu.synchronize()\n"
                "torch.tpu.empty_cache()\n", title="sophgo/torch-tpu's torch.tpu (empty_cache is not Google's)"),
    )
    invalid = (
        Example(
            "import torch\n\nif torch.tpu.is_available():\n    n = torch.tpu.device_count()\n"
            "    torch.tpu.synchronize()\n",
            expect=((3, 4, "torch.tpu.is_available() is internal and raises; use torch.accelerator.is_available()",
                           "internal, it raises RuntimeError from user code (torch>=2.11); use "
                           "torch.accelerator.is_available()"),
                    (4, 9, "torch.tpu.device_count() is internal and raises; use torch.accelerator.device_count()",
                           "internal, it raises RuntimeError from user code (torch>=2.11); use "
                           "torch.accelerator.device_count()"),
                    (5, 5, "torch.tpu.synchronize() is internal and raises; use torch.accelerator.synchronize()",
                           "internal, it raises RuntimeError from user code (torch>=2.11); use "
                           "torch.accelerator.synchronize()")),
            fixed="import torch\n\nif torch.accelerator.is_available():\n    n = torch.accelerator.device_count()\n"
                  "    torch.accelerator.synchronize()\n",
        ),
        Example(
            "import torch\n\nstate = torch.tpu.get_rng_state()\n",
            expect=((3, 9, "torch.tpu.get_rng_state() is internal and raises; use "
                           "torch.accelerator.random.get_rng_state()",
                           "internal, it raises RuntimeError from user code (torch>=2.13); use "
                           "torch.accelerator.random.get_rng_state() (torch 2.14 and newer); needs a human: "
                           "torch.accelerator.random is missing from torch 2.13"),),
            title="no fix: the replacement is missing from torch 2.13",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (d for d, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        internal = internal_device_apis()
        model = ctx.get(SemanticModel)
        foreign: Optional[bool] = None
        for ref in model.references:
            api = internal.get(ref.qualname)
            if api is None or ref.is_import:
                continue
            if foreign is None:
                foreign = another_torch_tpu(model) is not None
            if foreign:
                return
            call = ref.call
            random = api.prefer.startswith("torch.accelerator.random.")
            later = " (torch 2.14 and newer)" if random else ""
            human = "; needs a human: torch.accelerator.random is missing from torch 2.13" if random else ""
            written = f"{ref.written_prefix(ref.qualname)}()"
            facts = MigrationFacts(written, MANUAL if random else MECHANICAL, (
                f"internal, it raises RuntimeError from user code ({api.internal_when}); "
                f"use {api.prefer}(){later}{human}"))
            message = f"{written} is internal and raises; use {api.prefer}()"
            fixable = call is not None and not call.keywords and not random
            yield migration_diagnostic(self, ctx, ref.node, message, facts), \
                (lambda site, ref=ref, to=api.prefer: _rename(site, ref, to)) if fixable else None


def _rename(site: FixSite, ref, to: str) -> Optional[Fix]:
    reached = site.importer.reach("torch", ref)
    if reached is None:
        return None
    prefix, planned = reached
    text = prefix + to[len("torch"):]
    return Fix(f"Use {to}()", (Edit(site.lines.start(ref.node), site.lines.end(ref.node), text),), True,
               (planned,) if planned is not None else ())
