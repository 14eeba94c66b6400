"""XLA501 torchtpu-mechanical-rewrite."""
from flake8_xla.migration.matching import MigrationUse
from flake8_xla.migration.rules import MigrationRule
from flake8_xla.rule import Example

XM = "import torch_xla.core.xla_model as xm\n"


class TorchTpuMechanicalRewrite(MigrationRule):
    code = "XLA501"
    name = "torchtpu-mechanical-rewrite"
    summary = "A torch_xla use whose TorchTPU form is a rename or a deletion with the same behaviour"
    what_it_does = (
        "Under `--migrate-to torchtpu` (config `migrate-to = \"torchtpu\"`), flags each use of a torch_xla API "
        "whose TorchTPU (or plain PyTorch) form is mechanical, and says what it becomes: `xm.mark_step()` and "
        "`torch_xla.sync()` are deleted, `with torch_xla.step():` loses its `with`, "
        "`torch_xla.experimental.eager_mode(True)` is deleted, `torch_xla.device()` / `xm.xla_device()` become "
        "`torch.device(\"tpu\", 0)` (an index, as `xla:0` had), `torch.device(\"xla\")`, `.to(\"xla\")` and "
        "`device=\"xla:0\"` name `\"tpu\"` (`\"tpu:0\"`), "
        "`torch.compile(backend=\"openxla\")` becomes `backend=\"tpu\"`, `xm.wait_device_ops()` becomes "
        "`torch.accelerator.synchronize()`, `torch_xla.manual_seed(s)` and `xm.set_rng_state(s)` become "
        "`torch.tpu.manual_seed(s)` (experimental; `torch.manual_seed` would reseed the CPU as well), `xm.is_master_ordinal()` and `xm.master_print(...)` test the rank torchrun sets, "
        "and an aliased or from-import of torch_xla whose names nothing uses any more is removed (a plain "
        "`import torch_xla.x`, which runs for what it registers, is XLA502; an import in a `try`, an availability "
        "check, is XLA504). The table behind it, with the evidence "
        "for each row, is [docs/torchtpu.md](../torchtpu.md); the rewrites that need a human are XLA502."
    )
    why_bad = (
        "torch_xla 2.9 (torch 2.9) is torch_xla's last release and cannot be installed beside TorchTPU, which "
        "needs torch 2.11-2.15: every torch_xla name fails with ImportError after the move. These uses have an "
        "equivalent with the same behaviour: TorchTPU runs eagerly by default (Strict Eager, like CUDA), so "
        "there is nothing pending to sync; each process sees its own device as `tpu:0`; `torch.tpu.manual_seed` "
        "seeds the TPU generator, as `torch_xla.manual_seed` seeded XLA's."
    )
    fix_safety = (
        "`flake8-xla fix --migrate-to torchtpu` applies these fixes; each is safe where it is offered: only the "
        "argument lists the table names are rewritten (`xm.xla_device(1)` has no equivalent, since a process "
        "drives one device; `xm.mark_step(wait=True)` is left to a human), `torch` and `os` are imported "
        "where the file lacks them, after the other imports of the scope of the torch_xla import and outside "
        "any guard around it (a `try: import torch_xla` or an `if` that runs only with torch_xla never runs on "
        "TorchTPU), and a comparison put in place of a call is "
        "parenthesized where it needs to be. `with torch_xla.step():` is unwrapped (its body moves one level "
        "out) unless re-indenting could change a value: a string that spans lines in the body. An unused torch_xla import inside a `try` is left alone: it is an "
        "availability check (XLA504). A call inside such a `try` made only to see whether it fails (`_ = "
        "xm.xla_device()`) is not rewritten: its TorchTPU form cannot fail (XLA502 says so)."
    )
    since = "0.2.0"
    references = ("https://github.com/pytorch/xla/issues/9684",
                  "https://docs.cloud.google.com/tpu/docs/pytorch-on-tpu")
    valid = (
        Example("import torch\n\ndevice = torch.device(\"tpu\")\ntorch.accelerator.synchronize()\n",
                title="already TorchTPU and plain PyTorch"),
        Example(XM + "\nxm.mark_step(wait=True)\n", title="a blocking sync: XLA502 says what it becomes"),
        Example(XM + "\ndevice = xm.xla_device(1)\n", title="another device index has no equivalent"),
    )
    invalid = (
        Example(
            XM + "\nfor batch in loader:\n    loss = model(batch)\n    loss.backward()\n    xm.mark_step()\n",
            expect=((6, 5, "xm.mark_step() does nothing on TorchTPU; delete it",
                           "delete the call: TorchTPU runs eagerly and has nothing pending to execute"),),
            fixed="\nfor batch in loader:\n    loss = model(batch)\n    loss.backward()\n",
        ),
        Example(
            "import torch_xla\n\ndevice = torch_xla.device()\nmodel = Net().to(device)\n",
            expect=((3, 10, "torch_xla.device() -> torch.device(\"tpu\", 0) on TorchTPU"),),
            fixed="import torch\nimport torch_xla\n\ndevice = torch.device(\"tpu\", 0)\nmodel = Net().to(device)\n",
            title="the device (the plain torch_xla import stays: it runs for what it registers, XLA502 says)",
        ),
        Example(
            "import torch\nimport torch_xla\n\ntorch_xla.manual_seed(0)\n"
            "step = torch.compile(train_step, backend='openxla')\n",
            expect=((4, 1, "torch_xla.manual_seed() -> torch.tpu.manual_seed() on TorchTPU"),
                    (5, 42, "backend=\"openxla\" of torch.compile() -> \"tpu\" on TorchTPU")),
            fixed="import torch\nimport torch_xla\n\ntorch.tpu.manual_seed(0)\nstep = torch.compile(train_step, backend='tpu')\n",
            title="seeding and the compile backend",
        ),
        Example(
            XM + "\nif xm.is_master_ordinal():\n    xm.master_print('saved', path)\nxm.wait_device_ops()\n",
            expect=((3, 4, "xm.is_master_ordinal() -> int(os.environ.get(\"LOCAL_RANK\", \"0\")) == 0 on TorchTPU"),
                    (4, 5, "xm.master_print() -> print() guarded by a rank-0 test on TorchTPU"),
                    (5, 1, "xm.wait_device_ops() -> torch.accelerator.synchronize() on TorchTPU")),
            fixed="import os\nimport torch\n\nif int(os.environ.get(\"LOCAL_RANK\", \"0\")) == 0:\n"
                  "    if int(os.environ.get(\"RANK\", \"0\")) == 0:\n        print('saved', path)\n"
                  "torch.accelerator.synchronize()\n",
            title="rank tests, printing and waiting",
        ),
        Example(
            "import torch_xla\n\nfor batch in loader:\n    with torch_xla.step():\n        loss = model(batch)\n"
            "        loss.backward()\n\n        optimizer.step()\n",
            expect=((4, 10, "torch_xla.step() does nothing on TorchTPU; drop the with, keep its body"),),
            fixed="import torch_xla\n\nfor batch in loader:\n    loss = model(batch)\n    loss.backward()\n\n"
                  "    optimizer.step()\n",
            title="the step context",
        ),
        Example(
            "import sys\n\ntry:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n    xm = None\n\n\n"
            "def report(message):\n    if xm is not None:\n        xm.master_print(message,\n"
            "                        flush=True)\n",
            expect=((11, 9, "xm.master_print() -> print() guarded by a rank-0 test on TorchTPU"),),
            fixed="import os\nimport sys\n\ntry:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n"
                  "    xm = None\n\n\ndef report(message):\n    if xm is not None:\n"
                  "        if int(os.environ.get(\"RANK\", \"0\")) == 0:\n            print(message,\n"
                  "                        flush=True)\n",
            title="an import the fix adds goes outside the guard on torch_xla, which fails on TorchTPU",
        ),
        Example(
            "import torch\n\nbatch = batch.to('xla')\nmask = torch.ones(4, device=\"xla:0\")\n",
            expect=((3, 18, ".to(\"xla\") -> \"tpu\" on TorchTPU",
                            "\"tpu\" (\"tpu:0\" for \"xla:0\"): each process sees its own device as tpu:0"),
                    (4, 29, "device=\"xla:0\" -> \"tpu:0\" on TorchTPU",
                            "\"tpu\" (\"tpu:0\" for \"xla:0\"): each process sees its own device as tpu:0")),
            fixed="import torch\n\nbatch = batch.to('tpu')\nmask = torch.ones(4, device=\"tpu:0\")\n",
            title="the device named by a string",
        ),
        Example(
            "import torch_xla.debug.metrics as met\nimport torch_xla.core.xla_model as xm\n\nxm.mark_step()\n",
            expect=((1, 1, "import of torch_xla.debug.metrics is unused and fails on TorchTPU; delete it"),
                    (4, 1, "xm.mark_step() does nothing on TorchTPU; delete it")),
            fixed="\n",
            title="an import nothing uses",
        ),
    )

    def reports(self, use: MigrationUse) -> bool:
        return use.row is not None and use.mechanical
