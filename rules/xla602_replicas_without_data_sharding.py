"""XLA602 replicas-without-data-sharding."""
import ast
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from flake8_xla.analysis.flow import FlowFacts, argument, dotted, is_constant
from flake8_xla.analysis.fsdp import LAUNCH, MASTER_WORD, PARTIAL, SPAWN
from flake8_xla.analysis.loops import StepRegions
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.syntax import NodeIndex, parents
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# DataLoader(dataset, batch_size=1, shuffle, sampler, batch_sampler, ...)
_DATASET, _SAMPLER, _BATCH_SAMPLER = 0, 3, 4
# a dataset built with these words in it is split by process (by hand, or by a library that knows the rank)
_SHARDING_WORD = re.compile(r"(?i)rank|ordinal|world_size|num_replicas|replica|process_index|num_processes|shard"
                            r"|split_dataset_by_node|node_split|nodesplitter|split_by_node|split_by_worker")
# datasets that are iterated, not indexed: a sampler cannot split them (they split themselves, if at all)
_ITERABLE_WORD = re.compile(r"(?i)iterable|stream|webdataset|\bwds\b|datapipe|IterDataPipe|shards?\b")
_ITERABLE_BASES = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset",
                             "datasets.IterableDataset", "torch.utils.data.IterDataPipe"})
# loaders for evaluation: an unsharded one wastes time (every replica evaluates everything) but is right
_EVALUATION = re.compile(r"(?i)(?<![a-z])(val|test|eval|predict|infer|submission|calib)")
_TRAINING = re.compile(r"(?i)train|tune|(?<![a-z])fit")
# datasets indexed by a sampler: torchvision's, torch's wrappers, Hugging Face's (not streaming)
_MAP_STYLE = frozenset({
    "torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset", "torch.utils.data.Subset",
    "torch.utils.data.dataset.Subset", "torch.utils.data.ConcatDataset", "torch.utils.data.dataset.ConcatDataset",
    "datasets.load_dataset", "datasets.load_from_disk", "datasets.Dataset.from_dict", "datasets.Dataset.from_pandas",
    "datasets.Dataset.from_list", "datasets.Dataset.from_generator"})
_MAP_STYLE_MODULES = ("torchvision.datasets.",)
# methods of a Hugging Face dataset that return one of the same kind
_SAME_KIND_METHODS = frozenset({"shuffle", "map", "select", "filter", "with_format", "set_format", "with_transform",
                                "remove_columns", "rename_column", "rename_columns", "cast", "sort", "flatten_indices"})
_SAVER = re.compile(r"(?i)save|dump|pickle")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
HEADER = "import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n" \
         "from torch.utils.data import DataLoader\nfrom torchvision import datasets\n\n"
INSTEAD = ("pass sampler=DistributedSampler(dataset, num_replicas=torch_xla.runtime.world_size(), "
           "rank=torch_xla.runtime.global_ordinal())")


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
            expect=((10, 14, "DataLoader(...) has no sampler, and `_mp_fn` runs in every process that "
                             "torch_xla.launch(...) on line 16 starts: each replica trains on the whole dataset "
                             "(MpDeviceLoader does not shard); " + INSTEAD),),
        ),
        Example(
            HEADER + "import torch_xla.distributed.xla_multiprocessing as xmp\n\n\n"
            "class Pairs(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n        return PAIRS[i]\n\n"
            "    def __len__(self):\n        return len(PAIRS)\n\n\n"
            "def get_loader(batch_size):\n    return DataLoader(Pairs(), batch_size=batch_size, sampler=None,"
            " drop_last=True)\n\n\ndef train(flags):\n    loader = get_loader(flags.batch_size)\n\n\n"
            "def _mp_fn(index, flags):\n    train(flags)\n\n\nxmp.spawn(_mp_fn, args=(FLAGS,))\n",
            expect=((19, 12, "DataLoader(...) has no sampler, and `get_loader` (called from `train`, called from "
                             "`_mp_fn`) runs in every process that xmp.spawn(...) on line 30 starts: each replica "
                             "trains on the whole dataset (MpDeviceLoader does not shard); " + INSTEAD),),
            title="a Dataset class of the file, in a function the launched one calls, sampler=None",
        ),
        Example(
            HEADER + "def _mp_fn(index, train_set, flags):\n"
            "    loader = DataLoader(train_set, batch_size=flags.batch_size, shuffle=True, drop_last=True)\n"
            "    train_loop(pl.MpDeviceLoader(loader, torch_xla.device()))\n\n\n"
            "if __name__ == '__main__':\n"
            "    data = datasets.FashionMNIST('/tmp/fmnist', train=True, download=True)\n"
            "    torch_xla.launch(_mp_fn, args=(data, FLAGS))\n",
            expect=((8, 14, "DataLoader(...) has no sampler, and `_mp_fn` runs in every process that "
                            "torch_xla.launch(...) on line 14 starts: each replica trains on the whole dataset "
                            "(MpDeviceLoader does not shard); " + INSTEAD),),
            title="the dataset handed to the launched function",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        launches: List[Tuple[ast.Call, str]] = []
        loaders = []
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None:
                continue
            if ref.qualname in LAUNCH or ref.qualname in SPAWN:
                if not _single_process(ctx, call, ref.qualname in SPAWN):
                    launches.append((call, ref.written_prefix(ref.qualname)))
            elif ref.qualname in DATALOADER:
                loaders.append(ref)
        if not launches or not loaders:
            return
        reached = _Reached(ctx, launches)
        if not reached.why:
            return
        index = ctx.get(NodeIndex)
        tree_parents: Optional[Dict[int, ast.AST]] = None
        for ref in loaders:
            call = ref.call
            owner = _function_of(index, call)
            why = reached.why.get(id(owner)) if owner is not None else None
            if why is None or _unknown_arguments(call):
                continue
            if any(not is_constant(s, None) and s is not None and not _is_none(s)
                   for s in (argument(call, _SAMPLER, "sampler"), argument(call, _BATCH_SAMPLER, "batch_sampler"))):
                continue
            dataset = argument(call, _DATASET, "dataset")
            if dataset is None:
                continue
            if not _map_style(ctx, dataset, reached.passed, 0):
                continue  # a dataset from elsewhere may split itself, or be iterable (no sampler possible)
            tree_parents = tree_parents if tree_parents is not None else parents(ctx.tree)
            if _for_evaluation(call, owner, dataset, tree_parents) or _splits_itself(ctx, dataset) or \
                    _rank_guarded(call, owner, tree_parents) or not _trained_on(call, owner, tree_parents):
                continue
            yield self.diagnostic(ctx, call, (
                f"{ref.written_prefix(ref.qualname)}(...) has no sampler, and {why}: each replica trains on the "
                f"whole dataset (MpDeviceLoader does not shard); {INSTEAD}"))


def _single_process(ctx: FileContext, call: ast.Call, spawn: bool) -> bool:
    """``xmp.spawn(fn, nprocs=1)`` or ``torch_xla.launch(fn, debug_single_process=True)``, also through a
    name assigned the constant (``nprocs = 1``): one process."""
    value = argument(call, 2, "nprocs") if spawn else argument(call, 3, "debug_single_process")
    if type(value) is ast.Name:
        value = ctx.get(TensorFacts).assigned_value(value) or value
    return (type(value) is ast.Constant and value.value == 1) if spawn else is_constant(value, True)


def _is_none(node: ast.AST) -> bool:
    return type(node) is ast.Constant and node.value is None


def _unknown_arguments(call: ast.Call) -> bool:
    return any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords)


def _function_of(index: NodeIndex, node: ast.AST) -> Optional[ast.AST]:
    """The innermost def around ``node`` (lambdas and classes are looked through), or None."""
    scope = index.scope_of(node)
    for candidate in [scope] + index.enclosing(scope):
        if type(candidate) in _DEFS:
            return candidate
    return None


class _Reached:
    """The functions of the file that run in each launched process: the launched ones and those they
    call (plain names, ``self.m()``; nested defs run with the function around them), each with the
    words that say why."""

    def __init__(self, ctx: FileContext, launches: List[Tuple[ast.Call, str]]) -> None:
        self.why: Dict[int, str] = {}
        # (id(launched def), parameter) -> the expression the launch passes to it (``args=(dataset,)``)
        self.passed: Dict[Tuple[int, str], ast.expr] = {}
        local = ctx.get(StepRegions).local
        flow = ctx.get(FlowFacts)
        chain: Dict[int, List[str]] = {}  # id(def) -> its name, then its callers' back to the launched one
        launched: Dict[int, str] = {}  # id(def) -> "runs in every process that ... starts"
        pending: List[ast.AST] = []
        for call, spelled in launches:
            target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "fn"), None)
            if type(target) is ast.Call and flow.qualname(target.func) == PARTIAL and target.args:
                target = target.args[0]
            if type(target) is not ast.Name or flow.qualname(target) is not None:
                continue
            passed = argument(call, 1, "args")
            for fn in local.functions.get(target.id, ()):
                if type(passed) in (ast.Tuple, ast.List):
                    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
                    self.passed.update(((id(fn), name), value) for name, value in zip(params, passed.elts)
                                       if type(value) is not ast.Starred)
                if id(fn) not in chain:
                    chain[id(fn)] = [fn.name]
                    launched[id(fn)] = f"runs in every process that {spelled}(...) on line {call.lineno} starts"
                    pending.append(fn)
        while pending:
            fn = pending.pop(0)
            for node in ast.walk(fn):
                if type(node) in _DEFS and node is not fn and id(node) not in chain:
                    chain[id(node)], launched[id(node)] = chain[id(fn)], launched[id(fn)]  # runs with its function
                elif type(node) is ast.Call:
                    for callee in local.targets(node):
                        if id(callee) not in chain:
                            chain[id(callee)] = [callee.name] + chain[id(fn)]
                            launched[id(callee)] = launched[id(fn)]
                            pending.append(callee)
        for key, names in chain.items():
            via = "".join(f", called from `{name}`" for name in names[2:])
            head = f"`{names[0]}`" if len(names) == 1 else f"`{names[0]}` (called from `{names[1]}`{via})"
            self.why[key] = f"{head} {launched[key]}"


def _for_evaluation(call: ast.Call, owner: ast.AST, dataset: ast.AST, tree_parents: Dict[int, ast.AST]) -> bool:
    """Whether the loader's name, else its function, else its dataset says evaluation (the first of
    them that says either)."""
    parent = tree_parents.get(id(call))
    named = ""
    if type(parent) in (ast.Assign, ast.AnnAssign):
        named = " ".join(ast.unparse(t) for t in getattr(parent, "targets", None) or [parent.target])
    elif type(parent) is ast.keyword:
        named = parent.arg or ""
    for said in (named, getattr(owner, "name", ""), ast.unparse(dataset)):
        if _TRAINING.search(said):
            return False
        if _EVALUATION.search(said):
            return True
    return False


def _map_style(ctx: FileContext, node: ast.AST, passed: Dict[Tuple[int, str], ast.expr], depth: int) -> bool:
    """Whether ``node`` surely holds a dataset that a sampler indexes: one of torchvision's, a TensorDataset,
    Subset or ConcatDataset, a Hugging Face dataset that does not stream, or a Dataset class of the file with
    ``__getitem__``; followed through names (and what a launch passes to its function) a few steps back."""
    if depth > 4:
        return False
    if type(node) is ast.Name:
        value = ctx.get(TensorFacts).assigned_value(node) or ctx.get(FlowFacts).value_of(node)
        if value is None:
            owner = _function_of(ctx.get(NodeIndex), node)
            value = passed.get((id(owner), node.id)) if owner is not None else None
        return value is not None and value is not node and _map_style(ctx, value, passed, depth + 1)
    if type(node) is ast.Subscript:  # load_dataset(...)["train"]
        return type(node.slice) is not ast.Slice and _map_style(ctx, node.value, passed, depth + 1)
    if type(node) is not ast.Call:
        return False
    func = node.func
    qualname = ctx.get(FlowFacts).qualname(func)
    if qualname is not None:
        if qualname in ("datasets.load_dataset", "datasets.load_from_disk") and any(
                k.arg == "streaming" and not is_constant(k.value, False) for k in node.keywords):
            return False
        return qualname in _MAP_STYLE or qualname.startswith(_MAP_STYLE_MODULES)
    if type(func) is ast.Attribute and func.attr in _SAME_KIND_METHODS:
        return _map_style(ctx, func.value, passed, depth + 1)
    return type(func) is ast.Name and _indexed_class(ctx, func.id)


def _indexed_class(ctx: FileContext, name: str) -> bool:
    """A class of the file with ``__getitem__`` (its own or a local base's) that is no iterable dataset,
    or one derived from a torchvision dataset."""
    local = ctx.get(StepRegions).local
    cls = local.classes.get(name)
    flow = ctx.get(FlowFacts)
    seen: Set[int] = set()
    while cls is not None and id(cls) not in seen:
        seen.add(id(cls))
        methods = {stmt.name for stmt in cls.body if type(stmt) in _DEFS}
        if "__iter__" in methods:
            return False
        following = None
        for base in cls.bases:
            qualname = flow.qualname(base) or ""
            if qualname in _ITERABLE_BASES or _ITERABLE_WORD.search(dotted(base) or ""):
                return False
            if qualname.startswith(_MAP_STYLE_MODULES):
                return True
            if type(base) is ast.Name and base.id in local.classes:
                following = local.classes[base.id]
        if "__getitem__" in methods:
            return True
        cls = following
    return False


def _splits_itself(ctx: FileContext, dataset: ast.AST) -> bool:
    """A dataset built with the rank or the world size (``Subset(ds, range(rank, n, world))``,
    ``ds.shard(...)``, ``split_dataset_by_node``, ``ds[rank::world]``), followed a few names back."""
    tensors = ctx.get(TensorFacts)
    flow = ctx.get(FlowFacts)
    seen: Set[int] = set()
    frontier = [dataset]
    for _ in range(4):
        following = []
        for expr in frontier:
            if id(expr) in seen:
                continue
            seen.add(id(expr))
            if _SHARDING_WORD.search(ast.unparse(expr)):
                return True
            for node in ast.walk(expr):
                if type(node) is ast.Subscript and type(node.slice) is ast.Slice and node.slice.step is not None:
                    return True
                if type(node) is ast.Name and type(node.ctx) is ast.Load:
                    value = tensors.assigned_value(node) or flow.value_of(node)
                    if value is not None:
                        following.append(value)
        frontier = following
    return False


def _trained_on(call: ast.Call, owner: ast.AST, tree_parents: Dict[int, ast.AST]) -> bool:
    """Whether the loader may feed training: not assigned to a name that its function never reads, or
    only passes to a saver (``torch.save(loader, path)`` keeps it as an artifact)."""
    parent = tree_parents.get(id(call))
    if type(parent) is not ast.Assign or len(parent.targets) != 1 or type(parent.targets[0]) is not ast.Name:
        return True  # returned, passed on, stored in an attribute: used elsewhere
    name = parent.targets[0].id
    uses = [n for n in ast.walk(owner) if type(n) is ast.Name and n.id == name and type(n.ctx) is ast.Load]
    for use in uses:
        holder = tree_parents.get(id(use))
        if not (type(holder) is ast.Call and use in holder.args and _SAVER.search(ast.unparse(holder.func))):
            return True
    return False


def _rank_guarded(call: ast.Call, owner: ast.AST, tree_parents: Dict[int, ast.AST]) -> bool:
    """Inside an ``if`` (or conditional expression) whose test speaks of the master or the rank."""
    child, parent = call, tree_parents.get(id(call))
    while parent is not None and parent is not owner:
        if type(parent) in (ast.If, ast.IfExp) and child is not parent.test and \
                MASTER_WORD.search(ast.unparse(parent.test)):
            return True
        child, parent = parent, tree_parents.get(id(parent))
    return False
