"""What a file's ``DataLoader``s feed and draw from: whether a loader is for evaluation, whether its
dataset is one a sampler indexes or one that splits itself by rank, whether it is trained on, and
whether its sampler never runs out."""
from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional, Set, Tuple

from .assignments import Assignments
from .bindings import Bindings
from .callgraph import LocalFunctions
from .semantic import QualifiedNames, Reference, SemanticModel
from .syntax import Fact, NodeIndex, Parents, argument, dotted, is_constant, walk

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# DataLoader(dataset, batch_size=1, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, drop_last)
DATASET, BATCH_SIZE, SAMPLER, BATCH_SAMPLER, DROP_LAST = 0, 1, 3, 4, 8
# a loader for evaluation keeps every sample on purpose; a word inside another (`interval`, `latest`) says nothing
_EVALUATION = re.compile(r"(?i)(?<![a-z])(val|test|eval|predict|infer|submission|calib)")
_TRAINING = re.compile(r"(?i)train|tune|(?<![a-z])fit")
# a dataset built with these words in it is split by process (by hand, or by a library that knows the rank)
_SHARDING_WORD = re.compile(r"(?i)rank|ordinal|world_size|num_replicas|replica|process_index|num_processes|shard"
                            r"|split_dataset_by_node|node_split|nodesplitter|split_by_node|split_by_worker")
# datasets that are iterated, not indexed: a sampler cannot split them (they split themselves, if at all)
_ITERABLE_WORD = re.compile(r"(?i)iterable|stream|webdataset|\bwds\b|datapipe|IterDataPipe|shards?\b")
_ITERABLE_BASES = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset",
                             "datasets.IterableDataset", "torch.utils.data.IterDataPipe"})
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


class DataLoaders(Fact):
    """The file's ``DataLoader(...)`` calls and what can be said about each."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.references: List[Reference] = [r for r in ctx.get(SemanticModel).references
                                            if r.call is not None and r.qualname in DATALOADER]

    def function_of(self, node: ast.AST) -> Optional[ast.AST]:
        """The innermost def around ``node`` (lambdas and classes are looked through), or None."""
        index = self.ctx.get(NodeIndex)
        scope = index.scope_of(node)
        return next((c for c in [scope] + index.enclosing(scope) if type(c) in _DEFS), None)

    def for_evaluation(self, call: ast.Call) -> bool:
        """Whether the loader's name, else its function, else its dataset says evaluation (the first of
        them that says either: ``val_loader = DataLoader(MNIST(train=False))`` is for evaluation)."""
        parent = self.ctx.get(Parents).of(call)
        named = ""
        if type(parent) in (ast.Assign, ast.AnnAssign):
            named = " ".join(ast.unparse(t) for t in getattr(parent, "targets", None) or [parent.target])
        elif type(parent) is ast.keyword:
            named = parent.arg or ""
        dataset = argument(call, DATASET, "dataset")
        owner = self.function_of(call)
        for said in (named, getattr(owner, "name", ""), ast.unparse(dataset) if dataset is not None else ""):
            if _TRAINING.search(said):
                return False
            if _EVALUATION.search(said):
                return True
        return False

    def trained_on(self, call: ast.Call) -> bool:
        """Whether the loader may feed training: not assigned to a name that its function never reads, or
        only passes to a saver (``torch.save(loader, path)`` keeps it as an artifact)."""
        parents = self.ctx.get(Parents)
        parent = parents.of(call)
        owner = self.function_of(call)
        if owner is None or type(parent) is not ast.Assign or len(parent.targets) != 1 or \
                type(parent.targets[0]) is not ast.Name:
            return True  # returned, passed on, stored in an attribute: used elsewhere
        name = parent.targets[0].id
        for use in walk([owner]):
            if type(use) is not ast.Name or use.id != name or type(use.ctx) is not ast.Load:
                continue
            holder = parents.of(use)
            if not (type(holder) is ast.Call and use in holder.args and _SAVER.search(ast.unparse(holder.func))):
                return True
        return False

    def endless(self, call: ast.Call) -> bool:
        """A sampler drawing with replacement (``RandomSampler(ds, replacement=True, num_samples=...)``)."""
        sampler = argument(call, SAMPLER, "sampler")
        if type(sampler) is ast.Name:
            sampler = self.ctx.get(Bindings).assigned_value(sampler) or sampler
        return type(sampler) is ast.Call and any(
            k.arg == "replacement" and type(k.value) is ast.Constant and k.value.value is True
            for k in sampler.keywords)

    def map_style(self, node: ast.AST, passed: Dict[Tuple[int, str], ast.expr], depth: int = 0) -> bool:
        """Whether ``node`` surely holds a dataset that a sampler indexes: one of torchvision's, a TensorDataset,
        Subset or ConcatDataset, a Hugging Face dataset that does not stream, or a Dataset class of the file
        with ``__getitem__``; followed through names (and ``passed``: what a launch passes to its function)
        a few steps back."""
        if depth > 4:
            return False
        ctx = self.ctx
        if type(node) is ast.Name:
            value = ctx.get(Bindings).assigned_value(node) or ctx.get(Assignments).value_of(node)
            if value is None:
                owner = self.function_of(node)
                value = passed.get((id(owner), node.id)) if owner is not None else None
            return value is not None and value is not node and self.map_style(value, passed, depth + 1)
        if type(node) is ast.Subscript:  # load_dataset(...)["train"]
            return type(node.slice) is not ast.Slice and self.map_style(node.value, passed, depth + 1)
        if type(node) is not ast.Call:
            return False
        func = node.func
        qualname = ctx.get(QualifiedNames).qualname(func)
        if qualname is not None:
            if qualname in ("datasets.load_dataset", "datasets.load_from_disk") and any(
                    k.arg == "streaming" and not is_constant(k.value, False) for k in node.keywords):
                return False
            return qualname in _MAP_STYLE or qualname.startswith(_MAP_STYLE_MODULES)
        if type(func) is ast.Attribute and func.attr in _SAME_KIND_METHODS:
            return self.map_style(func.value, passed, depth + 1)
        return type(func) is ast.Name and self._indexed_class(func.id)

    def _indexed_class(self, name: str) -> bool:
        """A class of the file with ``__getitem__`` (its own or a local base's) that is no iterable dataset,
        or one derived from a torchvision dataset."""
        local = self.ctx.get(LocalFunctions)
        cls = local.classes.get(name)
        names = self.ctx.get(QualifiedNames)
        seen: Set[int] = set()
        while cls is not None and id(cls) not in seen:
            seen.add(id(cls))
            methods = {stmt.name for stmt in cls.body if type(stmt) in _DEFS}
            if "__iter__" in methods:
                return False
            following = None
            for base in cls.bases:
                qualname = names.qualname(base) or ""
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

    def splits_itself(self, dataset: ast.AST) -> bool:
        """A dataset built with the rank or the world size (``Subset(ds, range(rank, n, world))``,
        ``ds.shard(...)``, ``split_dataset_by_node``, ``ds[rank::world]``), followed a few names back."""
        bindings = self.ctx.get(Bindings)
        assignments = self.ctx.get(Assignments)
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
                for node in walk([expr]):
                    if type(node) is ast.Subscript and type(node.slice) is ast.Slice and node.slice.step is not None:
                        return True
                    if type(node) is ast.Name and type(node.ctx) is ast.Load:
                        value = bindings.assigned_value(node) or assignments.value_of(node)
                        if value is not None:
                            following.append(value)
            frontier = following
        return False
