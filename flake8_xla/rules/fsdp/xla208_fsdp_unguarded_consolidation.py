"""XLA208 fsdp-unguarded-consolidation."""
import ast
from typing import Iterator

from flake8_xla.rules.examples import EXAMPLE_XM as XM
from flake8_xla.rules.examples import EXAMPLE_XR as XR
from flake8_xla.analysis.fsdp import CONSOLIDATE
from flake8_xla.analysis.syntax import argument
from flake8_xla.analysis.ranks import EveryRank
from flake8_xla.analysis.semantic import Reference, SemanticModel
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

CONSOLIDATORS = CONSOLIDATE | {"xla_compat.consolidate_sharded", "xla_compat.checkpoint.consolidate_sharded"}

HEADER = ("import torch_xla\nimport xla_compat\nfrom torch_xla.distributed.fsdp import (\n"
          "    XlaFullyShardedDataParallel as FSDP,\n    consolidate_sharded_model_checkpoints,\n)\n")
SAVE = "    xla_compat.save_sharded(model, '/tmp/ckpt')\n"
CONSOLIDATE_CALL = "consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/{}', ckpt_suffix='_rank-*-of-*.pth')\n"


class FsdpUnguardedConsolidation(Rule):
    code = "XLA208"
    name = "fsdp-unguarded-consolidation"
    summary = "FSDP checkpoint consolidation run by every rank"
    what_it_does = (
        "Flags `consolidate_sharded_model_checkpoints(...)` (and `xla_compat.consolidate_sharded`) in "
        "code that runs on every rank, unless an enclosing `if` (or an early `return`) checks the "
        "master: `xm.is_master_ordinal(...)`, `xr.global_ordinal() == 0`, `rank == 0`, and the like. "
        "Code runs on every rank when its function builds an `XlaFullyShardedDataParallel`, is "
        "started with `torch_xla.launch`/`xmp.spawn`, or is called unguarded from such a function; "
        "module code when it builds one. Scripts that only consolidate, and code after a launch "
        "returns, are left alone, as are tests the rule cannot read (a flag from a parameter)."
    )
    why_bad = (
        "Consolidation loads every rank's shard file and writes one full checkpoint. Run by every "
        "rank, each process holds all the shards in host memory at once and all of them write the "
        "same consolidated file concurrently, which can leave it truncated or mixed. It must run once, "
        "on the master, after a barrier that ensures every rank has finished writing its shard."
    )
    fix_safety = "No automatic fix: the guard and the barrier depend on how the surrounding code syncs the ranks."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/test/test_train_mp_mnist_fsdp_with_ckpt.py",)
    valid = (
        Example(HEADER + XR + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE +
                "    if xr.global_ordinal() == 0:\n"
                "        " + CONSOLIDATE_CALL.format("ckpt") +
                "    xla_compat.rendezvous('ckpt_consolidation')\n\n"
                "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
                title="on the master only, after the shards are written"),
        Example(HEADER + XM + XR + "\ndef train_mnist(flags):\n    model = FSDP(Net())\n"
                "    ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "    ckpt_path = f'/tmp/mnist_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'\n"
                "    xm.save(ckpt, ckpt_path, master_only=False)\n    xm.rendezvous('ckpt_consolidation')\n"
                "    if xm.is_master_ordinal(local=False):\n"
                "        " + CONSOLIDATE_CALL.format("mnist"),
                title="the reference pattern (torch_xla's MNIST FSDP test)"),
        Example(HEADER + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE +
                "    if index != 0:\n        return\n"
                "    consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/ckpt', ckpt_suffix='_rank-*-of-*.pth')\n\n"
                "torch_xla.launch(_mp_fn)\n",
                title="an early return on the other ranks"),
        Example("from torch_xla.distributed.fsdp import consolidate_sharded_model_checkpoints\n\n"
                "consolidate_sharded_model_checkpoints(ckpt_prefix=args.prefix, ckpt_suffix='_rank-*-of-*.pth')\n",
                title="an offline script that only consolidates"),
        Example(HEADER + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE + "\n"
                "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
                "    consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/ckpt', ckpt_suffix='_rank-*-of-*.pth')\n",
                title="after the launch returns: one process"),
        Example(HEADER + "\ndef train(net, is_writer):\n    model = FSDP(net)\n" + SAVE +
                "    if is_writer:\n        xla_compat.consolidate_sharded('/tmp/ckpt', world=8)\n",
                title="a test on a parameter may be the master check: silent"),
    )
    invalid = (
        Example(
            HEADER + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE +
            "    consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/ckpt', ckpt_suffix='_rank-*-of-*.pth')\n\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            expect=((11, 5, "consolidate_sharded_model_checkpoints() runs on every rank; run it once, on the "
                            "master",
                     "`_mp_fn` is launched on every rank by torch_xla.launch, line 14: each process loads all "
                     "the shards and writes the same consolidated file. Call it under `if "
                     "xm.is_master_ordinal(local=False):`, after a barrier."),),
        ),
        Example(
            HEADER + "\ndef consolidate(flags):\n    if flags.ckpt_consolidation:\n"
            "        consolidate_sharded_model_checkpoints(ckpt_prefix=flags.prefix)\n\n"
            "def _mp_fn(index, flags):\n    train(flags)\n    consolidate(flags)\n\n"
            "torch_xla.launch(_mp_fn, args=(flags,))\n",
            expect=((10, 9, "consolidate_sharded_model_checkpoints() runs on every rank; run it once, on the "
                            "master",
                     "`consolidate` is called from `_mp_fn`, line 14, which runs on every rank: each process "
                     "loads all the shards and writes the same consolidated file. Call it under `if "
                     "xm.is_master_ordinal(local=False):`, after a barrier."),),
            title="called from a launched function, under a test that is not a master check",
        ),
        Example(
            HEADER + "import functools\n\ndef run(index, prefix):\n"
            "    xla_compat.consolidate_sharded(prefix, world=8, save_path=prefix + '.pth')\n\n"
            "torch_xla.launch(functools.partial(run, prefix='/tmp/ckpt'))\n",
            expect=((10, 5, "xla_compat.consolidate_sharded() runs on every rank; run it once, on the master",
                     "`run` is launched on every rank by torch_xla.launch, line 12: each process loads all the "
                     "shards and writes the same consolidated file. Call it under `if "
                     "xm.is_master_ordinal(local=False):`, after a barrier."),),
            title="the companion in a launched function",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        calls = [r for r in ctx.get(SemanticModel).references if r.qualname in CONSOLIDATORS and r.call is not None]
        if not calls:
            return
        ranks = ctx.get(EveryRank)
        for ref in calls:
            owner = ranks.owner(ref.call)
            reason = ranks.reason(owner)
            if reason is None or ranks.guarded(ref.call, owner):
                continue
            effect = "loads all the shards and writes the same consolidated file" if _writes(ref) else \
                "loads all the shards into host memory"
            yield self.diagnostic(
                ctx, ref.call, f"{ref.written_prefix(ref.qualname)}() runs on every rank; run it once, on the master",
                help=(f"{reason}: each process {effect}. Call it under "
                      "`if xm.is_master_ordinal(local=False):`, after a barrier."))


def _writes(ref: Reference) -> bool:
    """Whether the consolidation also saves the merged checkpoint (upstream: unless
    ``save_model=False``; the companion: when given a ``save_path``)."""
    call = ref.call
    if ref.qualname.startswith("xla_compat."):
        return len(call.args) > 2 or any(k.arg in ("save_path", None) for k in call.keywords)
    save_model = argument(call, 3, "save_model")
    return not (type(save_model) is ast.Constant and not save_model.value)

