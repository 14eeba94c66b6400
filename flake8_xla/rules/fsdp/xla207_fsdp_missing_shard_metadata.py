"""XLA207 fsdp-missing-shard-metadata."""
import ast
from typing import Iterator, Optional, Tuple

from flake8_xla.rules.examples import EXAMPLE_CHECKPOINT as HEADER
from flake8_xla.rules.examples import EXAMPLE_XM as XM
from flake8_xla.analysis.fsdp import (RANK, SAVES, TORCH_SAVE, CheckpointFacts, FsdpState, Save,
                                      has_fsdp_v1)
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.syntax import NodeIndex, dotted, is_constant


class FsdpMissingShardMetadata(Rule):
    code = "XLA207"
    name = "fsdp-missing-shard-metadata"
    summary = "A per-rank FSDP checkpoint without the shard metadata needed to consolidate it"
    what_it_does = (
        "Flags a per-rank checkpoint (`xm.save(..., master_only=False)`, `xla_compat.save(..., "
        "master_only=False)`, or `torch.save` to a path holding the rank) of a model wrapped with "
        "`XlaFullyShardedDataParallel` in the same function when it is the bare `model.state_dict()`, "
        "or a dict holding it with no `model.get_shard_metadata()` entry. A dict that is changed "
        "between its creation and the save, or that unpacks another dict, is left alone."
    )
    why_bad = (
        "`consolidate_sharded_model_checkpoints` (and `python -m torch_xla.distributed.fsdp."
        "consolidate_sharded_ckpts`) read every rank's file as a dict with a `\"model\"` and a "
        "`\"shard_metadata\"` entry: the metadata tells how the flattened, padded shards map back to "
        "the original parameters and which rank each file is. Without it the shards cannot be merged "
        "into a full model (a `KeyError: 'shard_metadata'`), and the training run must be repeated."
    )
    fix_safety = "No automatic fix: the entry changes the checkpoint format that loading code expects."
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/fsdp_collectives.md",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/18746",
    )
    valid = (
        Example(HEADER + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "path = f'/tmp/ckpt_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'\n"
                "xla_compat.save(ckpt, path, master_only=False)\n",
                title="the model's shard and its metadata"),
        Example(HEADER + XM + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata(),\n"
                "        'optimizer': optimizer.state_dict()}\n"
                "ckpt_path = f'/tmp/rank-{xr.global_ordinal()}-of-{xr.world_size()}-mnist.pth'\n"
                "xm.save(ckpt, ckpt_path, master_only=False)\n",
                title="the reference pattern (torch_xla's MNIST FSDP test)"),
        Example(HEADER + "\nmodel = FSDP(Net())\nckpt = {'model': model.state_dict()}\n"
                "ckpt['shard_metadata'] = model.get_shard_metadata()\n"
                "xla_compat.save(ckpt, f'/tmp/ckpt_rank-{xr.global_ordinal()}.pth', master_only=False)\n",
                title="added after the dict was built"),
        Example(HEADER + "\nmodel = FSDP(Net())\nxla_compat.save_sharded(model, '/tmp/ckpt')\n",
                title="xla_compat.save_sharded() adds the metadata"),
        Example(HEADER + "import torch\n\nmodel = FSDP(Net())\n"
                "torch.save({'model': model.state_dict()}, '/tmp/model.pt')\n",
                title="torch.save to a path without the rank: not known to be per rank"),
    )
    invalid = (
        Example(
            HEADER + "\nmodel = FSDP(Net())\nckpt = {'model': model.state_dict(), 'step': step}\n"
            "path = f'/tmp/ckpt_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'\n"
            "xla_compat.save(ckpt, path, master_only=False)\n",
            expect=((8, 17, "per-rank checkpoint of FSDP `model` has no shard metadata; add "
                            "model.get_shard_metadata()",
                     "`model` is FSDP-wrapped at line 5: consolidate_sharded_model_checkpoints needs the shard "
                     "metadata to merge the shards; add 'shard_metadata': model.get_shard_metadata() to the "
                     "dict."),),
        ),
        Example(
            HEADER + XM + "\ndef train(net):\n    model = FSDP(net)\n    rank = xr.global_ordinal()\n"
            "    xm.save(model.state_dict(), f'/tmp/model_rank-{rank}.pth', master_only=False)\n",
            expect=((9, 13, "per-rank checkpoint of FSDP `model` has no shard metadata; add "
                            "model.get_shard_metadata()",
                     "`model` is FSDP-wrapped at line 7 and this is only its state_dict(): "
                     "consolidate_sharded_model_checkpoints needs the shard metadata to merge the shards; save "
                     "{'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}."),),
            title="the bare state dict",
        ),
        Example(
            HEADER + "import torch\n\nmodel = FSDP(Net())\n"
            "torch.save({'model': model.state_dict()}, f'/tmp/ckpt_rank-{xr.global_ordinal()}.pth')\n",
            expect=((7, 12, "per-rank checkpoint of FSDP `model` has no shard metadata; add "
                            "model.get_shard_metadata()",
                     "`model` is FSDP-wrapped at line 6: consolidate_sharded_model_checkpoints needs the shard "
                     "metadata to merge the shards; add 'shard_metadata': model.get_shard_metadata() to the "
                     "dict."),),
            title="torch.save to a rank-suffixed path",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        if not has_fsdp_v1(ctx):
            return
        facts = ctx.get(CheckpointFacts)
        for save in facts.saves:
            if not _per_rank(facts, save):
                continue
            found = _without_metadata(facts, ctx.get(NodeIndex), save.data)
            if found is None:
                continue
            state, bare = found
            model, line = state.model, state.wrap.call.lineno
            metadata = f"'shard_metadata': {model}.get_shard_metadata()"
            fix = (f"save {{'model': {model}.state_dict(), {metadata}}}" if bare
                   else f"add {metadata} to the dict")
            yield self.diagnostic(
                ctx, save.data, f"per-rank checkpoint of FSDP `{model}` has no shard metadata; add "
                f"{model}.get_shard_metadata()",
                help=(f"`{model}` is FSDP-wrapped at line {line}{' and this is only its state_dict()' if bare else ''}"
                      f": consolidate_sharded_model_checkpoints needs the shard metadata to merge the shards; {fix}."))


def _per_rank(facts: CheckpointFacts, save: Save) -> bool:
    """Whether every rank runs this save to its own file, as far as the arguments show."""
    if save.unpacked:
        return False
    if save.qualname in SAVES:
        return is_constant(save.master_only, False)
    return save.qualname == TORCH_SAVE and facts.path_kind(save.path) == RANK


def _without_metadata(facts: CheckpointFacts, index: NodeIndex,
                      data: Optional[ast.AST]) -> Optional[Tuple[FsdpState, bool]]:
    """(the FSDP state, whether it is the bare state dict) when ``data`` surely lacks the metadata."""
    checkpoint, flow, bindings = data, facts.flow, facts.bindings
    if dotted(data) is not None:
        binding = bindings.binding_of(data)
        at = flow.position(data)
        # a dict changed after it was built (``ckpt["shard_metadata"] = ...``) is not what we see
        if binding is None or at is None or bindings.occurs_between(binding.name, at.scope, binding.at.order, at.order):
            return None
        checkpoint = binding.value
    if type(checkpoint) is ast.Call and type(checkpoint.func) is ast.Attribute and \
            checkpoint.func.attr == "state_dict":
        state = facts.fsdp_state(checkpoint)
        return (state, True) if state is not None else None
    if type(checkpoint) is ast.Dict:
        if None in checkpoint.keys:  # ``**other``: entries we cannot see
            return None
        values = checkpoint.values
    elif type(checkpoint) is ast.Call and type(checkpoint.func) is ast.Name and checkpoint.func.id == "dict":
        if checkpoint.args or any(k.arg is None for k in checkpoint.keywords):
            return None
        values = [k.value for k in checkpoint.keywords]
    else:
        return None
    if _mentions_metadata(facts, index, checkpoint):
        return None
    state = next(filter(None, (facts.fsdp_state(v) for v in values)), None)
    return (state, False) if state is not None else None


def _mentions_metadata(facts: CheckpointFacts, index: NodeIndex, checkpoint: ast.AST) -> bool:
    """A ``get_shard_metadata()`` call, or a key or name that speaks of metadata, in the dict (or in
    what a name in it holds): the metadata may be there under a name the rule does not follow."""
    for node in index.below([checkpoint]):
        if type(node) is ast.Constant and type(node.value) is str and "meta" in node.value.lower():
            return True
        text = dotted(node) if type(node) in (ast.Name, ast.Attribute) else None
        if text is None:
            continue
        if "meta" in text.lower():
            return True
        value = facts.bindings.value_of(node) if type(node) is ast.Name else None
        if value is not None and any(type(n) is ast.Attribute and n.attr == "get_shard_metadata"
                                     for n in index.below([value])):
            return True
    return False
