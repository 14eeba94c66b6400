"""XLA904 checkpoint-never-restored."""
import ast
import re
from typing import Iterator, List, Optional, Tuple

from flake8_xla.analysis.checkpoints import (COMPAT_MANAGERS, DCP_LOADS, DCP_SAVES, MANAGERS, Checkpointing,
                                             state_dict_owners)
from flake8_xla.rules.examples import EXAMPLE_MANAGER
from flake8_xla.analysis.fsdp import SAVES, TORCH_SAVE, CheckpointFacts, runs_as_program
from flake8_xla.analysis.loops import is_test_file
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.syntax import NodeIndex
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

# calls that read a checkpoint back
LOADS = DCP_LOADS | frozenset({"torch.load", "torch_xla.utils.serialization.load", "safetensors.torch.load_file",
                               "safetensors.torch.load_model", "safetensors.torch.load"})
# methods that restore or look for a checkpoint to restore
_RESTORE_METHODS = frozenset({"restore", "load_state_dict", "all_steps", "latest_step", "committed_steps",
                              "restore_latest", "load_checkpoint"})
# a name, attribute, keyword or string that speaks of resuming: the file handles it somewhere
_RESUME_WORD = re.compile(r"(?i)resum|restor|(load|read).{0,12}(ckpt|checkpoint|state)|(ckpt|checkpoint).{0,3}load")

LOOP = ("for step, batch in enumerate(loader):\n"
        "    model(batch).sum().backward()\n    optimizer.step()\n")
HEADER = "import torch\nimport torch_xla\n"


# a checkpoint save in the step loop: the call, its callee as written, and how to read it back
Save = Tuple[ast.Call, str, str]


class CheckpointNeverRestored(Rule):
    code = "XLA904"
    name = "checkpoint-never-restored"
    summary = "A training script that saves checkpoints in its training loop but never restores one"
    what_it_does = (
        "Flags the first checkpoint save in a training loop (or the epoch loop around it) of a script "
        "(top-level code, or a file with a `__main__` block) when nothing in the file reads a checkpoint "
        "back: `torch.save` / `xm.save` / `xla_compat.save` of a `state_dict()`, "
        "`torch.distributed.checkpoint.save`, and the `save` / `save_async` / `step` of torch_xla's or "
        "xla_compat's `CheckpointManager`, with no `torch.load`, `torch.distributed.checkpoint.load`, "
        "`restore()`, `all_steps()`, `load_state_dict()`, and no name or string that speaks of resuming "
        "or restoring anywhere in the file. Off by default: a script may be restarted by a wrapper that "
        "restores, or its checkpoints may be meant for evaluation only."
    )
    why_bad = (
        "TPU VMs are preempted and jobs are restarted. A script that writes checkpoints but always starts "
        "from step 0 pays for every save and gets nothing back from it when it is restarted: the run "
        "begins again, and (with a manager that keeps the newest K) overwrites the checkpoints it could "
        "have resumed from."
    )
    fix_safety = ("No automatic fix: restoring needs the step to resume from, the optimizer primed, and the "
                  "data loader advanced.")
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/spmd_distributed_checkpoint.md",
    )
    off_by_default = True
    level = "note"  # an opt-in heuristic's hint
    valid = (
        Example(HEADER + EXAMPLE_MANAGER + "from torch_xla.experimental.distributed_checkpoint import prime_optimizer"
                "\n\nmgr = CheckpointManager('gs://bucket/run', save_interval=100)\nstart = 0\n"
                "if mgr.all_steps():\n    start = max(mgr.all_steps())\n    prime_optimizer(optimizer)\n"
                "    state_dict = {'model': model.state_dict(), 'optim': optimizer.state_dict()}\n"
                "    mgr.restore(start, state_dict)\n    model.load_state_dict(state_dict['model'])\n"
                "    optimizer.load_state_dict(state_dict['optim'])\n" + LOOP.replace(
                    "enumerate(loader)", "enumerate(loader, start)") +
                "    mgr.save(step, {'model': model.state_dict(), 'optim': optimizer.state_dict()})\n",
                title="restored at start-up"),
        Example(HEADER + "\nif args.resume_from:\n    model.load_state_dict(torch.load(args.resume_from))\n" + LOOP +
                "    if step % 1000 == 0:\n        torch.save(model.state_dict(), f'/tmp/ckpt-{step}.pt')\n",
                title="torch.load behind a --resume flag"),
        Example(HEADER + LOOP + "torch.save(model.state_dict(), '/tmp/final.pt')\n",
                title="the final model, saved after training"),
        Example(HEADER + "\ndef train(model, optimizer, loader):\n"
                "    for step, batch in enumerate(loader):\n        model(batch).sum().backward()\n"
                "        optimizer.step()\n        torch.save(model.state_dict(), '/tmp/ckpt.pt')\n",
                title="a library function: its caller may restore"),
    )
    invalid = (
        Example(
            HEADER + LOOP +
            "    if step % 1000 == 0:\n        torch.save(model.state_dict(), f'/tmp/ckpt-{step}.pt')\n",
            expect=((7, 9, "torch.save() checkpoints are never restored; load the newest at start-up",
                     "torch.save() saves them in the training loop, but nothing in this file restores one, so "
                     "a restarted run starts from step 0. At start-up, load the newest one with torch.load() "
                     "and model.load_state_dict() / optimizer.load_state_dict()."),),
        ),
        Example(
            HEADER + EXAMPLE_MANAGER + "\n\ndef main():\n"
            "    mgr = CheckpointManager('gs://bucket/run', save_interval=100)\n"
            "    for step, batch in enumerate(loader):\n        model(batch).sum().backward()\n"
            "        optimizer.step()\n        mgr.save_async(step, {'model': model.state_dict()})\n\n\n"
            "if __name__ == '__main__':\n    main()\n",
            expect=((11, 9, "mgr.save_async() checkpoints are never restored; load the newest at start-up",
                     "mgr.save_async() saves them in the training loop, but nothing in this file restores one, "
                     "so a restarted run starts from step 0. At start-up, take the newest of mgr.all_steps() "
                     "and mgr.restore(step, state_dict) (prime_optimizer() first), then load_state_dict() the "
                     "model and optimizer from it."),),
            title="torch_xla's CheckpointManager",
        ),
        Example(
            HEADER + "import xla_compat\n\nmgr = xla_compat.CheckpointManager('/ckpt', save_every=100)\n" + LOOP +
            "    mgr.step(step, lambda: {'model': model.state_dict()})\n",
            expect=((9, 5, "mgr.step() checkpoints are never restored; load the newest at start-up",
                     "mgr.step() saves them in the training loop, but nothing in this file restores one, so a "
                     "restarted run starts from step 0. At start-up, mgr.restore() returns (step, state) of "
                     "the newest committed checkpoint, or None."),),
            title="xla_compat's CheckpointManager",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        if is_test_file(ctx.filename):
            return
        saves = [s for s in self._saves(ctx) if runs_as_program(ctx, s[0])]
        if not saves or self._restores(ctx):
            return
        call, callee, restore = min(saves, key=lambda s: (s[0].lineno, s[0].col_offset))
        yield self.diagnostic(
            ctx, call, f"{callee}() checkpoints are never restored; load the newest at start-up",
            help=(f"{callee}() saves them in the training loop, but nothing in this file restores one, so a "
                  f"restarted run starts from step 0. At start-up, {restore}."))

    @staticmethod
    def _saves(ctx: FileContext) -> List[Save]:
        facts = ctx.get(Checkpointing)
        out: List[Save] = []
        for save in ctx.get(CheckpointFacts).saves:
            if (save.qualname in SAVES or save.qualname == TORCH_SAVE) and facts.loop_over_steps(save.call):
                if state_dict_owners(ctx, save.data):
                    out.append((save.call, save.callee, "load the newest one with torch.load() and "
                                "model.load_state_dict() / optimizer.load_state_dict()"))
        for ref in ctx.get(SemanticModel).references:
            if ref.call is not None and ref.qualname in DCP_SAVES and facts.loop_over_steps(ref.call):
                out.append((ref.call, ref.written_prefix(ref.qualname), "read it back with "
                            "torch.distributed.checkpoint.load(state_dict, planner=SPMDLoadPlanner()) into the "
                            "sharded model's state_dict"))
        if facts.builds:
            for call in facts.method_calls("save", "save_async", "step"):
                builds = facts.managers(call.func.value)
                how = _manager_restore(builds, call.func.attr)
                if how is not None and facts.loop_over_steps(call):
                    out.append((call, ast.unparse(call.func), how.format(ast.unparse(call.func.value))))
        return out

    @staticmethod
    def _restores(ctx: FileContext) -> bool:
        if any(ref.qualname in LOADS for ref in ctx.get(SemanticModel).references if not ref.is_import):
            return True
        index = ctx.get(NodeIndex)
        for node in index.of(ast.Attribute):
            if node.attr in _RESTORE_METHODS or _RESUME_WORD.search(node.attr):
                return True
        for node in index.of(ast.Name):
            if _RESUME_WORD.search(node.id):
                return True
        for node in index.of(ast.keyword, ast.FunctionDef, ast.AsyncFunctionDef, ast.arg):
            name = getattr(node, "arg", None) or getattr(node, "name", None) or ""
            if _RESUME_WORD.search(name):
                return True
        return any(type(node.value) is str and _RESUME_WORD.search(node.value) for node in index.of(ast.Constant))


def _manager_restore(builds, method: str) -> Optional[str]:
    if not builds:
        return None
    if all(b.qualname in MANAGERS for b in builds) and method in ("save", "save_async"):
        return ("take the newest of {0}.all_steps() and {0}.restore(step, state_dict) (prime_optimizer() first), "
                "then load_state_dict() the model and optimizer from it")
    if all(b.qualname in COMPAT_MANAGERS for b in builds) and method in ("save", "step"):
        return "{0}.restore() returns (step, state) of the newest committed checkpoint, or None"
    return None
