"""XLA503 torchtpu-ignored-env-var."""
from flake8_xla.migration.matching import MigrationUse
from flake8_xla.migration.rules import MigrationRule, env_message
from flake8_xla.rule import Example


class TorchTpuIgnoredEnvVar(MigrationRule):
    code = "XLA503"
    name = "torchtpu-ignored-env-var"
    summary = "An environment variable set from Python that TorchTPU never reads"
    what_it_does = (
        "Under `--migrate-to torchtpu`, flags environment variables set from Python (`os.environ[...] = ...`, "
        "`setdefault`, `update`, `os.putenv`) that TorchTPU does not read: `PJRT_DEVICE`, `XLA_USE_BF16`, "
        "`XLA_DOWNCAST_BF16`, `XLA_IR_DEBUG`, `XLA_HLO_DEBUG`, `PT_XLA_DEBUG`, `PT_XLA_DEBUG_LEVEL`, "
        "`XLA_METRICS_FILE`, `XLA_USE_SPMD`, and the names older TorchTPU docs give that the wheel does not "
        "read (`TPU_LAUNCH_BLOCKING`, `TORCH_TPU_INTERNAL_ENABLE_DEBUG_CHECKS`). `XLA_FLAGS` and "
        "`LIBTPU_INIT_ARGS` still take effect and are not reported."
    )
    why_bad = (
        "An ignored variable fails silently: with `XLA_USE_BF16=1` gone unread the model trains in fp32, and a "
        "misspelled debug switch leaves the checks off. The torch-tpu 0.2.0 wheel was searched for each name, "
        "in its Python sources and in the strings of every compiled library: none of these is there."
    )
    fix_safety = (
        "`PJRT_DEVICE` has an unsafe fix, applied by `fix --migrate-to torchtpu --unsafe-fixes`: the statement "
        "that sets it goes when it sets nothing else (`os.environ[\"PJRT_DEVICE\"] = \"TPU\"`, "
        "`os.environ.setdefault(\"PJRT_DEVICE\", ...)`), since TorchTPU finds the TPU by itself; unsafe because "
        "another module or a child process may still read the variable. The others stand for a behaviour that has "
        "to be asked for another way: no automatic fix. Variables of torch_xla the table does not know "
        "(`XLA_*`, `PT_XLA_*`, `PJRT_*`, `XRT_*` but `XLA_FLAGS`) are reported as having no known counterpart."
    )
    since = "0.2.0"
    references = ("https://github.com/pytorch/xla/issues/9684",)
    valid = (
        Example("import os\n\nos.environ['XLA_FLAGS'] = '--xla_dump_to=/tmp/hlo'\n",
                title="XLA_FLAGS is still read"),
        Example("import os\n\ndevice = os.environ.get('PJRT_DEVICE')\n", title="reading is not reported"),
    )
    invalid = (
        Example(
            "import os\n\nos.environ['PJRT_DEVICE'] = 'TPU'\n",
            expect=((3, 12, "environment variable PJRT_DEVICE has no effect on TorchTPU; delete it",
                            "delete it: TorchTPU finds the TPU by a PCI scan and reads no PJRT_DEVICE"),),
            fixed="import os\n\n",
        ),
        Example(
            "import os\n\nos.environ['XLA_USE_BF16'] = '1'\n",
            expect=((3, 12, "environment variable XLA_USE_BF16 has no effect on TorchTPU; use "
                            "model.to(torch.bfloat16)",
                            "cast the model yourself (model.to(torch.bfloat16)); needs a human"),),
            title="a variable that stood for a behaviour: ask for it another way",
        ),
        Example(
            "import os\n\nos.environ.update(TPU_LAUNCH_BLOCKING='1')\n",
            expect=((3, 19, "environment variable TPU_LAUNCH_BLOCKING has no effect on TorchTPU; set "
                            "TORCH_TPU_LAUNCH_BLOCKING"),),
            title="a name from older TorchTPU docs",
        ),
        Example(
            "import os\n\nos.environ['XLA_NO_SPECIAL_SCALARS'] = '1'\n",
            expect=((3, 12, "environment variable XLA_NO_SPECIAL_SCALARS has no effect on TorchTPU"),),
            title="a torch_xla variable the table does not know",
        ),
    )

    def reports(self, use: MigrationUse) -> bool:
        return use.env is not None

    def message(self, use: MigrationUse) -> str:
        return env_message(use)
