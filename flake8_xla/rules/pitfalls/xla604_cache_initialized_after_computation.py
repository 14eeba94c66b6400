"""XLA604 cache-initialized-after-computation."""
import ast
from typing import Iterator

from flake8_xla.analysis.control import FlowFacts, within
from flake8_xla.rules.examples import EXAMPLE_XM, EXAMPLE_XR
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.computations import DeviceComputations
from flake8_xla.analysis.syntax import Parents
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

INITIALIZE_CACHE = "torch_xla.runtime.initialize_cache"
HEADER = "import torch\nimport torch_xla\n" + EXAMPLE_XR
EFFECT = ("initialize_cache() fails with AssertionError 'Computation cache has already been initialized' (and a "
          "try/except around it leaves the persistent cache off).")


class CacheInitializedAfterComputation(Rule):
    code = "XLA604"
    name = "cache-initialized-after-computation"
    summary = "torch_xla.runtime.initialize_cache() called after a computation ran on the XLA device"
    since = "0.2.0"
    what_it_does = (
        "Flags `torch_xla.runtime.initialize_cache(path)` when, earlier in the same function (or at top level) "
        "and not in a branch it is not in, something surely compiled and ran a graph on the XLA device: "
        "`xm.rendezvous()`, `xm.xla_rendezvous()`, `xm.mesh_reduce()`, `xm.broadcast_master_param()`, "
        "`xm.optimizer_step(optimizer, barrier=True)`, a call of a `torch_xla.compile`d function, a loop over an "
        "`MpDeviceLoader` (it syncs every batch) or a training loop that syncs, a `torch_xla.sync()` / "
        "`xm.mark_step()` / `with torch_xla.step():` after an operation on device tensors, and reading a computed "
        "device value on the host (`.item()`, `.tolist()`, `.numpy()`, `.cpu()`, `float()`, `print()`). Taking "
        "the device, creating tensors on it or moving a model there does not count: none of them compiles "
        "anything, and the cache can still be set up after them. Code in other functions is not followed, and a "
        "call under `if not torch_xla._XLAC._xla_computation_cache_is_initialized():` is not reported."
    )
    why_bad = (
        "The persistent compilation cache is read from the environment when the runtime creates its "
        "computation cache, at the first compilation; `initialize_cache` asserts that this has not happened "
        "yet (`torch_xla/runtime.py`). Measured on torch_xla 2.9, CPU: after `torch_xla.device()`, "
        "`torch.ones(3, device=device)`, `model.to(device)` and even `torch_xla.sync()` with nothing pending "
        "the cache is still uninitialized and `initialize_cache(tmpdir)` works (one file in the directory after "
        "the next computation); after `(t * 2).cpu()`, `.sum().item()`, `print(t)`, a sync after a forward "
        "pass, `xm.rendezvous('x')`, `xm.mesh_reduce(...)`, `xm.broadcast_master_param(model)`, "
        "`xm.optimizer_step(opt, barrier=True)`, a compiled function's call or a loop over an MpDeviceLoader it "
        "raises `AssertionError: Computation cache has already been initialized`."
    )
    fix_safety = "No automatic fix: moving initialize_cache() up can cross the code that computes its path."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/runtime.py",
                  "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/recompilation.md")
    valid = (
        Example(HEADER + "\nxr.initialize_cache('/tmp/xla_cache')\ndevice = torch_xla.device()\n"
                "loss = (torch.ones(3, device=device) * 2).sum()\nprint(loss.item())\n",
                title="the cache first"),
        Example(HEADER + "\ndevice = torch_xla.device()\nmodel = torch.nn.Linear(3, 3).to(device)\n"
                "torch_xla.sync()\nxr.initialize_cache('/tmp/xla_cache')\n",
                title="taking the device and moving data there compile nothing"),
        Example(HEADER + EXAMPLE_XM + "\ndef warm_up():\n    xm.rendezvous('ready')\n\n\n"
                "def main():\n    xr.initialize_cache('/tmp/xla_cache')\n    warm_up()\n",
                title="another function: its order is not followed"),
        Example(HEADER + "\ndevice = torch_xla.device()\nif debug:\n"
                "    print((torch.ones(3, device=device) + 1).cpu())\n"
                "xr.initialize_cache('/tmp/xla_cache')\n",
                title="a computation in a branch that may not run"),
        Example(HEADER + EXAMPLE_XM + "\nxm.rendezvous('start')\n"
                "if not torch_xla._XLAC._xla_computation_cache_is_initialized():\n"
                "    xr.initialize_cache('/tmp/xla_cache')\n",
                title="a program that checks first"),
    )
    invalid = (
        Example(
            HEADER + "\ndevice = torch_xla.device()\nt = torch.ones(3, device=device)\nprint((t * 2).sum().item())\n"
            "xr.initialize_cache('/tmp/xla_cache')\n",
            expect=((8, 1, "initialize_cache() after a computation on the XLA device fails; call it before "
                           "anything runs",
                     "A computation ran on the XLA device first (.item() on line 7): initialize_cache() fails "
                     "with AssertionError 'Computation cache has already been initialized' (and a try/except "
                     "around it leaves the persistent cache off)."),),
        ),
        Example(
            HEADER + EXAMPLE_XM + "\n\ndef _mp_fn(index):\n    xm.rendezvous('start')\n"
            "    xr.initialize_cache(f'/tmp/xla_cache_{index}')\n",
            expect=((9, 5, "initialize_cache() after a computation on the XLA device fails; call it before "
                           "anything runs",
                     "A computation ran on the XLA device first (xm.rendezvous() on line 8): "
                     "initialize_cache() fails with AssertionError 'Computation cache has already been "
                     "initialized' (and a try/except around it leaves the persistent cache off)."),),
            title="a rendezvous compiles a graph",
        ),
        Example(
            HEADER + "import torch_xla.distributed.parallel_loader as pl\n\n\ndef train(model, loader, optimizer):\n"
            "    device = torch_xla.device()\n    for x, y in pl.MpDeviceLoader(loader, device):\n"
            "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"
            "    xr.initialize_cache('/tmp/xla_cache')\n",
            expect=((13, 5, "initialize_cache() after a computation on the XLA device fails; call it before "
                            "anything runs",
                     "A computation ran on the XLA device first (the loop over a device loader on line 9): "
                     "initialize_cache() fails with AssertionError 'Computation cache has already been "
                     "initialized' (and a try/except around it leaves the persistent cache off)."),),
            title="after a training loop",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        calls = [ref.call for ref in ctx.get(SemanticModel).references
                 if ref.call is not None and ref.qualname == INITIALIZE_CACHE]
        if not calls:
            return
        flow = ctx.get(FlowFacts)
        found = ctx.get(DeviceComputations).found
        parents = ctx.get(Parents)
        for call in calls:
            at = flow.place(call)
            if at is None or _checked_first(call, parents):
                continue
            earlier = [(node, what) for node, what, where in found
                       if (node.lineno, node.col_offset) < (call.lineno, call.col_offset) and within(at, where)]
            if earlier:
                node, what = min(earlier, key=lambda pair: (pair[0].lineno, pair[0].col_offset))
                yield self.diagnostic(
                    ctx, call, "initialize_cache() after a computation on the XLA device fails; call it before "
                    "anything runs",
                    help=f"A computation ran on the XLA device first ({what} on line {node.lineno}): {EFFECT}")


def _checked_first(call: ast.Call, parents: Parents) -> bool:
    """Under ``if not torch_xla._XLAC._xla_computation_cache_is_initialized():``: the program knows."""
    return any("computation_cache_is_initialized" in ast.unparse(node.test) for node, _ in parents.conditionals(call))
