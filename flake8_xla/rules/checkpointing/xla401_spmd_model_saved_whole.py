"""XLA401 spmd-model-saved-whole."""
import ast
from typing import Iterator, Optional, Tuple

from flake8_xla.analysis.checkpoints import Checkpointing, Sharding, state_dict_owners
from flake8_xla.analysis.fsdp import SAVES, TORCH_SAVE
from flake8_xla.rules.examples import EXAMPLE_FSDPV2, EXAMPLE_SPMD
from flake8_xla.analysis.fsdp import CheckpointFacts
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

IMPORTS = "import numpy as np\nimport torch\n" + EXAMPLE_SPMD
SETUP = "\nxr.use_spmd()\nmesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), " \
    "(xr.global_runtime_device_count(), 1), ('fsdp', 'model'))\n"
HEADER = IMPORTS + SETUP
LOOP = ("for step, batch in enumerate(loader):\n"
        "    model(batch).sum().backward()\n    optimizer.step()\n")


def _indent(text: str) -> str:
    return "".join("    " + line + "\n" for line in text.splitlines())


ADVICE = ("Save training checkpoints with torch.distributed.checkpoint.save(state_dict, "
          "planner=SPMDSavePlanner()) or CheckpointManager.save(step, state_dict) "
          "(torch_xla.experimental.distributed_checkpoint): each host writes only its own shards.")


class SpmdModelSavedWhole(Rule):
    code = "XLA401"
    name = "spmd-model-saved-whole"
    summary = "An SPMD-sharded model checkpointed in the training loop with torch.save / xm.save"
    what_it_does = (
        "Flags `torch.save`, `xm.save` and `xla_compat.save` of the `state_dict()` of a model whose "
        "parameters are sharded with SPMD (`xs.mark_sharding(model.<...>, ...)`, `mark_sharding` of every "
        "parameter in a loop over `model.parameters()`, or an `SpmdFullyShardedDataParallel` wrap) in the "
        "same function, when the save runs in the training loop (or in the epoch loop around it). A save "
        "after training, the one consolidated export, is left alone: that is what torch.save is for."
    )
    why_bad = (
        "Under SPMD each host holds only its shards of a sharded parameter; `state_dict()` returns the "
        "logical (global) tensors, and serializing them gathers every shard from every device and host "
        "onto this host's memory, for every checkpoint. Every host runs the same program, so on a pod each "
        "one gathers and writes the whole model (to the same path, unless the path holds the host). "
        "torch_xla's distributed checkpointing writes each host's own shards in parallel and loads them "
        "back into a model sharded the same or another way."
    )
    fix_safety = ("No automatic fix: a distributed checkpoint is a directory, not a file, needs a CPU process "
                  "group (`dist.init_process_group('gloo', init_method='xla://')`), and whatever loads it must "
                  "change with it.")
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/spmd_distributed_checkpoint.md",
        "https://github.com/pytorch/xla/issues/7832",
    )
    valid = (
        Example(IMPORTS + "import torch.distributed.checkpoint as dist_cp\n"
                "import torch_xla.experimental.distributed_checkpoint as xc\n" + SETUP +
                "\n\ndef train(loader, path):\n    model = Net().to('xla')\n"
                "    xs.mark_sharding(model.fc1.weight, mesh, ('fsdp', None))\n"
                "    optimizer = torch.optim.AdamW(model.parameters())\n" + _indent(LOOP) +
                "        if step % 1000 == 0:\n"
                "            dist_cp.save({'model': model.state_dict()},\n"
                "                         storage_writer=dist_cp.FileSystemWriter(path),\n"
                "                         planner=xc.SPMDSavePlanner())\n",
                title="a distributed checkpoint"),
        Example(HEADER + "\nmodel = Net().to('xla')\nxs.mark_sharding(model.fc1.weight, mesh, ('fsdp', None))\n" +
                LOOP + "torch.save(model.state_dict(), '/tmp/final.pt')\n",
                title="the consolidated export after training"),
        Example(HEADER + "\nmodel = Net().to('xla')\n" + LOOP +
                "    xs.mark_sharding(batch, mesh, ('fsdp', None))\n"
                "    if step % 1000 == 0:\n        torch.save(model.state_dict(), '/tmp/ckpt.pt')\n",
                title="only the input is sharded: the parameters are replicated"),
        Example(HEADER + "\nmodel = Net().to('xla')\nxs.mark_sharding(model.fc1.weight, mesh, (None, None))\n" +
                LOOP + "    if step % 1000 == 0:\n        torch.save(model.state_dict(), '/tmp/ckpt.pt')\n",
                title="a replicated partition spec"),
        Example(HEADER + "\ndef train(model, loader, optimizer):\n"
                "    for step, batch in enumerate(loader):\n        model(batch).sum().backward()\n"
                "        optimizer.step()\n        torch.save(model.state_dict(), f'/tmp/{step}.pt')\n",
                title="a model from a parameter: unknown, silent"),
    )
    invalid = (
        Example(
            HEADER + "\n\ndef train(loader):\n    model = Net().to('xla')\n"
            "    xs.mark_sharding(model.fc1.weight, mesh, ('fsdp', None))\n"
            "    optimizer = torch.optim.AdamW(model.parameters())\n" + _indent(LOOP) +
            "        if step % 1000 == 0:\n            torch.save(model.state_dict(), '/tmp/ckpt.pt')\n",
            expect=((18, 13, "torch.save() of SPMD-sharded `model` gathers all shards; use "
                             "torch.distributed.checkpoint",
                     "`model` is sharded with SPMD at line 12: each checkpoint gathers every shard onto this "
                     "host, and every host writes the whole model. Save training checkpoints with "
                     "torch.distributed.checkpoint.save(state_dict, planner=SPMDSavePlanner()) or "
                     "CheckpointManager.save(step, state_dict) "
                     "(torch_xla.experimental.distributed_checkpoint): each host writes only its own shards."),),
        ),
        Example(
            IMPORTS + "import torch_xla.core.xla_model as xm\n" + EXAMPLE_FSDPV2 + SETUP +
            "\n\ndef main(loader):\n    model = FSDPv2(Net().to('xla'), mesh=mesh)\n"
            "    optimizer = torch.optim.AdamW(model.parameters())\n"
            "    for epoch in range(3):\n        for batch in loader:\n"
            "            optimizer.zero_grad()\n            model(batch).sum().backward()\n"
            "            optimizer.step()\n"
            "        ckpt = {'model': model.state_dict(), 'optimizer': optimizer.state_dict()}\n"
            "        xm.save(ckpt, f'/tmp/epoch-{epoch}.pt')\n",
            expect=((23, 9, "xm.save() of SPMD-sharded `model` gathers all shards; use "
                            "torch.distributed.checkpoint",
                     "`model` is sharded with SPMD at line 15: each checkpoint gathers every shard onto this "
                     "host, and every host writes the whole model. Save training checkpoints with "
                     "torch.distributed.checkpoint.save(state_dict, planner=SPMDSavePlanner()) or "
                     "CheckpointManager.save(step, state_dict) "
                     "(torch_xla.experimental.distributed_checkpoint): each host writes only its own shards."),),
            title="FSDPv2, a checkpoint dict saved every epoch",
        ),
        Example(
            HEADER + "\nmodel = Net().to('xla')\nfor name, param in model.named_parameters():\n"
            "    xs.mark_sharding(param, mesh, ('fsdp',) + (None,) * (param.dim() - 1))\n" + LOOP +
            "    if step % 1000 == 0:\n        torch.save({'model': model.state_dict(), 'step': step}, "
            "f'/tmp/ckpt-{step}.pt')\n",
            expect=((16, 9, "torch.save() of SPMD-sharded `model` gathers all shards; use "
                            "torch.distributed.checkpoint",
                     "`model` is sharded with SPMD at line 11: each checkpoint gathers every shard onto this "
                     "host, and every host writes the whole model. Save training checkpoints with "
                     "torch.distributed.checkpoint.save(state_dict, planner=SPMDSavePlanner()) or "
                     "CheckpointManager.save(step, state_dict) "
                     "(torch_xla.experimental.distributed_checkpoint): each host writes only its own shards."),),
            title="every parameter sharded in a loop",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        facts = ctx.get(Checkpointing)
        if not facts.shardings:
            return
        for save in ctx.get(CheckpointFacts).saves:
            if (save.qualname not in SAVES and save.qualname != TORCH_SAVE) or save.unpacked:
                continue
            if facts.loop_over_steps(save.call) is None:
                continue
            found = self._sharded_state(ctx, facts, save.data, save.at)
            if found is None:
                continue
            model, sharding = found
            yield self.diagnostic(
                ctx, save.call, f"{save.callee}() of SPMD-sharded `{model}` gathers all shards; use "
                "torch.distributed.checkpoint",
                help=(f"`{model}` is sharded with SPMD at line {sharding.call.lineno}: each checkpoint gathers every "
                      f"shard onto this host, and every host writes the whole model. {ADVICE}"))

    @staticmethod
    def _sharded_state(ctx: FileContext, facts: Checkpointing, data: Optional[ast.AST], at) -> Optional[
            Tuple[str, Sharding]]:
        for owner in state_dict_owners(ctx, data):
            sharding = facts.sharded(owner, at)
            if sharding is not None:
                return owner, sharding
        return None
