"""XLA602 replicas-without-data-sharding."""
import ast
from typing import Iterator

from flake8_xla.analysis.fsdp import MASTER_WORD
from flake8_xla.analysis.launches import Launches
from flake8_xla.analysis.loaders import BATCH_SAMPLER, DATASET, SAMPLER, DataLoaders
from flake8_xla.analysis.syntax import Parents, argument, is_constant
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

HEADER = "import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n" \
         "from torch.utils.data import DataLoader\nfrom torchvision import datasets\n\n"
INSTEAD = ("Pass sampler=DistributedSampler(dataset, num_replicas=torch_xla.runtime.world_size(), "
           "rank=torch_xla.runtime.global_ordinal()).")


class ReplicasWithoutDataSharding(Rule):
    code = "XLA602"
    name = "replicas-without-data-sharding"
    summary = "A training DataLoader without a sampler in a function launched once per device"
    since = "0.2.0"
    what_it_does = (
        "In a file that starts one process per device (`torch_xla.launch(fn)`, `xmp.spawn(fn)`, "
        "`xla_compat.launch(fn)`), flags a `torch.utils.data.DataLoader(...)` built in the launched "
        "function, or in a function of the file it calls, that has neither `sampler=` nor `batch_sampler=` "
        "(an explicit `None` counts as none). Left alone: single-process runs (`nprocs=1`, "
        "`debug_single_process=True`); loaders with any sampler, which may shard; `*args`/`**kwargs`; "
        "datasets that shard themselves or cannot take a sampler (an `IterableDataset` subclass of the file, "
        "streaming and WebDataset-style datasets) and datasets split by hand (built with the rank, the "
        "ordinal, the world size or `.shard(`); evaluation loaders (the loader's name, its function or its "
        "dataset says val/test/eval and nothing says train), which are wasteful unsharded but correct; and "
        "loaders built under a test of the rank (`if xm.is_master_ordinal():`)."
    )
    why_bad = (
        "Each launched process iterates its own DataLoader. Without a sampler that splits the dataset "
        "by replica, every process draws the whole dataset: an epoch trains each sample once per device "
        "(with `shuffle=True` in a different order on each), the gradients averaged across replicas are "
        "those of one replica's full pass, and an epoch takes as long as on one device. "
        "`MpDeviceLoader` and `ParallelLoader` only move batches to the device; they do not shard "
        "(torch_xla/distributed/parallel_loader.py: `ParallelLoader` spreads batches over the devices "
        "it is given, one per process here). Measured on torch_xla 2.9, CPU, `CPU_NUM_DEVICES=2`, "
        "`torch_xla.launch` of a function iterating `MpDeviceLoader(DataLoader(TensorDataset(arange(8)), "
        "batch_size=2), device)`: rank 0 and rank 1 each saw `[0, 1, 2, 3, 4, 5, 6, 7]`."
    )
    fix_safety = ("No automatic fix: the sampler changes which samples each replica trains on, the "
                  "`shuffle=` argument has to move to it, and `sampler.set_epoch(epoch)` belongs in the epoch loop.")
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/distributed/parallel_loader.py",
                  "https://github.com/pytorch/xla/blob/v2.9.0/examples/data_parallel/train_resnet_xla_ddp.py",
                  "https://github.com/pytorch/xla/issues/7904")
    valid = (
        Example(HEADER + "import torch_xla.runtime as xr\nfrom torch.utils.data.distributed import DistributedSampler\n"
                "\n\ndef _mp_fn(index):\n    train_set = datasets.MNIST('/tmp/mnist', train=True, download=True)\n"
                "    sampler = DistributedSampler(train_set, num_replicas=xr.world_size(), rank=xr.global_ordinal())\n"
                "    loader = DataLoader(train_set, batch_size=64, sampler=sampler, drop_last=True)\n"
                "    for x, y in pl.MpDeviceLoader(loader, torch_xla.device()):\n        step(x, y)\n\n\n"
                "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
                title="a DistributedSampler"),
        Example(HEADER + "def _mp_fn(index):\n    train_set = datasets.MNIST('/tmp/mnist', train=True, download=True)\n"
                "    loader = DataLoader(train_set, batch_size=64, drop_last=True)\n\n\n"
                "torch_xla.launch(_mp_fn, debug_single_process=True)\n",
                title="a single process"),
        Example(HEADER + "import torch_xla.runtime as xr\n\n\ndef _mp_fn(index):\n"
                "    train_set = datasets.CIFAR10('/tmp/cifar', train=True, download=True)\n"
                "    mine = torch.utils.data.Subset(\n"
                "        train_set, range(xr.global_ordinal(), len(train_set), xr.world_size()))\n"
                "    loader = DataLoader(mine, batch_size=64, drop_last=True)\n\n\n"
                "torch_xla.launch(_mp_fn)\n",
                title="a dataset split by hand"),
        Example(HEADER + "def _mp_fn(index, config):\n"
                "    loader = DataLoader(build_dataset(config), batch_size=64, drop_last=True)\n"
                "\n\ntorch_xla.launch(_mp_fn, args=(CONFIG,))\n",
                title="a dataset from elsewhere: it may split itself, or be an IterableDataset"),
        Example(HEADER + "def _mp_fn(index):\n    val_set = datasets.MNIST('/tmp/mnist', train=False, download=True)\n"
                "    val_loader = DataLoader(val_set, batch_size=64)\n\n\ntorch_xla.launch(_mp_fn)\n",
                title="an evaluation loader: every replica evaluates everything, wastefully but correctly"),
        Example(HEADER + "def main():\n    train_set = datasets.MNIST('/tmp/mnist', train=True, download=True)\n"
                "    loader = DataLoader(train_set, batch_size=64, drop_last=True)\n\n\nmain()\n",
                title="nothing is launched"),
    )
    invalid = (
        Example(
            HEADER + "def _mp_fn(index):\n    device = torch_xla.device()\n"
            "    train_set = datasets.MNIST('/tmp/mnist', train=True, download=True)\n"
            "    loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)\n"
            "    for x, y in pl.MpDeviceLoader(loader, device):\n        step(x, y)\n\n\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            expect=((10, 14, "DataLoader(...) needs a DistributedSampler: each replica trains on the whole "
                             "dataset",
                     "`_mp_fn` runs in every process that torch_xla.launch(...) on line 16 starts, and "
                     "MpDeviceLoader does not shard. Pass sampler=DistributedSampler(dataset, "
                     "num_replicas=torch_xla.runtime.world_size(), rank=torch_xla.runtime.global_ordinal())."),),
        ),
        Example(
            HEADER + "import torch_xla.distributed.xla_multiprocessing as xmp\n\n\n"
            "class Pairs(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n        return PAIRS[i]\n\n"
            "    def __len__(self):\n        return len(PAIRS)\n\n\n"
            "def get_loader(batch_size):\n    return DataLoader(Pairs(), batch_size=batch_size, sampler=None,"
            " drop_last=True)\n\n\ndef train(flags):\n    loader = get_loader(flags.batch_size)\n\n\n"
            "def _mp_fn(index, flags):\n    train(flags)\n\n\nxmp.spawn(_mp_fn, args=(FLAGS,))\n",
            expect=((19, 12, "DataLoader(...) needs a DistributedSampler: each replica trains on the whole "
                             "dataset",
                     "`get_loader` (called from `train`, called from `_mp_fn`) runs in every process that "
                     "xmp.spawn(...) on line 30 starts, and MpDeviceLoader does not shard. Pass "
                     "sampler=DistributedSampler(dataset, num_replicas=torch_xla.runtime.world_size(), "
                     "rank=torch_xla.runtime.global_ordinal())."),),
            title="a Dataset class of the file, in a function the launched one calls, sampler=None",
        ),
        Example(
            HEADER + "def _mp_fn(index, train_set, flags):\n"
            "    loader = DataLoader(train_set, batch_size=flags.batch_size, shuffle=True, drop_last=True)\n"
            "    train_loop(pl.MpDeviceLoader(loader, torch_xla.device()))\n\n\n"
            "if __name__ == '__main__':\n"
            "    data = datasets.FashionMNIST('/tmp/fmnist', train=True, download=True)\n"
            "    torch_xla.launch(_mp_fn, args=(data, FLAGS))\n",
            expect=((8, 14, "DataLoader(...) needs a DistributedSampler: each replica trains on the whole "
                            "dataset",
                     "`_mp_fn` runs in every process that torch_xla.launch(...) on line 14 starts, and "
                     "MpDeviceLoader does not shard. Pass sampler=DistributedSampler(dataset, "
                     "num_replicas=torch_xla.runtime.world_size(), rank=torch_xla.runtime.global_ordinal())."),),
            title="the dataset handed to the launched function",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        loaders = ctx.get(DataLoaders)
        if not loaders.references or not ctx.get(Launches).processes():
            return
        why, passed = ctx.get(Launches).reached
        if not why:
            return
        for ref in loaders.references:
            call = ref.call
            owner = loaders.function_of(call)
            reason = why.get(id(owner)) if owner is not None else None
            if reason is None or _unknown_arguments(call):
                continue
            if any(not is_constant(s, None) and s is not None and not _is_none(s)
                   for s in (argument(call, SAMPLER, "sampler"), argument(call, BATCH_SAMPLER, "batch_sampler"))):
                continue
            dataset = argument(call, DATASET, "dataset")
            if dataset is None:
                continue
            if not loaders.map_style(dataset, passed):
                continue  # a dataset from elsewhere may split itself, or be iterable (no sampler possible)
            if loaders.for_evaluation(call) or loaders.splits_itself(dataset) or \
                    _rank_guarded(ctx, call, owner) or not loaders.trained_on(call):
                continue
            yield self.diagnostic(
                ctx, call, f"{ref.written_prefix(ref.qualname)}(...) needs a DistributedSampler: each replica trains "
                "on the whole dataset",
                help=f"{reason}, and MpDeviceLoader does not shard. {INSTEAD}")


def _is_none(node: ast.AST) -> bool:
    return type(node) is ast.Constant and node.value is None


def _unknown_arguments(call: ast.Call) -> bool:
    return any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords)


def _rank_guarded(ctx: FileContext, call: ast.Call, owner: ast.AST) -> bool:
    """Inside an ``if`` (or conditional expression) whose test speaks of the master or the rank."""
    return any(part != "test" and MASTER_WORD.search(ast.unparse(node.test))
               for node, part in ctx.get(Parents).conditionals(call, stop=owner))
