"""XLA402 checkpoint-manager-misses-preemption."""
import ast
from typing import Iterator, List, Optional

from flake8_xla.analysis.checkpoints import Checkpointing, ManagerBuild, loop_variables, names_in
from flake8_xla.rules.examples import EXAMPLE_MANAGER
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.syntax import NodeIndex, dotted

HEADER = "import torch\n" + EXAMPLE_MANAGER
# the manager's methods that consult the preemption sync point for the step they are given
_CONSULTS = frozenset({"save", "save_async", "should_save", "reached_preemption"})
LOOP = ("for step, batch in enumerate(loader):\n"
        "    loss = model(batch).sum()\n    loss.backward()\n    optimizer.step()\n")


def _indent(text: str) -> str:
    return "".join("    " + line + "\n" for line in text.splitlines())


class CheckpointManagerMissesPreemption(Rule):
    code = "XLA402"
    name = "checkpoint-manager-misses-preemption"
    summary = "torch_xla's CheckpointManager given only some of the training steps, so it misses the preemption point"
    what_it_does = (
        "Flags `save(step, ...)` / `save_async(step, ...)` of torch_xla's "
        "`torch_xla.experimental.distributed_checkpoint.CheckpointManager` (built in the same function, "
        "or assigned to `self.<attr>` in the same class, with `chkpt_on_preemption` left to its default "
        "`True` or set to `True`) that a training loop calls only on some steps: under a test on the step "
        "(`if step % 100 == 0:`), or once per epoch outside the step loop, while nothing else in the loop "
        "asks the manager about every step (`should_save(step)`, `reached_preemption(step)`)."
    )
    why_bad = (
        "The manager takes its preemption checkpoint inside `save`/`save_async`: `should_save(step)` asks "
        "`reached_preemption(step)` (the runtime's preemption sync point) and saves when the step is the "
        "agreed one. When a SIGTERM announces a preemption, the hosts agree on a step just ahead of the "
        "one they have reached, and only a `save` called with that very step takes the checkpoint. Called "
        "every 100 steps (the manager already skips the steps between its own `save_interval`), it almost "
        "never sees that step: no preemption checkpoint is written, with no error, and the restarted job "
        "loses everything since the last periodic save. torch_xla's guide says to call `save` or "
        "`save_async` on every step."
    )
    fix_safety = ("No automatic fix: moving the call out of the `if` changes when the state dict is built; "
                  "`force=True`, if the code passes it, must go too, or every step is saved.")
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/experimental/distributed_checkpoint/manager.py",
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/spmd_distributed_checkpoint.md",
    )
    valid = (
        Example(HEADER + "\n\ndef train(model, optimizer, loader):\n"
                "    mgr = CheckpointManager('gs://bucket/run', save_interval=100)\n" + _indent(LOOP) +
                "        state_dict = {'model': model.state_dict(), 'optim': optimizer.state_dict()}\n"
                "        mgr.save_async(step, state_dict)\n",
                title="called every step: the manager decides when to save, preemption included"),
        Example(HEADER + "\nmgr = CheckpointManager('gs://bucket/run', save_interval=100)\n" + LOOP +
                "    if mgr.should_save(step):\n        mgr.save(step, {'model': model.state_dict()}, force=True)\n",
                title="should_save() asked every step"),
        Example(HEADER + "\nmgr = CheckpointManager('/tmp/run', 100, chkpt_on_preemption=False)\n" + LOOP +
                "    if step % 100 == 0:\n        mgr.save(step, {'model': model.state_dict()}, force=True)\n",
                title="preemption checkpoints turned off"),
        Example(HEADER + "\ndef train(mgr, model, optimizer, loader):\n"
                "    for step, batch in enumerate(loader):\n        model(batch).sum().backward()\n"
                "        optimizer.step()\n        if step % 100 == 0:\n"
                "            mgr.save(step, {'model': model.state_dict()})\n",
                title="a manager from a parameter: unknown, silent"),
        Example(HEADER + "\nmgr = CheckpointManager('/tmp/run', 100)\n" + LOOP +
                "    if args.checkpoint:\n        mgr.save(step, {'model': model.state_dict()})\n",
                title="a test that does not change between steps"),
    )
    invalid = (
        Example(
            HEADER + "\n\ndef train(model, optimizer, loader):\n"
            "    mgr = CheckpointManager('gs://bucket/run', save_interval=100)\n" +
            _indent(LOOP) +
            "        if step % 100 == 0:\n            mgr.save(step, {'model': model.state_dict()}, force=True)\n",
            expect=((12, 13, "mgr.save() runs on some steps only and misses preemptions; call it on every step",
                     "It runs only when `step % 100 == 0` (line 11), so the CheckpointManager (line 6, "
                     "chkpt_on_preemption=True by default) never sees the other steps and misses the "
                     "preemption sync point: no preemption checkpoint is taken. Call mgr.save(step, "
                     "state_dict) without force=True on every step (it saves every save_interval steps itself)."),),
        ),
        Example(
            HEADER + "\n\nclass Trainer:\n    def __init__(self, path):\n"
            "        self.ckpt = CheckpointManager(path, save_interval=500, chkpt_on_preemption=True)\n\n"
            "    def fit(self, model, optimizer, loader):\n        global_step = 0\n"
            "        for batch in loader:\n            model(batch).sum().backward()\n"
            "            optimizer.step()\n            global_step += 1\n"
            "            if global_step % 500 == 0:\n"
            "                self.ckpt.save_async(global_step, {'model': model.state_dict()})\n",
            expect=((16, 17, "self.ckpt.save_async() runs on some steps only and misses preemptions; call it "
                             "on every step",
                     "It runs only when `global_step % 500 == 0` (line 15), so the CheckpointManager (line 7) "
                     "never sees the other steps and misses the preemption sync point: no preemption "
                     "checkpoint is taken. Call self.ckpt.save_async(step, state_dict) on every step (it saves "
                     "every save_interval steps itself)."),),
            title="a manager held by the trainer, saved from its loop",
        ),
        Example(
            HEADER + "\nmgr = CheckpointManager('/tmp/run', save_interval=1)\n"
            "for epoch in range(10):\n    for batch in loader:\n        model(batch).sum().backward()\n"
            "        optimizer.step()\n    mgr.save(epoch, {'model': model.state_dict()})\n",
            expect=((9, 5, "mgr.save() runs on some steps only and misses preemptions; call it on every step",
                     "It runs once per iteration of the loop at line 5, around the training loop (line 6), so "
                     "the CheckpointManager (line 4, chkpt_on_preemption=True by default) never sees the other "
                     "steps and misses the preemption sync point: no preemption checkpoint is taken. Call "
                     "mgr.save(step, state_dict) on every step (it saves every save_interval steps itself)."),),
            title="once per epoch",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        facts = ctx.get(Checkpointing)
        if not any(b.upstream for b in facts.builds):
            return
        for call in facts.method_calls("save", "save_async"):
            builds = facts.managers(call.func.value)
            if not builds or not all(b.upstream and b.preemption is True for b in builds):
                continue
            found = facts.loop_over_steps(call)
            if found is None:
                continue
            loop, is_training_loop = found
            receiver = dotted(call.func.value)
            # another call that shows the manager every step: in the step loop (or each step loop of an epoch loop)
            step_loops = [loop] if is_training_loop else facts.training_loops_in(loop)
            if any(n is not call and type(n) is ast.Call and type(n.func) is ast.Attribute and
                   n.func.attr in _CONSULTS and dotted(n.func.value) == receiver
                   for step_loop in step_loops for n in facts.every_step(step_loop)):
                continue
            how = self._how(facts, ctx.get(NodeIndex), call, loop, is_training_loop)
            if how is None:
                continue
            forced = " without force=True" if any(k.arg == "force" for k in call.keywords) or len(call.args) > 2 else ""
            method = f"{receiver}.{call.func.attr}"
            yield self.diagnostic(
                ctx, call, f"{method}() runs on some steps only and misses preemptions; call it on every step",
                help=(f"It runs {how}, so the CheckpointManager ({_where(builds)}) never sees the other steps and "
                      f"misses the preemption sync point: no preemption checkpoint is taken. Call "
                      f"{method}(step, state_dict){forced} on every step (it saves every save_interval steps "
                      "itself)."))

    @staticmethod
    def _how(facts: Checkpointing, index: NodeIndex, call: ast.Call, loop: ast.AST,
             is_training_loop: bool) -> Optional[str]:
        """How seldom the call runs, or None when it may run every step."""
        if not is_training_loop:
            inner = facts.training_loops_in(loop)[0]
            return (f"once per iteration of the loop at line {loop.lineno}, around the training loop "
                    f"(line {inner.lineno})")
        changing = loop_variables(loop, loop.body)
        for guard in facts.guards(call, loop):
            test = guard.test
            if any(type(n) is ast.BinOp and type(n.op) is ast.Mod for n in index.below([test])) or \
                    names_in(test) & changing:
                return f"only when `{ast.unparse(test)}` (line {guard.lineno})"
        return None


def _where(builds: List[ManagerBuild]) -> str:
    lines = sorted({b.call.lineno for b in builds})
    where = "line" + ("s " if len(lines) > 1 else " ") + ", ".join(map(str, lines))
    if all(not any(k.arg == "chkpt_on_preemption" for k in b.call.keywords) for b in builds):
        where += ", chkpt_on_preemption=True by default"
    return where
