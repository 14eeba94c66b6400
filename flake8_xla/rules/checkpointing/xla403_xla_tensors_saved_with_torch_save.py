"""XLA403 xla-tensors-saved-with-torch-save."""
from typing import Iterator

from flake8_xla.analysis.checkpoints import Checkpointing
from flake8_xla.analysis.fsdp import TORCH_SAVE, USE_SPMD, CheckpointFacts
from flake8_xla.rules.examples import EXAMPLE_XM
from flake8_xla.analysis.loops import is_test_file
from flake8_xla.analysis.off_xla import OffXla
from flake8_xla.analysis.placement import XlaPlacement
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.wraps import FsdpWraps

ADVICE = ("Save CPU copies instead: xla_compat.save(obj, path) (what xm.save does; xm.save is planned for removal), "
          "or torch.save of {k: v.cpu() for k, v in state_dict.items()}.")

HEADER = "import torch\nimport torch_xla\n\n"


class XlaTensorsSavedWithTorchSave(Rule):
    code = "XLA403"
    name = "xla-tensors-saved-with-torch-save"
    summary = "torch.save() of XLA tensors: a model's or optimizer's state_dict() on the XLA device, or a device tensor"
    what_it_does = (
        "Flags `torch.save(obj, path)` where `obj` is, or holds in a dict, list or tuple (also through a name "
        "assigned one in the same function), a module placed on the XLA device in the same function, or its "
        "`state_dict()` (`model = Net().to(device)`, or `model.to(device)`, with `device` given `torch_xla.device()`, "
        "`xm.xla_device()`, `torch.device('xla')` or `'xla'`), the `state_dict()` of an optimizer built there from "
        "such a module's parameters (not a plain SGD without momentum, which keeps no tensors), or a tensor made "
        "on the XLA device there (`x.to(device)`, `torch.zeros(n, device=device)`), and nothing moved the module "
        "back (`model.cpu()`, `model.to('cpu')`) or rebound the name before the save. The `state_dict()` of a "
        "parameter counts when the calls from the project's XLA code in other modules pass a model moved to the "
        "XLA device (and none passes another kind of value for it) (`flake8-xla check` reads the project; the help names the call: `as train.py:165 "
        "passes it`); otherwise a module or tensor that comes from a parameter or another function stays "
        "unknown and is not reported. `xm.save` and "
        "`xla_compat.save` are left alone (they copy to the CPU first), and so are test modules (serialization "
        "tests save XLA tensors on purpose) and files that use SPMD or FSDP: there the saved tensors are shards or "
        "gathered on purpose, which XLA401 and the XLA2xx rules cover."
    )
    why_bad = (
        "`torch.save` keeps each tensor's device: the file records XLA storages. Measured on torch_xla 2.9 (CPU): "
        "the `state_dict()` of a module on the XLA device, an Adam optimizer's `state_dict()` after one step and "
        "`torch.ones(3, device=xla)` each saved with `torch.save`; `python -c 'import torch; torch.load(path)'` "
        "(torch_xla not imported) fails with `NotImplementedError: Could not run 'aten::empty.memory_format' with "
        "arguments from the 'XLA' backend`, while the same data saved with `xm.save` or as `.cpu()` copies loads. "
        "`torch.load(path, map_location='cpu')` does load it, but every consumer (an evaluation or serving job, a "
        "GPU machine, a converter script) must know to pass it, and a process that does import torch_xla gets "
        "the tensors back on its XLA device (`device(type='xla', index=0)`), holding device memory before "
        "`load_state_dict()` runs. torch_xla's troubleshooting guide (XLA tensor quirks) adds that the tensors go "
        "back to the device they were saved from (`xm.xla_device(n)`) and the load fails where it is unavailable; "
        "it and 'Saving and Loading XLA Tensors' say to move XLA tensors to the CPU before saving them."
    )
    fix_safety = ("No automatic fix: `xla_compat.save` (like `xm.save`) writes from the master ordinal only, which "
                  "changes what a multi-process job writes; moving the tensors to the CPU by hand is a choice of "
                  "where in the code to do it.")
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/learn/troubleshoot.md",
        "https://github.com/pytorch/xla/issues/1245",
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/learn/pytorch-on-xla-devices.md",
    )
    valid = (
        Example(HEADER + "import xla_compat\n\n\ndef train(loader):\n    device = torch_xla.device()\n"
                "    model = Net().to(device)\n    train_epochs(model, loader)\n"
                "    xla_compat.save(model.state_dict(), 'model.pt')\n",
                title="xla_compat.save copies to the CPU"),
        Example(HEADER + "def train(loader):\n    device = torch_xla.device()\n    model = Net().to(device)\n"
                "    train_epochs(model, loader)\n"
                "    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, 'model.pt')\n",
                title="CPU copies saved by hand"),
        Example(HEADER + "def train(loader):\n    model = Net().to(torch_xla.device())\n    train_epochs(model, loader)\n"
                "    model.cpu()\n    torch.save(model.state_dict(), 'model.pt')\n",
                title="the model moved back first"),
        Example(HEADER + "def save(model, path):\n    torch.save(model.state_dict(), path)\n",
                title="a model from a parameter: unknown, silent"),
        Example(HEADER + "def train(loader):\n    model = Net().to(torch_xla.device())\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    train_epochs(model, optimizer, loader)\n"
                "    torch.save(optimizer.state_dict(), 'optim.pt')\n",
                title="plain SGD keeps no tensors"),
        Example(HEADER + "def train(loader, args):\n    device = torch_xla.device() if args.tpu else 'cuda'\n"
                "    model = Net().to(device)\n    torch.save(model.state_dict(), 'model.pt')\n",
                title="the device chosen at run time"),
    )
    invalid = (
        Example(
            HEADER + "def train(loader):\n    device = torch_xla.device()\n    model = Net().to(device)\n"
            "    optimizer = torch.optim.AdamW(model.parameters())\n    train_epochs(model, optimizer, loader)\n"
            "    torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict()}, 'ckpt.pt')\n",
            expect=((9, 5, "torch.save() of `model.state_dict()` writes XLA tensors; save CPU copies "
                           "(xla_compat.save)",
                     "`model` is on the XLA device since line 6: torch.load of the file fails without "
                     "torch_xla (NotImplementedError for the 'XLA' backend) unless given map_location='cpu', "
                     "and puts every tensor back on the XLA device with it. Save CPU copies instead: "
                     "xla_compat.save(obj, path) (what xm.save does; xm.save is planned for removal), or "
                     "torch.save of {k: v.cpu() for k, v in state_dict.items()}."),),
        ),
        Example(
            HEADER + EXAMPLE_XM + "\ndevice = xm.xla_device()\nmodel = Net()\nmodel.to(device)\n"
            "optimizer = torch.optim.Adam(model.parameters())\ntrain_epochs(model, optimizer)\n"
            "torch.save(optimizer.state_dict(), 'optim.pt')\nembeddings = model.embed(batch).to(device)\n"
            "torch.save(embeddings, 'embeddings.pt')\n",
            expect=((11, 1, "torch.save() of `optimizer.state_dict()` writes XLA tensors; save CPU copies "
                            "(xla_compat.save)",
                     "`optimizer` holds the parameters of `model`, on the XLA device since line 8: torch.load "
                     "of the file fails without torch_xla (NotImplementedError for the 'XLA' backend) unless "
                     "given map_location='cpu', and puts every tensor back on the XLA device with it. Save CPU "
                     "copies instead: xla_compat.save(obj, path) (what xm.save does; xm.save is planned for "
                     "removal), or torch.save of {k: v.cpu() for k, v in state_dict.items()}."),
                    (13, 1, "torch.save() of tensor `embeddings` writes XLA tensors; save CPU copies "
                            "(xla_compat.save)",
                     "`embeddings` is on the XLA device since line 12: torch.load of the file fails without "
                     "torch_xla (NotImplementedError for the 'XLA' backend) unless given map_location='cpu', "
                     "and puts every tensor back on the XLA device with it. Save CPU copies instead: "
                     "xla_compat.save(obj, path) (what xm.save does; xm.save is planned for removal), or "
                     "torch.save of {k: v.cpu() for k, v in state_dict.items()}."),),
            title="a script: an optimizer's state and a device tensor",
        ),
        Example(
            HEADER + "model = torch.nn.Linear(4, 2).to('xla')\ntorch.save(model, 'model.pt')\n",
            expect=((5, 1, "torch.save() of model `model` writes XLA tensors; save CPU copies (xla_compat.save)",
                     "`model` is on the XLA device since line 4: torch.load of the file fails without "
                     "torch_xla (NotImplementedError for the 'XLA' backend) unless given map_location='cpu', "
                     "and puts every tensor back on the XLA device with it. Save CPU copies instead: "
                     "xla_compat.save(obj, path) (what xm.save does; xm.save is planned for removal), or "
                     "torch.save of {k: v.cpu() for k, v in state_dict.items()}."),),
            title="the whole module",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        saves = [s for s in ctx.get(CheckpointFacts).saves if s.qualname == TORCH_SAVE and not s.unpacked]
        if not saves or is_test_file(ctx.filename) or _sharded_program(ctx):
            return  # a test saves XLA tensors on purpose (serialization tests)
        judge = ctx.get(XlaPlacement)
        never = ctx.get(OffXla).nodes
        for save in saves:
            if id(save.call) in never or save.data is None:
                continue
            found = judge.holds(save.data, save.at, 3)
            if found is not None:
                what, where = found
                yield self.diagnostic(
                    ctx, save.call, f"{save.callee}() of {what} writes XLA tensors; save CPU copies (xla_compat.save)",
                    help=(f"{where}: torch.load of the file fails without torch_xla (NotImplementedError for the "
                          "'XLA' backend) unless given map_location='cpu', and puts every tensor back on the XLA "
                          f"device with it. {ADVICE}"))


def _sharded_program(ctx: FileContext) -> bool:
    """SPMD (``xr.use_spmd()``, mark_sharding) or FSDP in the file: its saves are XLA401's and the XLA2xx rules'."""
    if ctx.get(FsdpWraps).refs or ctx.get(Checkpointing).shardings:
        return True
    return any(r.qualname == USE_SPMD for r in ctx.get(SemanticModel).references if not r.is_import)
