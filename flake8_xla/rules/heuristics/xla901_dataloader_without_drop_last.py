"""XLA901 dataloader-without-drop-last."""
import ast
from typing import Iterator

from flake8_xla.analysis.syntax import argument
from flake8_xla.analysis.loaders import BATCH_SAMPLER, BATCH_SIZE, DROP_LAST, DataLoaders
from flake8_xla.analysis.off_xla import OffXla
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

HEADER = "import torch_xla\nfrom torch.utils.data import DataLoader\n\n"


class DataloaderWithoutDropLast(Rule):
    code = "XLA901"
    name = "dataloader-without-drop-last"
    summary = "A batching DataLoader without drop_last=True in a torch_xla program"
    off_by_default = True
    level = "note"  # an opt-in heuristic's hint
    what_it_does = (
        "In a file that uses torch_xla, flags `torch.utils.data.DataLoader(...)` calls (any import form) "
        "that batch (`batch_size` other than 1 or None) without `drop_last=True`, including an explicit "
        "`drop_last=False`. Loaders given a `batch_sampler` (the sampler decides about the last batch), "
        "`**kwargs`, `*args` or a `drop_last` that is not a constant are not reported: the call may be "
        "fine. Neither are evaluation loaders (the loader's name, the function returning it, or its dataset "
        "says val/test/eval/predict, and nothing says train): dropping samples there changes the metric or "
        "loses predictions, so pad instead; nor loaders whose sampler draws with replacement (an epoch "
        "that never ends on a partial batch), nor code that never runs on XLA (a function that sets up "
        "apex). It is a heuristic and off by default."
    )
    why_bad = (
        "When the dataset size is not a multiple of the batch size, the last batch of every epoch is "
        "smaller. XLA compiles one graph per input shape, so that batch compiles the whole step once "
        "more (forward, backward and optimizer), which on a TPU can take minutes, and each distinct "
        "leftover size (per dataset, per replica) adds another graph. `drop_last=True` keeps one shape; "
        "where every sample counts, pad the last batch to the full size instead."
    )
    fix_safety = ("No automatic fix: dropping the last batch changes which samples are trained on or "
                  "evaluated; choose between drop_last=True and padding.")
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/recompilation.md",
                  "https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader")
    valid = (
        Example(HEADER + "loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)\n",
                title="drop_last=True"),
        Example(HEADER + "loader = DataLoader(train_set, batch_sampler=BucketSampler(train_set, 64))\n",
                title="a batch sampler decides"),
        Example(HEADER + "loader = DataLoader(stream, batch_size=None)\nsingles = DataLoader(train_set)\n",
                title="no batching, or batches of one"),
        Example(HEADER + "loader = DataLoader(train_set, **loader_kwargs)\n"
                "other = DataLoader(train_set, batch_size=64, drop_last=args.drop_last)\n",
                title="unknown arguments"),
        Example("from torch.utils.data import DataLoader\n\nloader = DataLoader(train_set, batch_size=64)\n",
                title="not a torch_xla file"),
        Example(HEADER + "val_loader = DataLoader(val_set, batch_size=64)\n\n\ndef predict_dataloader(self):\n"
                "    return DataLoader(self.datasets['predict'], batch_size=64)\n\n\n"
                "stream = DataLoader(train_set, batch_size=64, sampler=RandomSampler(train_set, replacement=True))\n",
                title="evaluation loaders, and a sampler that never ends an epoch"),
    )
    invalid = (
        Example(
            HEADER + "loader = DataLoader(train_set, batch_size=64, shuffle=True)\n",
            expect=((4, 10, "DataLoader(...) may end with a smaller batch, a new XLA graph; pass drop_last=True",
                     "Without drop_last=True the last batch is smaller when the dataset size is not a multiple "
                     "of batch_size: a new input shape that XLA compiles as a separate graph. Pass "
                     "drop_last=True, or pad the last batch to the full size."),),
        ),
        Example(
            "import torch.utils.data\nimport torch_xla.distributed.parallel_loader as pl\n\n"
            "loader = torch.utils.data.DataLoader(dataset, 32, True, None, None, 4, None, False, False)\n"
            "device_loader = pl.MpDeviceLoader(loader, device)\n",
            expect=((4, 10, "torch.utils.data.DataLoader(...) may end with a smaller batch, a new XLA graph; "
                            "pass drop_last=True",
                     "With drop_last=False the last batch is smaller when the dataset size is not a multiple "
                     "of batch_size: a new input shape that XLA compiles as a separate graph. Pass "
                     "drop_last=True, or pad the last batch to the full size."),),
            title="drop_last=False, given positionally",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        loaders = ctx.get(DataLoaders)
        if not loaders.references or not any(r.qualname.split(".", 1)[0] in ("torch_xla", "xla_compat")
                                             for r in ctx.get(SemanticModel).references):
            return
        never = ctx.get(OffXla).nodes
        for ref in loaders.references:
            call = ref.call
            if id(call) in never or loaders.for_evaluation(call) or loaders.endless(call):
                continue
            if any(kw.arg is None for kw in call.keywords) or any(type(a) is ast.Starred for a in call.args):
                continue  # **kwargs / *args: the arguments are unknown
            sampler = argument(call, BATCH_SAMPLER, "batch_sampler")
            if sampler is not None and not _is(sampler, None):
                continue
            size = argument(call, BATCH_SIZE, "batch_size")
            if size is None or _is(size, None) or _is(size, 1):
                continue  # batch_size defaults to 1: every batch is full
            drop = argument(call, DROP_LAST, "drop_last")
            if drop is not None and (type(drop) is not ast.Constant or drop.value):
                continue  # drop_last=True, or not known here
            spelled = ref.written_prefix(ref.qualname)
            given = "Without drop_last=True" if drop is None else f"With drop_last={drop.value!r}"
            yield self.diagnostic(
                ctx, call, f"{spelled}(...) may end with a smaller batch, a new XLA graph; pass drop_last=True",
                help=(f"{given} the last batch is smaller when the dataset size is not a multiple of batch_size: a "
                      "new input shape that XLA compiles as a separate graph. Pass drop_last=True, or pad the last "
                      "batch to the full size."))


def _is(node: ast.AST, value: object) -> bool:
    """``node`` is the constant ``value`` (1 is not True here)."""
    return type(node) is ast.Constant and type(node.value) is type(value) and node.value == value
