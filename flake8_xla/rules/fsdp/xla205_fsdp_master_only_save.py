"""XLA205 fsdp-master-only-save."""
from typing import Iterator

from flake8_xla.rules.examples import EXAMPLE_CHECKPOINT as HEADER
from flake8_xla.rules.examples import EXAMPLE_FSDPV2 as FSDP2
from flake8_xla.rules.examples import EXAMPLE_XM as XM
from flake8_xla.analysis.fsdp import SAVES, CheckpointFacts, has_fsdp_v1
from flake8_xla.analysis.syntax import is_constant
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule


class FsdpMasterOnlySave(Rule):
    code = "XLA205"
    name = "fsdp-master-only-save"
    summary = "An FSDP model's sharded state saved by the master ordinal only"
    what_it_does = (
        "Flags `xm.save(...)` (and `xla_compat.save(...)`) of the `state_dict()` of a model wrapped "
        "with `XlaFullyShardedDataParallel`, or of a checkpoint dict holding it, without `master_only=False`: "
        "the default `master_only=True` or an explicit one; and a call of a helper, of the file or of another "
        "module of the project, that saves what it is given on the master only (`xm.save` inside it, or a save "
        "under `if xm.is_master_ordinal():` / `if rank == 0:`, and no save of it on every rank). The wrapper is "
        "known from an FSDP call or a helper that returns one (`model = shard_module_fsdp(model)`) in the same "
        "function, or from the file's calls of that function that pass one (`_save(model, step)`). A wrap "
        "under a flag (`if use_fsdp: model = FSDP(model)`) counts: whenever the program runs with FSDP, the "
        "checkpoint is one shard; a save on the flag's other side (`if not use_fsdp:`, its `else`) does not see "
        "it, and neither does a save after a loop that wraps. FSDPv2 (SPMD) models are not flagged: they are "
        "checkpointed with `torch.distributed.checkpoint`."
    )
    why_bad = (
        "Under FSDP each rank holds only its own shard of the parameters, and `model.state_dict()` "
        "returns that shard. With `master_only=True` only the master ordinal writes, so the "
        "checkpoint holds one shard of the model and the other ranks' shards are lost, with no error. "
        "Every rank must save its own shard to its own file, with the shard metadata that "
        "`consolidate_sharded_model_checkpoints` needs to stitch the shards back together."
    )
    fix_safety = ("No automatic fix: per-rank saving also needs a rank-suffixed path and the shard metadata, "
                  "and whatever loads the checkpoint must change with it.")
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/fsdp_collectives.md",
        "https://github.com/huggingface/transformers/issues/32310",
    )
    valid = (
        Example(HEADER + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "path = f'/tmp/ckpt_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'\n"
                "xla_compat.save(ckpt, path, master_only=False)\n",
                title="every rank saves its own shard"),
        Example(HEADER + XM + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata(),\n"
                "        'optimizer': optimizer.state_dict()}\n"
                "ckpt_path = f'/tmp/rank-{xr.global_ordinal()}-of-{xr.world_size()}-mnist.pth'\n"
                "xm.save(ckpt, ckpt_path, master_only=False)\n",
                title="the reference pattern (torch_xla's MNIST FSDP test)"),
        Example(HEADER + XM + "\nmodel = Net().to('xla')\nxm.save(model.state_dict(), '/tmp/model.pt')\n",
                title="a model without FSDP: the master's copy is the whole model"),
        Example(HEADER + XM + "\ndef save(model, path):\n    xm.save(model.state_dict(), path)\n",
                title="a model from a parameter: unknown, silent"),
        Example(HEADER + XM + "\nmodel = Net()\nif use_fsdp:\n    model = FSDP(model)\n"
                "if not use_fsdp:\n    xm.save(model.state_dict(), '/tmp/model.pt')\n",
                title="saved only where the FSDP flag is off"),
        Example(HEADER + XM + FSDP2 + "\n"
                "model = FSDPv2(Net(), mesh=mesh)\nxm.save(model.state_dict(), '/tmp/model.pt')\n",
                title="FSDPv2 (SPMD) is a different story"),
    )
    invalid = (
        Example(
            HEADER + "\nmodel = FSDP(Net())\nxla_compat.save(model.state_dict(), '/tmp/model.pt')\n",
            expect=((6, 1, "xla_compat.save() saves only the master's shard of `model`; pass master_only=False",
                     "`model` is FSDP-wrapped at line 5, and master_only defaults to True. Save every rank's "
                     "shard with master_only=False, a rank-suffixed path and model.get_shard_metadata()."),),
        ),
        Example(
            HEADER + XM + "\ndef train(net):\n    model = FSDP(net)\n"
            "    ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
            "    xm.save(ckpt, f'/tmp/rank-{xr.global_ordinal()}.pth', master_only=True)\n",
            expect=((9, 59, "xm.save(master_only=True) saves only the master's shard of `model`; pass "
                            "master_only=False",
                     "`model` is FSDP-wrapped at line 7. Save every rank's shard with master_only=False, a "
                     "rank-suffixed path and model.get_shard_metadata()."),),
            title="an explicit master_only=True, in a training function",
        ),
        Example(
            HEADER + XM + "\nclass Trainer:\n    def fit(self):\n        self.model = FSDP(self.model)\n"
            "        state = self.model.state_dict()\n        xm.save({'model': state}, '/tmp/model.pt')\n",
            expect=((10, 9, "xm.save() saves only the master's shard of `self.model`; pass master_only=False",
                     "`self.model` is FSDP-wrapped at line 8, and master_only defaults to True. Save every "
                     "rank's shard with master_only=False, a rank-suffixed path and "
                     "self.model.get_shard_metadata()."),),
            title="through a variable and a dict",
        ),
        Example(
            HEADER + XM + "\n\ndef save(state, path):\n    if xm.is_master_ordinal():\n"
            "        torch.save(state, path)\n\n\nmodel = Net()\nif use_fsdp:\n    model = FSDP(model)\n"
            "save({'model': model.state_dict()}, '/tmp/model.pt')\n",
            expect=((15, 1, "save() saves only the master's shard of `model`; save every rank's shard",
                     "`model` is FSDP-wrapped at line 14, and save() saves on the master only (line 9). Save "
                     "every rank's shard, with a rank-suffixed path and model.get_shard_metadata()."),),
            title="a helper that saves on the master, a wrap under a flag",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        if not has_fsdp_v1(ctx):
            return
        facts = ctx.get(CheckpointFacts)
        for save in facts.saves + facts.helper_saves:
            if (save.qualname not in SAVES and not save.helper) or save.unpacked:
                continue
            if save.master_only is not None and not is_constant(save.master_only, True):
                continue
            state = facts.fsdp_state(save.data)
            if state is None:
                continue
            model, line = state.model, state.wrap.call.lineno
            passed = "" if state.passed is None else f" (passed on line {state.passed.lineno})"
            wrapped = f"`{model}` is FSDP-wrapped at line {line}{passed}"
            every_rank = f"a rank-suffixed path and {model}.get_shard_metadata()"
            if save.helper:
                yield self.diagnostic(
                    ctx, save.call, f"{save.callee}() saves only the master's shard of `{model}`; save every "
                    "rank's shard",
                    help=(f"{wrapped}, and {save.callee}() saves on the master only ({save.helper}). Save every "
                          f"rank's shard, with {every_rank}."))
            elif save.master_only is None:
                yield self.diagnostic(
                    ctx, save.call, f"{save.callee}() saves only the master's shard of `{model}`; pass "
                    "master_only=False",
                    help=(f"{wrapped}, and master_only defaults to True. Save every rank's shard with "
                          f"master_only=False, {every_rank}."))
            else:
                node = next((k for k in save.call.keywords if k.value is save.master_only), save.master_only)
                yield self.diagnostic(
                    ctx, node, f"{save.callee}(master_only=True) saves only the master's shard of `{model}`; "
                    "pass master_only=False",
                    help=f"{wrapped}. Save every rank's shard with master_only=False, {every_rank}.")
