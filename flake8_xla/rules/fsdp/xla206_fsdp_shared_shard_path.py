"""XLA206 fsdp-shared-shard-path."""
from typing import Iterator

from flake8_xla.rules.examples import EXAMPLE_CHECKPOINT as HEADER
from flake8_xla.rules.examples import EXAMPLE_XM as XM
from flake8_xla.analysis.fsdp import SAME, SAVES, CheckpointFacts, has_fsdp_v1
from flake8_xla.analysis.syntax import is_constant
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule


class FsdpSharedShardPath(Rule):
    code = "XLA206"
    name = "fsdp-shared-shard-path"
    summary = "Every rank saves its FSDP shard to the same file"
    what_it_does = (
        "Flags `xm.save(..., master_only=False)` (and `xla_compat.save`) of the `state_dict()` of a "
        "model wrapped with `XlaFullyShardedDataParallel` in the same function when the path is the "
        "same text on every rank: a string literal, or an f-string, concatenation or `os.path.join` "
        "whose parts hold no rank (`xr.global_ordinal()`, `rank`, `ordinal`, `process_index`). A "
        "path from a parameter, a call or anything else the rule cannot follow is left alone."
    )
    why_bad = (
        "With `master_only=False` every rank writes, and under FSDP each writes a different shard. "
        "`xm.save` requires a different destination per rank; with one path the ranks overwrite each "
        "other and the file ends up holding one arbitrary shard, so the checkpoint cannot be resumed "
        "or consolidated."
    )
    fix_safety = "No automatic fix: the new file names must match what loads or consolidates the shards."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/core/xla_model.py",)
    valid = (
        Example(HEADER + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "path = f'/tmp/ckpt_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'\n"
                "xla_compat.save(ckpt, path, master_only=False)\n",
                title="the rank in the file name"),
        Example(HEADER + XM + "import os\n\ndef train(net, out):\n    model = FSDP(net)\n"
                "    rank = xr.global_ordinal()\n"
                "    ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "    xm.save(ckpt, os.path.join(out, f'ckpt_{rank:08d}.pth'), master_only=False)\n",
                title="through a variable and os.path.join"),
        Example(HEADER + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "xla_compat.save(ckpt, xla_compat.shard_path('/tmp/ckpt'), master_only=False)\n",
                title="xla_compat.shard_path() adds the rank"),
        Example(HEADER + XM + "\ndef save(model, ckpt, path):\n    model = FSDP(model)\n"
                "    xm.save({'model': model.state_dict()}, path, master_only=False)\n",
                title="a path from a parameter: unknown, silent"),
        Example(HEADER + XM + "\ndef save(net, shard_dir):\n    model = FSDP(net)\n"
                "    xm.save({'model': model.state_dict()}, f'{shard_dir}/model.pt', master_only=False)\n",
                title="a directory from a parameter may be per rank: silent"),
        Example(HEADER + "\nmodel = FSDP(Net())\nxla_compat.save({'step': step}, '/tmp/step.pt', master_only=False)\n",
                title="not the FSDP state"),
    )
    invalid = (
        Example(
            HEADER + "\nmodel = FSDP(Net())\n"
            "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
            "xla_compat.save(ckpt, '/tmp/ckpt.pth', master_only=False)\n",
            expect=((7, 23, "every rank saves its shard of FSDP `model` to this same path; put the rank in the "
                            "file name",
                     "`model` is FSDP-wrapped at line 5: the ranks' shards overwrite each other. Name the file "
                     "e.g. f'{prefix}_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'."),),
        ),
        Example(
            HEADER + XM + "\ndef train(args, net):\n    model = FSDP(net)\n"
            "    ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
            "    path = f'{args.output_dir}/checkpoint.pth'\n"
            "    xm.save(ckpt, path, master_only=False)\n",
            expect=((10, 19, "every rank saves its shard of FSDP `model` to this same path; put the rank in "
                             "the file name",
                     "`model` is FSDP-wrapped at line 7: the ranks' shards overwrite each other. Name the file "
                     "e.g. f'{prefix}_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'."),),
            title="an f-string whose parts hold no rank",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        if not has_fsdp_v1(ctx):
            return
        facts = ctx.get(CheckpointFacts)
        for save in facts.saves:
            if save.qualname not in SAVES or save.unpacked or not is_constant(save.master_only, False):
                continue
            state = facts.fsdp_state(save.data)
            if state is None or facts.path_kind(save.path) != SAME:
                continue
            yield self.diagnostic(
                ctx, save.path, f"every rank saves its shard of FSDP `{state.model}` to this same path; put the rank "
                "in the file name",
                help=(f"`{state.model}` is FSDP-wrapped at line {state.wrap.call.lineno}: the ranks' shards "
                      "overwrite each other. Name the file e.g. "
                      "f'{prefix}_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'."))
