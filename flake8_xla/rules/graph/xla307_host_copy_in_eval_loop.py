"""XLA307 host-copy-in-eval-loop."""
import ast
import re
from typing import Iterator, Optional

from flake8_xla.analysis.loops import StepRegions
from flake8_xla.analysis.syntax import NodeIndex, to_cpu
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.values import HOST, HOST_TENSOR, MODULE
from flake8_xla.rules.graph.wording import ACROSS_MODULES, BUDGET, EVALUATION_BATCH, fit, hands_off, helper_reads, runs, where
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

RULED_OUT = (HOST, HOST_TENSOR, MODULE)
# library helpers that copy a tensor to the host (fastai's to_np / to_cpu, common to_numpy helpers)
_COPY_HELPERS = re.compile(r"to_(numpy|np|cpu|host)|tensor_to_numpy|tensor2numpy")
HEADER = ("import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n\n"
          "device = torch_xla.device()\nmodel = torch.nn.Linear(8, 2).to(device)\n")
HELP = ("Each copy cuts the graph and the host waits for the device. Accumulate on the device (append the tensors "
        "and torch.cat them, or keep a running sum) and copy once after the loop.")


class HostCopyInEvalLoop(Rule):
    code = "XLA307"
    name = "host-copy-in-eval-loop"
    summary = "A copy to the host on every batch of an evaluation loop: .cpu(), .cpu().numpy(), to_numpy()"
    what_it_does = (
        "Flags, in an evaluation or prediction loop over batches (a `for` loop over a loader that runs the model "
        "without a training step, or a framework's evaluation hook such as Lightning's `validation_step`), a copy "
        "of a tensor to the host: `.cpu()`, `.to(\"cpu\")`, `.detach().cpu().numpy()`, a helper named `to_numpy()`, "
        "`to_np()` or `to_cpu()` (fastai's), or a function of another module of the project that copies what it "
        "is given (`flake8-xla check` reads the project's modules; the flake8 plugin lints one file at a time and "
        "sees only the first kinds). Loops that generate or sample (`while`, `range()`) are left alone: their "
        "copies often feed the next step on the host. Reads of a value (`.item()`, `float(loss)`) are XLA303. "
        "Every copy is reported on its own line, since each runs a graph of its own: two copies of tensors "
        "computed in one batch ran two graphs per batch, their `torch.stack` copied once ran one. Not reported: "
        "a copy of what the loop draws from its loader, untouched or only moved or detached (`labels.cpu()` "
        "after `labels.to(device)`: the data is on the device already, the copy runs no graph), and a copy of "
        "a value known to be on the host or of a module. (Measured on torch_xla 2.9, CPU: "
        "tests/runtime/test_graph_facts.py.) "
        + ACROSS_MODULES
    )
    why_bad = (
        "Each copy cuts the lazy graph, runs what was traced so far, and makes the host wait for the device before "
        "the next batch is traced, so evaluation runs one small graph per batch with the device idle in between. "
        "Upstream's evaluation examples keep the counts and predictions on the device and read them once."
    )
    fix_safety = "No automatic fix: where the results are gathered is a choice."
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/learn/troubleshoot.md",
                  "https://github.com/pytorch/xla/blob/master/test/test_train_mp_mnist.py")
    valid = (
        Example(HEADER + "predictions = []\nfor data, target in pl.MpDeviceLoader(val_loader, device):\n"
                "    predictions.append(model(data).argmax(-1))\n"
                "everything = torch.cat(predictions).cpu().numpy()\n",
                title="accumulate on the device, copy once"),
        Example(HEADER + "tokens = torch.zeros(1, 1, dtype=torch.long, device=device)\nfor _ in range(32):\n"
                "    logits = model(tokens)\n    tokens = logits.argmax(-1).cpu()\n",
                title="a generation loop"),
    )
    invalid = (
        Example(
            HEADER + "predictions = []\nfor data, target in pl.MpDeviceLoader(val_loader, device):\n"
            "    output = model(data)\n    predictions.append(output.detach().cpu().numpy())\n",
            expect=((10, 24, "output.detach().cpu() copies to the host on every evaluation batch; accumulate on the "
                             "device", HELP),),
        ),
        Example(
            "import torch\nimport lightning as L\n\nclass Classifier(L.LightningModule):\n"
            "    def validation_step(self, batch, batch_idx):\n        x, y = batch\n"
            "        return self(x).softmax(-1).cpu()\n\ntrainer = L.Trainer(accelerator=\"tpu\")\n",
            expect=((7, 16, "self(x).softmax(-1).cpu() copies to the host in validation_step; accumulate on the "
                            "device", "validation_step runs on every batch (Lightning). " + HELP),),
            title="a Lightning evaluation hook",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        regions = ctx.get(StepRegions)
        kind = ctx.get(TensorFacts).kind
        for node in ctx.get(NodeIndex).of(ast.Call):
            region = regions.region_of(node)
            if region is None or not hands_off(region) or not regions.over_batches(region):
                continue
            hook = region.hook
            rest = f" copies to the host {where(region) if hook else EVALUATION_BATCH}; accumulate on the device"
            room = BUDGET - len(rest)  # for the label
            label = _copy(node, kind, room)
            if label is not None and _loader_input(ctx, node.func.value if type(node.func) is ast.Attribute
                                                   else node.args[0], regions.origin(region)):
                continue  # the batch's own input read back: nothing pending to run, no graph cut
            detail = ""
            if label is None:
                helper = next((r for r in helper_reads(ctx, node) if r.copies), None)
                if helper is not None:
                    label, detail = helper.label(room), helper.detail() + " "
            if label is None:
                continue
            yield self.diagnostic(ctx, node, label + rest, help=f"{detail}{runs(region) if hook else ''}{HELP}")


def _loader_input(ctx: FileContext, value: ast.expr, loop: ast.AST) -> bool:
    """Data the loop draws from its loader, untouched: ``ids``, ``batch["labels"]``, ``inputs["labels"]``
    with ``inputs = {"labels": batch[3], ...}``, also after ``.detach()`` or ``.to(device)``."""
    if type(loop) not in (ast.For, ast.AsyncFor):
        return False
    drawn = {n.id for n in ctx.get(NodeIndex).below([loop.target]) if type(n) is ast.Name}
    tensors = ctx.get(TensorFacts)
    for _ in range(3):
        while True:
            if type(value) in (ast.Subscript, ast.Attribute):
                value = value.value
            elif type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in _UNTOUCHED:
                value = value.func.value
            else:
                break
        if type(value) is not ast.Name:
            return False
        if value.id in drawn:
            return True
        assigned = tensors.assigned_value(value)
        if type(assigned) is ast.Dict:
            return all(_loader_input(ctx, v, loop) for v in assigned.values if v is not None)
        if assigned is None:
            return False
        value = assigned
    return False


_UNTOUCHED = frozenset({"detach", "to", "cuda", "contiguous", "long", "float", "int"})


def _copy(call: ast.Call, kind, room: int) -> Optional[str]:
    """``x.cpu()`` / ``x.to("cpu")`` of what may be a device tensor, or ``to_numpy(x)``, as the message
    names it (within ``room`` where it can)."""
    func = call.func
    if type(func) is ast.Attribute:
        if func.attr == "cpu" and not call.args or func.attr == "to" and to_cpu(call):
            if kind(func.value) in RULED_OUT:
                return None
            return fit(call, f".{func.attr}()", room)
        return None
    if type(func) is ast.Name and _COPY_HELPERS.fullmatch(func.id) and len(call.args) == 1 and \
            kind(call.args[0]) not in RULED_OUT:
        return fit(call, f"{func.id}(...)", room)
    return None
