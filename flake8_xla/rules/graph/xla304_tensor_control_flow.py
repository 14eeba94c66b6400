"""XLA304 tensor-control-flow."""
import ast
from typing import Iterator, Optional

from flake8_xla.rules.graph.wording import BUDGET, fit, runs, where
from flake8_xla.analysis.backends import on_xla
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.values import DEVICE
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.loops import StepRegions
from flake8_xla.analysis.syntax import NodeIndex

STEP = ("import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n\n"
        "device = torch_xla.device()\nmodel = torch.nn.Linear(8, 1).to(device)\n"
        "for data, target in pl.MpDeviceLoader(loader, device):\n"
        "    loss = torch.nn.functional.mse_loss(model(data), target)\n")
WHY = ("Python needs the value, so the pending graph is cut and run there and the value copied to the host, "
       "and each outcome traces a different graph")


class TensorControlFlow(Rule):
    code = "XLA304"
    name = "tensor-control-flow"
    summary = "Python control flow on a tensor's value (if / while / assert / conditional expression)"
    what_it_does = (
        "Flags `if`, `while`, `assert` and conditional expressions whose test is a device tensor (`if loss > 0:`, "
        "`while loss > eps:`, `if (x > 0).any():`, `assert t.all()`), in code that runs once per step (see "
        "XLA303: training, model and device-loader loops, the functions of the file they call, "
        "`torch_xla.compile` and `torch.compile(backend=\"openxla\")` functions) and in `forward()` of an "
        "`nn.Module` subclass. There the first parameter is taken to be the input tensor; the others are "
        "tensors only where the body uses them as one (`mask.unsqueeze(1)`, `torch.relu(h)`, `self.proj(h)`), "
        "so `if seq_len != self.cached:` stays silent. Tests on Python values are fine: `if mask is not None:`, "
        "`if x.dim() == 3:`, `if self.training:`, `if torch.cuda.is_available():`, `if step % 10 == 0:`."
    )
    why_bad = (
        "A Python branch needs a Python bool. On a lazy XLA tensor that means executing the graph traced so far "
        "and copying the result to the host, every time (the same `aten::_local_scalar_dense` transfer as "
        "`.item()`), and each branch taken traces its own graph, so the step may recompile. Under "
        "`torch.compile(backend=\"openxla\")` it is a graph break. `torch.where(cond, a, b)` keeps the choice on "
        "the device in one static graph."
    )
    fix_safety = "No automatic fix: both branches have to be rewritten as tensor operations."
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/perf/recompilation.md",
                  "https://github.com/pytorch/xla/blob/master/docs/source/learn/troubleshoot.md")
    valid = (
        Example(STEP + "    loss = torch.where(loss > 10.0, loss * 0.1, loss)\n    loss.backward()\n"
                "    optimizer.step()\n", title="torch.where keeps the choice on the device"),
        Example("import torch\nimport torch_xla\n\n\nclass Block(torch.nn.Module):\n"
                "    def forward(self, x, mask=None, scale=1.0):\n        if mask is not None and x.dim() == 3:\n"
                "            x = x.masked_fill(mask, 0.0)\n        if self.training and scale != 1.0:\n"
                "            x = x * scale\n        return x\n", title="tests on Python values"),
        Example(STEP + "    loss.backward()\n    optimizer.step()\n"
                "    if not is_torch_xla_available() and torch.isnan(loss):\n        print('nan')\n",
                title="a branch that never runs on XLA"),
    )
    invalid = (
        Example(
            STEP + "    if loss > 10.0:\n        loss = loss * 0.1\n    loss.backward()\n    optimizer.step()\n",
            expect=((9, 8, "`if loss > 10.0` branches on a tensor on every training step; use torch.where",
                     WHY + ". Compute both sides and choose with torch.where(cond, a, b)."),),
        ),
        Example(
            "import torch\nimport torch_xla\n\n\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n"
            "        if (x > 0).any():\n            return torch.relu(x)\n        return x\n",
            expect=((7, 12, "`if (x > 0).any()` branches on a tensor on every forward pass; use torch.where"),),
            title="in forward()",
        ),
        Example(
            STEP + "    loss.backward()\n    optimizer.step()\n    assert torch.isfinite(loss)\n",
            expect=((11, 12, "`assert torch.isfinite(loss)` reads a tensor on every training step; check it every N "
                             "steps",
                     WHY + ". Check it every N steps (under `if step % N == 0:`) or after the loop."),),
            title="an assert",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        regions = ctx.get(StepRegions)
        for node in ctx.get(NodeIndex).of(ast.If, ast.While, ast.Assert, ast.IfExp):
            kind = type(node)
            region = regions.region_of(node.test)
            if region is None:
                continue
            operand = _device_operand(ctx, node.test)
            if operand is None:
                continue
            place = where(region)
            if kind is ast.While:
                head, rest = "`while ", f"` tests a tensor {place}; run a fixed number of iterations"
                hint = (f"{runs(region)}{WHY}, one per trip count. Run a fixed number of iterations and mask "
                        "the finished ones with torch.where.")
            elif kind is ast.Assert:
                head, rest = "`assert ", f"` reads a tensor {place}; check it every N steps"
                hint = (f"{runs(region)}{WHY}. Check it every N steps (under `if step % N == 0:`) or after "
                        "the loop.")
            else:
                head, rest = "`if ", f"` branches on a tensor {place}; use torch.where"
                hint = f"{runs(region)}{WHY}. Compute both sides and choose with torch.where(cond, a, b)."
            yield self.diagnostic(ctx, operand, fit(node.test, "...", BUDGET, head, rest), help=hint)


def _device_operand(ctx: FileContext, test: ast.expr) -> Optional[ast.expr]:
    """The part of a test that Python converts to bool and that is a device tensor."""
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        return _device_operand(ctx, test.operand)
    if type(test) is ast.BoolOp:
        if on_xla(test) is False:
            return None  # `... and not is_torch_xla_available() and ...`: never evaluated on XLA
        return next((found for found in (_device_operand(ctx, v) for v in test.values) if found is not None), None)
    return test if ctx.get(TensorFacts).kind(test) == DEVICE else None
