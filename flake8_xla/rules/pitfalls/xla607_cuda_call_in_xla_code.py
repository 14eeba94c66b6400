"""XLA607 cuda-call-in-xla-code."""
import ast
from typing import Iterator, Optional, Tuple

from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.syntax import NodeIndex, argument, dotted, is_constant
from flake8_xla.analysis.xla_scopes import XlaScopes
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.versions import Version

# calls that exist only on a host with a CUDA driver: they raise on a TPU VM
RAISING = frozenset("torch.cuda." + n for n in (
    "synchronize", "set_device", "current_device", "current_stream", "default_stream", "Stream", "stream",
    "ipc_collect", "reset_peak_memory_stats", "get_device_name", "get_device_properties", "mem_get_info"))
EMPTY_CACHE = "torch.cuda.empty_cache"
# autocast for CUDA: ``torch.cuda.amp.autocast()`` takes no device; the others take it first
CUDA_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
CUDA_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
SCALER = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})  # device defaults to "cuda"
# XLA:CUDA ran torch.autocast("cuda") on XLA tensors until it was removed
_XLA_CUDA_REMOVED = Version(2, 9)
_SORTED = Version(2, 5)  # torch_xla.sync(wait=...)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
RAISES = ("on a host without CUDA (a TPU VM) it raises (RuntimeError \"Found no NVIDIA driver on your system\"; with "
          "a CPU build of torch, AssertionError \"Torch not compiled with CUDA enabled\")")

HEADER = "import torch\nimport torch_xla\n\n"
TRAIN = ("def train(loader):\n    device = torch_xla.device()\n    model = Net().to(device)\n"
         "    optimizer = torch.optim.AdamW(model.parameters())\n")


def _is_cuda_text(node: Optional[ast.AST]) -> bool:
    """``"cuda"``, ``"cuda:0"`` or ``torch.device("cuda")`` written out."""
    if type(node) is ast.Constant:
        return isinstance(node.value, str) and node.value.split(":")[0] == "cuda"
    return type(node) is ast.Call and len(node.args) >= 1 and not node.keywords and \
        (dotted(node.func) or "").endswith("device") and _is_cuda_text(node.args[0])


# a CUDA use: the node, its message, and the end of its help (what it does on XLA, why the replacement)
CudaUse = Tuple[ast.AST, str, str]


def _cuda_use(node: ast.AST, label: str, problem: str, instead: str, effect: str, detail: str = "") -> CudaUse:
    """``label``: how the message names it; ``problem``: what it does on XLA, in a few words;
    ``instead``: the replacement; ``effect``: what it does on XLA, in full; ``detail``: why the replacement."""
    return node, f"{label} in XLA code {problem}; {instead}", f"{effect}.{detail}"


class CudaCallInXlaCode(Rule):
    code = "XLA607"
    name = "cuda-call-in-xla-code"
    summary = "A CUDA call (.cuda(), torch.cuda.*, CUDA autocast or GradScaler) in code that runs on the XLA device"
    what_it_does = (
        "Flags CUDA calls in a function (or a script's top level) that provably runs on the XLA device: "
        "`.cuda()`, `.to(\"cuda\")`, `device=\"cuda\"`, `torch.cuda.synchronize()` and the other `torch.cuda` "
        "calls that need a driver (`set_device`, `current_device`, `current_stream`, `Stream`, "
        "`get_device_name`, `mem_get_info`, ...), `torch.cuda.empty_cache()`, and, on torch_xla 2.9 and newer "
        "(XLA:CUDA is gone), `torch.cuda.amp.autocast()` / `torch.autocast(\"cuda\")` and "
        "`torch.cuda.amp.GradScaler()` / `torch.amp.GradScaler(\"cuda\")`. Provably means: the same scope "
        "gets the XLA device (`torch_xla.device()`, `xm.xla_device()`, `torch.device(\"xla\")`, or a name "
        "assigned one of those), syncs the graph, steps the optimizer with `xm.optimizer_step` or wraps a loader "
        "in `MpDeviceLoader`, and both that and the CUDA call run whenever the scope does: neither sits under an "
        "`if`/`else` (except one that tests for XLA, such as `if xm.xla_device_hw(d) == 'TPU':`, or a "
        "periodic `if step % n == 0:`), an `except` handler, a `try` with handlers, a conditional expression, "
        "`and`/`or`, a lambda, or a branch that never runs on XLA (`if torch.cuda.is_available():`, "
        "flash-attention and apex code). Multi-backend code (`if args.tpu: ... else: ...`, a device passed in "
        "by the caller, `device = xm.xla_device() if use_tpu else 'cuda'`, `enabled=use_amp`) and library "
        "code that never names the XLA device are left alone, and so are CUDA queries that only return a value "
        "(`torch.cuda.is_available()`, `device_count()`, `memory_allocated()`, `manual_seed()`)."
    )
    why_bad = (
        "XLA tensors live on the XLA device; CUDA calls talk to a native CUDA device that a TPU host does not "
        "have, and XLA:CUDA was removed in torch_xla 2.9. Measured on torch_xla 2.9 (CPU, no GPU): "
        "`torch.cuda.synchronize()`, `x.cuda()`, `torch.zeros(2, device='cuda')` and `torch.cuda.set_device(0)` "
        "raise `RuntimeError: Found no NVIDIA driver on your system` (with the CPU build of torch that TPU VMs often "
        "use, CUDA initialization raises `AssertionError: Torch not compiled with CUDA enabled` instead, "
        "torch/cuda/__init__.py); `torch.cuda.empty_cache()` returns and does "
        "nothing; inside `torch.cuda.amp.autocast()` or `torch.autocast('cuda')` a matmul of XLA tensors stays "
        "float32 (the CUDA autocast keys never see XLA tensors) and `torch.autocast('cuda', "
        "dtype=torch.bfloat16)` raises `RuntimeError: Current CUDA Device does not support bfloat16`; "
        "`torch.cuda.amp.GradScaler()` stays enabled (an installed torch_xla counts as 'AMP may be available'), "
        "scales the loss, and each `scaler.step()` reads the inf check on the host: 5 steps gave 5 "
        "`aten::_local_scalar_dense` and 10 graph executions instead of 5. bfloat16 on TPU needs no loss "
        "scaling. Before 2.9, `torch.autocast('cuda')` was how XLA:GPU ran AMP, so the autocast and GradScaler "
        "reports start with target 2.9."
    )
    fix_safety = "No automatic fix: what replaces a CUDA call (the XLA device, a sync, nothing) depends on its purpose."
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/amp.md",
        "https://github.com/pytorch/pytorch/issues/115900",
        "https://github.com/pytorch/xla/issues/9295",
    )
    valid = (
        Example(HEADER + TRAIN + "    for batch, target in loader:\n"
                "        with torch.autocast('xla', dtype=torch.bfloat16):\n"
                "            loss = loss_fn(model(batch.to(device)), target.to(device))\n"
                "        loss.backward()\n        optimizer.step()\n        torch_xla.sync()\n",
                title="XLA autocast, no scaler"),
        Example(HEADER + "def train(loader, args):\n"
                "    if torch.cuda.is_available():\n        device = torch.device('cuda')\n"
                "        torch.cuda.synchronize()\n    else:\n        device = torch_xla.device()\n"
                "    model = Net().to(device)\n",
                title="multi-backend code: the CUDA call is on the CUDA branch"),
        Example(HEADER + "def train(loader, args):\n    device = torch_xla.device()\n"
                "    scaler = torch.cuda.amp.GradScaler(enabled=args.fp16)\n"
                "    if args.fp16:\n        torch.cuda.empty_cache()\n",
                title="under a flag: may never run on XLA"),
        Example(HEADER + "def evaluate(model, device):\n    model.cuda()\n    torch.cuda.synchronize()\n",
                title="library code: the device comes from the caller"),
        Example(HEADER + "device = torch_xla.device()\n\n\ndef to_gpu(x):\n    return x.cuda()\n",
                title="another function that never names the XLA device"),
        Example(HEADER + "def train(loader):\n    device = torch_xla.device()\n"
                "    with torch.cuda.amp.autocast():\n        loss = model(batch)\n", target="2.8",
                title="before 2.9, XLA:GPU ran CUDA autocast"),
    )
    invalid = (
        Example(
            HEADER + TRAIN + "    scaler = torch.cuda.amp.GradScaler()\n    for batch, target in loader:\n"
            "        with torch.cuda.amp.autocast():\n"
            "            loss = loss_fn(model(batch.to(device)), target.to(device))\n"
            "        scaler.scale(loss).backward()\n        scaler.step(optimizer)\n        scaler.update()\n"
            "        torch_xla.sync()\n",
            expect=((8, 14, "torch.cuda.amp.GradScaler() in XLA code adds a graph execution per step; drop it",
                     "This code runs on the XLA device (`torch_xla.device()`, line 5): it stays enabled on XLA "
                     "and every scaler.step() reads its inf check on the host, one more graph execution per "
                     "step. bfloat16 on TPU needs no loss scaling: drop the scaler (and use "
                     "torch.autocast('xla', dtype=torch.bfloat16))."),
                    (10, 14, "torch.cuda.amp.autocast() in XLA code is CUDA-only; use torch.autocast('xla', "
                             "dtype=torch.bfloat16)",
                     "This code runs on the XLA device (`torch_xla.device()`, line 5): CUDA autocast does not "
                     "apply to XLA tensors, their ops stay float32."),),
            title="CUDA AMP in an XLA training loop",
        ),
        Example(
            HEADER + "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
            "model = Net().cuda()\nx = torch.zeros(8, 4, device='cuda')\nfor step in range(10):\n"
            "    loss = model(x).sum()\n    loss.backward()\n    xm.optimizer_step(optimizer)\n"
            "    torch.cuda.synchronize()\n    torch.cuda.empty_cache()\n",
            expect=((7, 9, "Net().cuda() in XLA code raises without CUDA; use .to(device) with the XLA device",
                     "This code runs on the XLA device (`xm.xla_device()`, line 6): on a host without CUDA (a "
                     'TPU VM) it raises (RuntimeError "Found no NVIDIA driver on your system"; with a CPU '
                     'build of torch, AssertionError "Torch not compiled with CUDA enabled"), and XLA:CUDA was '
                     "removed in torch_xla 2.9."),
                    (8, 5, "device='cuda' in XLA code raises without CUDA; use device=torch_xla.device()",
                     "This code runs on the XLA device (`xm.xla_device()`, line 6): on a host without CUDA (a "
                     'TPU VM) it raises (RuntimeError "Found no NVIDIA driver on your system"; with a CPU '
                     'build of torch, AssertionError "Torch not compiled with CUDA enabled"), and XLA:CUDA was '
                     "removed in torch_xla 2.9."),
                    (13, 5, "torch.cuda.synchronize() in XLA code raises without CUDA; use "
                            "torch_xla.sync(wait=True)",
                     "This code runs on the XLA device (`xm.xla_device()`, line 6): on a host without CUDA (a "
                     'TPU VM) it raises (RuntimeError "Found no NVIDIA driver on your system"; with a CPU '
                     'build of torch, AssertionError "Torch not compiled with CUDA enabled"), and XLA:CUDA was '
                     "removed in torch_xla 2.9. torch_xla.sync(wait=True) runs the pending graph and waits for "
                     "the device."),
                    (14, 5, "torch.cuda.empty_cache() in XLA code does nothing; remove it",
                     "This code runs on the XLA device (`xm.xla_device()`, line 6): it does nothing there, XLA "
                     "frees device memory when its tensors are freed."),),
            title="a script",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        uses = list(self._uses(ctx))
        if not uses:
            return
        judge = ctx.get(XlaScopes)
        for node, message, effect in uses:
            if not judge.unconditional(node, xla_branches=True, periodic=True):
                continue
            evidence = judge.evidence(ctx.get(NodeIndex).scope_of(node))
            if evidence is None:
                continue
            line = ctx.column(evidence.node)[0]
            yield self.diagnostic(ctx, node, message,
                                  help=f"This code runs on the XLA device (`{evidence.label}`, line {line}): {effect}")

    def _uses(self, ctx: FileContext) -> Iterator[CudaUse]:
        if ctx.target.version >= _SORTED:
            sync, synced = "torch_xla.sync(wait=True)", " torch_xla.sync(wait=True) runs the pending graph and waits"
        else:
            sync, synced = "xm.mark_step(), xm.wait_device_ops()", \
                " xm.mark_step() and xm.wait_device_ops() run the pending graph and wait"
        amp = ctx.target.version >= _XLA_CUDA_REMOVED
        raises = RAISES + (", and XLA:CUDA was removed in torch_xla 2.9" if amp else "")
        without_cuda = "raises without CUDA"
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if ref.is_import or call is None:
                continue
            name, label = ref.qualname, f"{ref.written_prefix(ref.qualname)}()"
            if name in RAISING:
                if name.endswith("synchronize"):
                    yield _cuda_use(call, label, without_cuda, f"use {sync}", raises, f"{synced} for the device.")
                else:
                    yield _cuda_use(call, label, without_cuda, "use torch_xla.device()", raises,
                                    " torch_xla picks each process's device itself: use torch_xla.device() "
                                    "(xm.xla_device_hw(device) names its kind).")
            elif name == EMPTY_CACHE:
                yield _cuda_use(call, label, "does nothing", "remove it",
                                "it does nothing there, XLA frees device memory when its tensors are freed")
            elif not amp or not _enabled(call):
                continue
            elif name in CUDA_AUTOCAST or name in AUTOCAST and _is_cuda_text(argument(call, 0, "device_type")):
                if name in AUTOCAST:
                    label = f"{ref.written_prefix(ref.qualname)}({ast.unparse(argument(call, 0, 'device_type'))})"
                yield _cuda_use(call, label, "is CUDA-only", "use torch.autocast('xla', dtype=torch.bfloat16)",
                                _autocast_effect(call))
            elif name in CUDA_SCALER or name in SCALER and _cuda_or_default(argument(call, 0, "device")):
                if name in SCALER and argument(call, 0, "device") is not None:
                    label = f"{ref.written_prefix(ref.qualname)}({ast.unparse(argument(call, 0, 'device'))})"
                yield _cuda_use(call, label, "adds a graph execution per step", "drop it",
                                "it stays enabled on XLA and every scaler.step() reads its inf check on the host, one "
                                "more graph execution per step",
                                " bfloat16 on TPU needs no loss scaling: drop the scaler (and use "
                                "torch.autocast('xla', dtype=torch.bfloat16)).")
        names = ctx.get(QualifiedNames)
        to_xla = "use .to(device) with the XLA device"
        for call in ctx.get(NodeIndex).of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and names.qualname(func) is None:
                if func.attr == "cuda" and len(call.args) <= 1 and names.qualname(func.value) is None:
                    label = f"{_short(func.value)}.cuda()"
                    if _empty_loss(func.value, names):
                        yield _cuda_use(call, label, "is CUDA-only", to_xla,
                                        "the loss holds no tensors, so it does nothing yet; given a weight it raises "
                                        "on a host without CUDA (a TPU VM)")
                    else:
                        yield _cuda_use(call, label, without_cuda, to_xla, raises)
                    continue
                if func.attr == "to" and call.args and _is_cuda_text(call.args[0]):
                    yield _cuda_use(call, f".to({ast.unparse(call.args[0])})", without_cuda, to_xla, raises)
                    continue
            for keyword in call.keywords:
                if keyword.arg == "device" and _is_cuda_text(keyword.value):
                    yield _cuda_use(call, f"device={ast.unparse(keyword.value)}", without_cuda,
                                    "use device=torch_xla.device()", raises)


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    if len(text) <= 30 and "\n" not in text:
        return text
    return f"{_short(node.func)}(...)" if type(node) is ast.Call else "..."


def _empty_loss(node: ast.AST, names: QualifiedNames) -> bool:
    """``nn.BCEWithLogitsLoss(reduction='mean')``: a torch.nn loss built without a tensor (no weight)."""
    if type(node) is not ast.Call:
        return False
    qualname = names.qualname(node.func) or ""
    return qualname.startswith("torch.nn.") and qualname.endswith("Loss") and not node.args and \
        all(type(k.value) is ast.Constant for k in node.keywords)


def _enabled(call: ast.Call) -> bool:
    """Not ``enabled=False`` nor ``enabled=<flag>``: the default, or ``enabled=True``."""
    value = next((k.value for k in call.keywords if k.arg == "enabled"), None)
    return value is None or is_constant(value, True)


def _cuda_or_default(device: Optional[ast.AST]) -> bool:
    return device is None or _is_cuda_text(device)


def _autocast_effect(call: ast.Call) -> str:
    dtype = dotted(next((k.value for k in call.keywords if k.arg == "dtype"), None)) or ""
    if dtype.endswith("bfloat16"):
        return ("CUDA autocast does not apply to XLA tensors, and with dtype=torch.bfloat16 and no GPU it raises "
                "RuntimeError (\"Current CUDA Device does not support bfloat16\")")
    return "CUDA autocast does not apply to XLA tensors, their ops stay float32"
