"""XLA302 blocking-sync-in-step."""
import ast
from typing import Iterator

from flake8_xla.analysis.loops import SYNCS, RegionKind
from flake8_xla.rules.graph.wording import EVALUATION_BATCH, hands_off
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.syntax import NodeIndex, Parents
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.loops import StepRegions

# calls that block the host until the device is done (or sync several times) on every call
BLOCKING = {
    "torch_xla.core.xla_model.wait_device_ops": "waits for all device work",
    "torch_xla.core.xla_model.unlazy": "executes and waits for the pending graph",
    "torch_xla.core.xla_model.rendezvous": "syncs the graph several times and waits for every replica",
    "torch_xla.core.xla_model.xla_rendezvous": "syncs the graph several times and waits for every replica",
    "torch_xla.core.xla_model.mesh_reduce": "syncs, copies the data to the host and waits for every replica",
    "torch_xla.core.xla_model.save": "waits for the device and copies the data to the host",
    "torch_xla.core.xla_model.do_on_ordinals": "waits for every replica",
}
# what blocks an evaluation loop on every batch the same way (a checkpoint there is not a pattern)
EVALUATION_BLOCKING = frozenset(BLOCKING) - {"torch_xla.core.xla_model.save"}
LOOP = ("import torch\nimport torch_xla\n\nfor data, target in loader:\n    optimizer.zero_grad()\n"
        "    loss = model(data).sum()\n    loss.backward()\n    optimizer.step()\n")


class BlockingSyncInStep(Rule):
    code = "XLA302"
    name = "blocking-sync-in-step"
    summary = "A call that blocks the host on every step of a training loop"
    what_it_does = (
        "Flags, inside a training loop (a loop whose body calls `.backward()`, `optimizer.step()` or "
        "`xm.optimizer_step`, itself or through a function of this file), `torch_xla.sync(wait=True)`, "
        "`xm.mark_step(wait=True)`, "
        "`xm.wait_device_ops()`, `xm.unlazy()`, and `xm.rendezvous`/`xla_rendezvous`/`mesh_reduce`/"
        "`save`/`do_on_ordinals`, also in a function of this file that the loop calls (`model.mix()` that waits). "
        "The rendezvous helpers and waits are also flagged on every batch of an evaluation loop over a loader "
        "(`xm.mesh_reduce` of each batch's loss). Calls under `if step % N == 0:` (or `if log_now:` with "
        "`log_now = step % N == 0`), calls that run once "
        "(under `if step == 0:` or `if warmed == 2:` on a counter the loop increments, or in a branch that leaves "
        "the loop with `break`/`return`), and calls before or "
        "after the loop are fine, and so is a wait right before the step reads a clock (`xm.wait_device_ops()` then "
        "`t1 = time.perf_counter()`): that measures the step, as benchmarks do."
    )
    why_bad = (
        "torch_xla overlaps tracing the next step with executing the current one. A blocking call makes "
        "the host wait for the device every step, so that overlap is lost; the rendezvous helpers also "
        "sync the graph several times and copy data to the host. The torch_xla docs keep "
        "`sync(wait=True)` for benchmarking only."
    )
    fix_safety = "No automatic fix: whether the wait is needed depends on what follows it."
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/learn/trace-vs-execution-time.md",)
    valid = (
        Example(LOOP + "    torch_xla.sync()\n", title="a plain sync per step"),
        Example("import torch_xla\nimport xla_compat\n\nfor step, (data, target) in enumerate(loader):\n"
                "    model(data).sum().backward()\n    optimizer.step()\n    torch_xla.sync()\n"
                "    if step % 100 == 0:\n        xla_compat.save(model.state_dict(), 'model.pt')\n"
                "torch_xla.sync(wait=True)\n", title="throttled, and after the loop"),
        Example("import torch_xla\n\nfor data in loader:\n    predictions = model(data)\n"
                "    torch_xla.sync(wait=True)\n", title="not a training loop"),
        Example(LOOP.replace("for data, target in loader:", "for step, (data, target) in enumerate(loader):") +
                "    torch_xla.sync()\n    if step == profile_step:\n        torch_xla.sync(wait=True)\n"
                "    if step >= max_steps:\n        torch_xla.sync(wait=True)\n        break\n",
                title="once: on one step, or in a branch that leaves the loop"),
        Example("import time\nimport torch_xla.core.xla_model as xm\n\nfor data in loader:\n    start = time.time()\n"
                "    model(data).sum().backward()\n    xm.optimizer_step(optimizer)\n    xm.wait_device_ops()\n"
                "    step_time = time.time() - start\n",
                title="a benchmark timing each step"),
        Example("import torch_xla.core.xla_model as xm\n\nwarmed = 0\nfor data in loader:\n"
                "    model(data).sum().backward()\n    xm.optimizer_step(optimizer)\n    if warmed < 2:\n"
                "        warmed += 1\n        if warmed == 2:\n            xm.rendezvous('warm')\n",
                title="once: a counter the loop increments, tested for equality"),
    )
    invalid = (
        Example(
            LOOP + "    torch_xla.sync(wait=True)\n",
            expect=((9, 5, "torch_xla.sync(wait=True) blocks the host on every training step; use torch_xla.sync()",
                     "It waits for the device to finish: tracing no longer overlaps execution. Wait only where a "
                     "result is needed, e.g. every N steps."),),
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\nfor epoch in range(10):\n    for data in loader:\n"
            "        model(data).sum().backward()\n        xm.optimizer_step(optimizer)\n"
            "        xm.wait_device_ops()\n    xm.wait_device_ops()\n",
            expect=((7, 9, "xm.wait_device_ops() blocks the host on every training step; move it after the loop"),),
            title="the epoch loop around the step loop is fine",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        calls = [r for r in ctx.get(SemanticModel).references
                 if r.call is not None and (r.qualname in BLOCKING or r.qualname in SYNCS)]
        if not calls:
            return
        regions = ctx.get(StepRegions)
        parents = None
        for ref in calls:
            call = ref.call
            # every step: the training loop's body, its inner loops and the file's functions it calls,
            # not what runs once (`if step == 0:`, a branch ending in break) or every N steps; and every
            # batch of an evaluation loop
            region = regions.region_of(call)
            if region is None:
                continue
            if parents is None:
                parents = ctx.get(Parents)
                clocks = {id(r.node) for r in ctx.get(SemanticModel).references if r.qualname in _CLOCKS}
            if _timed(call, parents, ctx.get(NodeIndex), clocks):
                continue  # a wait right before reading a clock measures the step: what benchmarks do
            spelled = ref.written_prefix(ref.qualname)
            if region.kind != RegionKind.TRAINING_LOOP:
                if ref.qualname in EVALUATION_BLOCKING and hands_off(region) and regions.over_batches(region):
                    yield self.diagnostic(ctx, call, (
                        f"{spelled}() blocks the host {EVALUATION_BATCH}; reduce once after the loop"), help=(
                        f"It {BLOCKING[ref.qualname]}: each batch waits for the device and the other replicas. "
                        "Accumulate on the device and reduce once after the loop."))
                continue
            if ref.qualname in SYNCS:
                wait = next((k.value for k in call.keywords if k.arg == "wait"), call.args[0] if call.args else None)
                if not (type(wait) is ast.Constant and wait.value is True):
                    continue
                yield self.diagnostic(ctx, call, (
                    f"{spelled}(wait=True) blocks the host on every training step; use {spelled}()"), help=(
                    "It waits for the device to finish: tracing no longer overlaps execution. Wait only where a "
                    "result is needed, e.g. every N steps."))
            else:
                yield self.diagnostic(ctx, call, (
                    f"{spelled}() blocks the host on every training step; move it after the loop"), help=(
                    f"It {BLOCKING[ref.qualname]}: tracing no longer overlaps execution. Move it after the loop, or "
                    "run it every N steps."))


_CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.perf_counter_ns", "time.time_ns",
                     "time.monotonic_ns", "timeit.default_timer"})


def _timed(call: ast.Call, parents: Parents, index: NodeIndex, clocks) -> bool:
    """The call is a statement whose next statement in its block reads a clock (``t1 = time.time()``)."""
    stmt = parents.of(call)
    if type(stmt) is not ast.Expr:
        return False
    after = parents.statement_after(stmt)
    return after is not None and any(id(n) in clocks for n in index.below([after]))
