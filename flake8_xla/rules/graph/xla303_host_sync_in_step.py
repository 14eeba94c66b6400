"""XLA303 host-sync-in-step."""
import ast
from typing import Iterator, Optional, Tuple

from flake8_xla.rules.graph.wording import (ACROSS_MODULES, BUDGET, FIRST_LINE, abridged, fit, hands_off, helper_reads, runs,
                              where)
from flake8_xla.analysis.hooks import TRAINING
from flake8_xla.analysis.loops import RegionKind, StepRegion
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.values import DEVICE, HOST, HOST_TENSOR, MODULE
from flake8_xla.analysis.semantic import QualifiedNames
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.loops import StepRegions
from flake8_xla.analysis.reads import READ_METHODS
from flake8_xla.analysis.syntax import NodeIndex, dotted, is_constant, to_cpu

# tensor methods that copy to the host; flagged unless the receiver is known not to be a device tensor
# builtins and calls that read a value they are given; flagged only for a known device tensor
CONVERSIONS = frozenset({"float", "int", "bool", "str", "repr", "format", "print"})
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
DECODERS = frozenset({"decode", "batch_decode"})  # a tokenizer turns token ids into text on the host
SCALAR_WRITERS = frozenset({"add_scalar", "add_scalars"})  # tensorboard's writers call .item()
RULED_OUT = (HOST, HOST_TENSOR, MODULE)
# In evaluation and generation loops a copy to the host (`.cpu()`, `.to("cpu")`) is how predictions
# and logits leave the device for metrics, CPU logits processors or beam scorers; on the real-code
# sweep those copies were deliberate 12 times in 14 (graph.hands_off; the per-batch copies of
# evaluation loops are XLA307). Reads of a value (`.item()`, `int()`, `if t:`) stay reported there.
LOOP = ("import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n\n"
        "device = torch_xla.device()\nmodel = torch.nn.Linear(8, 2).to(device)\n"
        "loss_fn = torch.nn.CrossEntropyLoss()\n"
        "for step, (data, target) in enumerate(pl.MpDeviceLoader(loader, device)):\n"
        "    optimizer.zero_grad()\n    loss = loss_fn(model(data), target)\n    loss.backward()\n"
        "    optimizer.step()\n")
# the help of a read on every step, after where it runs
CUT = "The pending graph is cut and run there and the host waits for it."
INSTEAD = ("Keep the value on the device and read it every N steps (under `if step % N == 0:`) or in a step "
           "closure (xla_compat.add_step_closure / xm.add_step_closure).")


class HostSyncInStep(Rule):
    code = "XLA303"
    name = "host-sync-in-step"
    summary = "A device-to-host transfer on every step: .item(), .cpu(), print or float() of a tensor"
    what_it_does = (
        "Flags, in code that runs once per step, reads of a tensor's value on the host: `.item()`, "
        "`.tolist()`, `.numpy()`, `.cpu()`, `.to(\"cpu\")` (unless the receiver is known to be a host value, "
        "a CPU tensor or a module; in evaluation and generation loops a copy to the host is how results "
        "leave the device, so `.cpu()` / `.to(\"cpu\")` are reported only in training loops, compiled "
        "steps and forward()), and `float()`, `int()`, `bool()`, `str()`, `repr()`, `print()`, f-strings, "
        "`%`-formatting, logging calls, tensorboard `add_scalar` and `tokenizer.decode()` of a known device "
        "tensor. Code runs once per step in a training loop (its body calls `.backward()`, `optimizer.step()` or "
        "`xm.optimizer_step`, itself or through a function of this file), inner loops included; a loop over a "
        "device loader's batches; a loop that runs a model (evaluation, token-by-token generation); a function "
        "under `torch_xla.compile`/`torch_xla.step` or `torch.compile(backend=\"openxla\")`; `forward()` of an "
        "`nn.Module`; every function of this file that one of those calls; a library's per-iteration "
        "callback (`output_transform=lambda out: out.item()`); and the hooks a framework runs on every batch "
        "(Lightning's `training_step`/`validation_step`/`test_step`/`predict_step`, whose batch is on the device, "
        "a Hugging Face `Trainer` subclass's `training_step`/`compute_loss`/`prediction_step`, fastai callbacks' "
        "`after_batch`-style events, an ignite `Engine`'s process function). In a Lightning training hook, "
        "`self.log(name, tensor, prog_bar=True)` is a read too: Lightning reads progress-bar values with `.item()` "
        "after every batch. Writing a device tensor into a CPU tensor (`losses[k] = loss` with `losses = "
        "torch.zeros(n)`) copies it. `flake8-xla check` also reports a call of a function of another module of "
        "the project that reads what it is given (`log_value(loss)` where `utils.log_value` prints "
        "`value.item()`), naming that line; the flake8 plugin lints one file at a time. Code under "
        "`if step % N == 0:` (or `if log_now:` "
        "with `log_now = step % N == 0`), code that runs once (`if step == 0:`, a branch that leaves the loop), "
        "branches that never run on XLA (`if torch.cuda.is_available():`), code after the loop, and other "
        "callbacks (nested functions and lambdas, e.g. a step closure) are fine, and so are shape reads "
        "(`x.shape`, `x.size(0)`, `len(x)`). A function's parameter holds what every call of it in the file "
        "passes (`test_loop_fn(para_loader.per_device_loader(device))`), and unknown values stay silent except "
        "for `.item()`, `.tolist()`, `.numpy()` and `.cpu()`, which only tensors have in practice. "
        + ACROSS_MODULES
    )
    why_bad = (
        "XLA tensors are lazy: reading a value cuts the graph traced so far, compiles and runs it, and copies "
        "the result to the host while the host waits (`TransferFromDeviceTime`, `aten::_local_scalar_dense`). "
        "Every step the step's graph then runs in two pieces and tracing no longer overlaps execution. Under "
        "`torch_xla.compile(full_graph=True)` it raises; under `torch.compile(backend=\"openxla\")` it is a "
        "graph break. A step closure runs after the step's sync, when the value is ready. At run time, "
        "`xla_compat.GraphWatch` reports transfers that happen every step, with the step number."
    )
    fix_safety = "No automatic fix: where the value should be read is a choice."
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/learn/troubleshoot.md",
                  "https://github.com/pytorch/xla/blob/master/docs/source/learn/xla-advanced.md")
    valid = (
        Example(LOOP + "    torch_xla.sync()\n    if step % 100 == 0:\n"
                "        print(f'step {step} loss {loss.item()}')\n",
                title="throttled logging"),
        Example(LOOP + "    torch_xla.sync()\n    xm.add_step_closure(lambda: print(loss.item()))\n"
                "print(loss.item())\n", title="a step closure, and after the loop"),
        Example("import numpy as np\nimport torch\nimport torch_xla\n\nfor data, target in loader:\n"
                "    loss = loss_fn(model(data), target)\n    loss.backward()\n    optimizer.step()\n"
                "    counts = np.bincount(target.shape)\n    n = counts.sum().item() + data.size(0) + len(data)\n",
                title="host values and shape reads"),
    )
    invalid = (
        Example(
            LOOP + "    torch_xla.sync()\n    total += loss.item()\n",
            expect=((14, 14, "loss.item() copies to the host on every training step; read it every N steps",
                     CUT + " " + INSTEAD),),
        ),
        Example(
            LOOP + "    print(f'loss: {loss}')\n",
            expect=((13, 11, "formatting loss in an f-string copies to the host on every training step; read it "
                             "every N steps"),),
            title="printing a tensor",
        ),
        Example(
            "import torch\nimport torch_xla\n\nmodel = torch.nn.Linear(8, 8).to(torch_xla.device())\n"
            "tokens = torch.zeros(1, 1, dtype=torch.long, device=torch_xla.device())\n"
            "for _ in range(32):\n    logits = model(tokens)\n    next_token = logits.argmax(-1)\n"
            "    generated.append(int(next_token))\n",
            expect=((9, 22, "int(next_token) copies to the host on every model-loop iteration; read it every N steps",
                     "It runs on every iteration of a loop that runs the model. " + CUT + " " + INSTEAD),),
            title="token-by-token generation",
        ),
        Example(
            "import torch_xla\n\n@torch_xla.compile\ndef train_step(data, target):\n"
            "    loss = loss_fn(model(data), target)\n    loss.backward()\n    optimizer.step()\n"
            "    return loss.item()\n",
            expect=((8, 12, "loss.item() copies to the host in a torch_xla.compile step; read it outside the step",
                     "The traced graph is cut and executed mid-step (with full_graph=True it raises). Return the "
                     "tensor from the step and read it outside, every N steps."),),
            title="inside a compiled step",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        regions = ctx.get(StepRegions)
        for node in ctx.get(NodeIndex).of(ast.Call, ast.JoinedStr, ast.BinOp, ast.Assign):
            region = regions.region_of(node)
            if region is None or region.caller is not None:
                continue  # in a function another module calls per step: reported at that call (helper reads)
            logged = _progress_bar_value(ctx, node, region) if type(node) is ast.Call else None
            if logged is not None:
                rest = f" with prog_bar=True copies to the host {where(region)}; drop prog_bar=True"
                yield self.diagnostic(ctx, node, fit(logged, "a tensor", BUDGET - len(rest), "logging ") + rest, help=(
                    f"{runs(region)}Lightning reads every progress-bar value (.item()) when the batch ends. "
                    "Log it without prog_bar=True (the logger reads it every log_every_n_steps) or with "
                    "on_step=False."))
                continue
            if region.kind == RegionKind.COMPILED:
                rest = f" copies to the host {where(region)}; read it outside the step"
                hint = ("The traced graph is cut and executed mid-step (with full_graph=True it raises). Return the "
                        "tensor from the step and read it outside, every N steps.")
            elif region.kind == RegionKind.DYNAMO:
                rest = f" breaks the graph {where(region)}; read it outside"
                hint = ("Dynamo splits the function around it and copies the value to the host. Return the tensor and "
                        "read it outside the compiled function.")
            else:
                rest = f" copies to the host {where(region)}; read it every N steps"
                hint = f"{runs(region)}{CUT} {INSTEAD}"
            room = BUDGET - len(rest)  # for the label
            label = self._read(ctx, node, room) if type(node) is not ast.Assign else _written_to_host(ctx, node, room)
            if label is None and type(node) is ast.Call:
                # a helper of another module of the project reads what the step passes it
                helper = next((r for r in helper_reads(ctx, node) if not (r.copies and hands_off(region))), None)
                if helper is not None:
                    label, hint = helper.label(room), f"{helper.detail()} {hint}"
            elif label is not None and hands_off(region) and _copies_to_host(node):
                continue  # evaluation/generation: a copy to the host is how results leave the device (XLA307)
            if label is not None:
                yield self.diagnostic(ctx, node, label + rest, help=hint)

    @staticmethod
    def _read(ctx: FileContext, node: ast.AST, room: int) -> Optional[str]:
        """How the message names ``node`` (within ``room`` where it can) when it reads a device tensor's
        value on the host, else None."""
        tensors = ctx.get(TensorFacts)

        def kind(value: ast.AST) -> Optional[str]:
            return HOST if tensors.read_before(value) else tensors.kind(value)  # read already: no new cut

        if type(node) is ast.JoinedStr:
            value = next((v.value for v in node.values if type(v) is ast.FormattedValue and kind(v.value) == DEVICE),
                         None)
            return None if value is None else fit(value, "a tensor", room, "formatting ", " in an f-string")
        if type(node) is ast.BinOp:
            if type(node.op) is ast.Mod and type(node.left) is ast.Constant and isinstance(node.left.value, str):
                values = node.right.elts if type(node.right) is ast.Tuple else [node.right]
                value = next((v for v in values if kind(v) == DEVICE), None)
                return None if value is None else fit(value, "a tensor", room, "formatting ", " with %")
            return None
        func = node.func
        if type(func) is ast.Attribute:
            method = func.attr
            if method in READ_METHODS or (method == "to" and to_cpu(node)):
                if kind(func.value) in RULED_OUT or node.args and method != "to":
                    return None
                if _copies_to_host(node) and _discarded(ctx, node):
                    return None  # `vae.to("cpu")` as a statement moves a module: a tensor's copy would be lost
                return fit(node, f".{method}()", room)
            value, how = _logged(ctx, node)
            if value is not None:
                return fit(value, "a tensor", room, f"{how} ")
            if method in DECODERS:
                value = next((a for a in node.args if kind(a) == DEVICE), None)
                return None if value is None else fit(value, "a tensor", room, "decoding ")
            if method == "format" and type(func.value) is ast.Constant:
                value = next((a for a in node.args if kind(a) == DEVICE), None)
                return None if value is None else fit(value, "a tensor", room, "formatting ", " with str.format")
            return None
        if type(func) is ast.Name and func.id in CONVERSIONS and ctx.get(QualifiedNames).qualname(func) is None:
            value = next((a for a in node.args if kind(a) == DEVICE), None)
            if value is not None:
                return fit(node, f"{func.id}({abridged(value, '...', FIRST_LINE)})", room)
        return None


def _progress_bar_value(ctx: FileContext, call: ast.Call, region: StepRegion) -> Optional[ast.expr]:
    """In a Lightning training hook, the device tensor of ``self.log(name, value, prog_bar=True)``
    (or a value of ``self.log_dict({...}, prog_bar=True)``), logged on every step (the default there)."""
    hook = region.hook
    func = call.func
    if hook is None or hook.framework != "Lightning" or hook.phase != TRAINING or type(func) is not ast.Attribute or \
            func.attr not in ("log", "log_dict") or dotted(func.value) != "self":
        return None
    keywords = {k.arg: k.value for k in call.keywords}
    if not is_constant(keywords.get("prog_bar"), True) or is_constant(keywords.get("on_step"), False):
        return None
    values = [keywords.get("value", call.args[1] if len(call.args) > 1 else None)] if func.attr == "log" else \
        [keywords.get("dictionary", call.args[0] if call.args else None)]
    if func.attr == "log_dict" and type(values[0]) is ast.Dict:
        values = values[0].values
    tensor_kind = ctx.get(TensorFacts).kind
    return next((v for v in values if v is not None and tensor_kind(v) == DEVICE), None)


def _written_to_host(ctx: FileContext, node: ast.Assign, room: int) -> Optional[str]:
    """``losses[k] = loss``: a device tensor written into a CPU tensor is copied to the host."""
    if len(node.targets) != 1 or type(node.targets[0]) is not ast.Subscript:
        return None
    kind = ctx.get(TensorFacts).kind
    target = node.targets[0].value
    if kind(target) != HOST_TENSOR or kind(node.value) != DEVICE:
        return None
    into = f" into the CPU tensor {abridged(target, 'a host tensor', FIRST_LINE)}"
    return fit(node.value, "a tensor", room, "writing ", into)


def _copies_to_host(node: ast.AST) -> bool:
    """`.cpu()` / `.to("cpu")`: a copy of the tensor, not a read of its value."""
    func = getattr(node, "func", None)
    return type(func) is ast.Attribute and (func.attr == "cpu" or (func.attr == "to" and to_cpu(node)))


def _discarded(ctx: FileContext, call: ast.Call) -> bool:
    """Whether the call is a statement of its own (its value is thrown away)."""
    return any(stmt.value is call for stmt in ctx.get(NodeIndex).of(ast.Expr) if stmt.lineno == call.lineno)


def _logged(ctx: FileContext, call: ast.Call) -> Tuple[Optional[ast.expr], str]:
    """A device tensor handed to a logging call or a tensorboard scalar writer, with the verb."""
    func = call.func
    receiver = ast.unparse(func.value).lower()
    qualname = ctx.get(QualifiedNames).qualname(func) or ""
    if func.attr in SCALAR_WRITERS:
        how = "writing"
    elif func.attr in LOG_METHODS and (qualname.startswith("logging.") or "log" in receiver):
        how = "logging"
    else:
        return None, ""
    kind = ctx.get(TensorFacts).kind
    values = list(call.args) + [k.value for k in call.keywords]
    return next((v for v in values if kind(v) == DEVICE), None), how
