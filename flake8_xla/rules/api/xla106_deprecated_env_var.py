"""XLA106 deprecated-env-var."""
from flake8_xla.lifecycle.rules import LifecycleRule, LifecycleUse, removal_phrase
from flake8_xla.rule import Example


class DeprecatedEnvVar(LifecycleRule):
    code = "XLA106"
    name = "deprecated-env-var"
    summary = "A torch_xla environment variable set from Python that is deprecated, ignored or unsupported"
    kinds = ("env_var",)
    states = ("removed", "deprecated", "unavailable")
    what_it_does = (
        "Flags environment variables set from Python (`os.environ[...] = ...`, "
        "`os.environ.setdefault`, `os.environ.update`, `os.putenv`) that torch_xla deprecated or "
        "stopped honouring: `XRT_*`, `GPU_NUM_DEVICES`, `PJRT_DEVICE=GPU`/`CUDA`, `XLA_USE_BF16`, "
        "`XLA_DOWNCAST_BF16`, `XLA_USE_FP16`, `XLA_DOWNCAST_FP16`, `XLA_USE_32BIT_LONG` and "
        "`XLA_USE_SPMD`, and a value the target does not accept yet (`PJRT_DEVICE=CUDA` on 2.1). "
        "Reading a variable is not reported."
    )
    why_bad = (
        "An ignored variable fails silently: `XLA_USE_FP16=1` has done nothing since 2.5, so the "
        "model trains in fp32 with no error. Deprecated ones such as `XLA_USE_BF16` still work "
        "but print a deprecation notice and will go; the API they stand for is the supported way."
    )
    fix_safety = "No automatic fix: the replacement is a code change (cast the model, call use_spmd())."
    valid = (
        Example("import os\n\nos.environ['PJRT_DEVICE'] = 'TPU'\n", title="PJRT_DEVICE=TPU is the supported way"),
        Example("import os\n\nuse_bf16 = os.environ.get('XLA_USE_BF16')\n", title="reading is fine"),
        Example(
            "import os\n\nos.environ['XLA_USE_FP16'] = '1'\n",
            target="2.3",
            title="fine before the deprecation",
        ),
    )
    invalid = (
        Example(
            "import os\n\nos.environ['XLA_USE_BF16'] = '1'\n",
            expect=((3, 12, "environment variable XLA_USE_BF16 is deprecated since torch_xla 2.4; "
                            "cast the model to bf16",
                     "Convert the model and inputs to bf16 yourself (model.to(torch.bfloat16))."),),
        ),
        Example(
            "import os\n\nos.environ.setdefault('XRT_TPU_CONFIG', 'localservice;0;localhost:51011')\n",
            expect=((3, 23, "environment variable XRT_TPU_CONFIG is ignored since torch_xla 2.1; "
                            "set PJRT_DEVICE=TPU (or CPU)",
                     "Set PJRT_DEVICE=TPU (or CPU) instead: the XRT runtime was deleted."),),
        ),
        Example(
            "from os import environ\n\nenviron.update({'PJRT_DEVICE': 'CUDA', 'GPU_NUM_DEVICES': '4'})\n",
            expect=(
                (3, 17, "environment variable PJRT_DEVICE=CUDA is unsupported since torch_xla 2.9; no replacement",
                 "No replacement; XLA:CUDA was removed, use PyTorch's native CUDA backend."),
                (3, 40, "environment variable GPU_NUM_DEVICES is ignored since torch_xla 2.9; no replacement",
                 "No replacement; XLA:CUDA was removed, use PyTorch's native CUDA backend."),
            ),
        ),
        Example(
            "import os\n\nos.environ['PJRT_DEVICE'] = 'CUDA'\n",
            target="2.1",
            expect=((3, 12, "environment variable PJRT_DEVICE=CUDA is unsupported before torch_xla 2.2; "
                            "use PJRT_DEVICE=GPU", None),),
            title="a value newer than the target",
        ),
    )

    def message(self, use: LifecycleUse) -> str:
        row = use.row
        env = row.env
        assert env is not None
        name = f"{use.api}={use.value}" if env.values and use.value else use.api
        if use.state == "removed":
            status = f"is {row.effect} since torch_xla {row.removed_in}"
        elif use.state == "unavailable":
            status = f"is {row.effect} before torch_xla {row.added_in}"
        else:
            status = removal_phrase(row, use.state)
        return f"environment variable {name} {status}; {use.advice().first}"
