"""XLA305 training-loop-without-sync."""
import ast
from typing import Iterator, Set, Tuple

from flake8_xla.analysis.syntax import is_constant
from flake8_xla.analysis.loops import STEP_MARKERS, SYNCS, XLA_COMPILE, RegionKind
from flake8_xla.analysis.loops import StepRegions
from flake8_xla.analysis.off_xla import OffXla
from flake8_xla.analysis.callgraph import LocalFunctions
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.values import HOST_TENSOR
from flake8_xla.versions import Version
from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.reads import READ_METHODS
from flake8_xla.analysis.syntax import NodeIndex
from flake8_xla.analysis.calls import ProjectCalls

DEVICE_LOADERS = frozenset({"torch_xla.distributed.parallel_loader.MpDeviceLoader",
                            "torch_xla.distributed.parallel_loader.ParallelLoader"})
PLAIN_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
EAGER = frozenset({"torch_xla.experimental.eager_mode", "torch_xla._XLAC._set_use_eager_mode"})
ITERATORS = frozenset({"enumerate", "zip", "iter", "tqdm"})
DEVICE_LOADER = "torch_xla.distributed.parallel_loader.MpDeviceLoader (it syncs after every batch)"
HEADER = "import torch\nimport torch_xla\nfrom torch.utils.data import DataLoader\n\n"
SETUP = ("device = torch_xla.device()\nmodel = torch.nn.Linear(8, 2).to(device)\n"
         "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
         "loader = DataLoader(dataset, batch_size=32, drop_last=True)\n")
BODY = ("    data, target = data.to(device), target.to(device)\n    optimizer.zero_grad()\n"
        "    loss = torch.nn.functional.cross_entropy(model(data), target)\n    loss.backward()\n"
        "    optimizer.step()\n")


class TrainingLoopWithoutSync(Rule):
    code = "XLA305"
    name = "training-loop-without-sync"
    summary = "A training or evaluation loop over a plain DataLoader that never syncs the graph"
    what_it_does = (
        "Flags a training loop (its body calls `.backward()`, `optimizer.step()` or `xm.optimizer_step`) whose "
        "data provably does not come from a device loader (it iterates a `torch.utils.data.DataLoader` built in "
        "the file, a `range()` or a literal, and draws no batches from anything else) and that never cuts the "
        "graph: no `torch_xla.sync()` / `xm.mark_step()` in it (also through a name given one, "
        "`mark = xm.mark_step`), in a loop around it, or in a function or method of this file it calls (a "
        "wrapper such as `Dist.sync()`), in a function of another module of the project that syncs (`flake8-xla "
        "check` reads the project's modules; the flake8 plugin lints one file at a time), or that the project "
        "declares as a sync (`sync-functions = [\"mylib.sync\"]` "
        "in `[tool.flake8-xla]`, `xla-sync-functions = mylib.sync` for flake8: a wrapper in another module); "
        "no `xm.optimizer_step(..., barrier=True)`; no `torch_xla.compile` / "
        "`torch_xla.step` around or inside the step; no eager mode. Loops over an `MpDeviceLoader` or over an "
        "iterable the analysis cannot see (a function parameter that the file's calls do not show to be a "
        "plain DataLoader) are fine: the device loader syncs after every batch. So is a `range()` loop in a file "
        "that uses a device loader, unless it visibly draws from a plain one, and a loop that never runs on XLA "
        "(it uses apex, a CUDA-only library), and a `range()` loop that works on data its function was given "
        "(the D-steps of a GAN's step function, which its caller runs once per batch). An evaluation loop "
        "(it runs the model on the device, no training "
        "step) over a plain DataLoader of this file is flagged the same way when it neither syncs nor reads a "
        "value on every batch (a read runs the graph; XLA303/XLA307 report it)."
    )
    why_bad = (
        "Lazy tensors only record operations; a sync is what compiles and runs them. Without one, each step's "
        "operations are appended to one graph that grows for as long as the loop runs and executes only when "
        "something reads a value (a print, a checkpoint), and then as a single huge, ever-new graph. "
        "`xm.optimizer_step` syncs only with `barrier=True`; `MpDeviceLoader` syncs for you."
    )
    fix_safety = "No automatic fix: where the step ends is for the author to say."
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/learn/xla-advanced.md",
                  "https://github.com/pytorch/xla/blob/master/docs/source/learn/pytorch-on-xla-devices.md")
    valid = (
        Example(HEADER + SETUP + "for data, target in loader:\n" + BODY + "    torch_xla.sync()\n",
                title="a sync at the end of each step"),
        Example(HEADER + "import torch_xla.distributed.parallel_loader as pl\n\n" + SETUP +
                "for data, target in pl.MpDeviceLoader(loader, device):\n" + BODY,
                title="MpDeviceLoader syncs after every batch"),
        Example(HEADER + "\ndef train(model, loader, optimizer):\n    for data, target in loader:\n"
                "        model(data).sum().backward()\n        optimizer.step()\n",
                title="an iterable the analysis cannot see"),
        Example(HEADER + SETUP + "\n@torch_xla.compile\ndef step_fn(data, target):\n"
                "    optimizer.zero_grad()\n    torch.nn.functional.cross_entropy(model(data), target).backward()\n"
                "    optimizer.step()\n\nfor data, target in loader:\n"
                "    step_fn(data.to(device), target.to(device))\n",
                title="the step traced by torch_xla.compile"),
        Example(HEADER + "import torch_xla.distributed.parallel_loader as pl\n\n" + SETUP +
                "batches = iter(pl.MpDeviceLoader(loader, device))\n\n\ndef get_batch():\n"
                "    return next(batches)\n\n\nfor step in range(1000):\n    data, target = get_batch()\n"
                + BODY.split("\n", 1)[1], title="a range() loop that may draw from a device loader"),
        Example(HEADER + SETUP + "\n\nclass Dist:\n    @staticmethod\n    def barrier():\n"
                "        torch_xla.sync()\n\n\n"
                "for data, target in loader:\n" + BODY + "    Dist.barrier()\n",
                title="the project's own sync wrapper, defined in this file"),
    )
    invalid = (
        Example(
            HEADER + SETUP + "for epoch in range(10):\n    for data, target in loader:\n" +
            BODY.replace("\n    ", "\n        ").replace("    data", "        data", 1),
            expect=((10, 5, "this training loop never syncs the graph; end each step with torch_xla.sync()",
                     "Every step is appended to one lazy graph that grows until something reads a value. End each "
                     "step with torch_xla.sync(), or iterate a torch_xla.distributed.parallel_loader.MpDeviceLoader "
                     "(it syncs after every batch)."),),
        ),
        Example(
            HEADER + SETUP + "it = iter(loader)\nfor step in range(1000):\n    data, target = next(it)\n" + BODY,
            target="2.3",
            expect=((10, 1, "this training loop never syncs the graph; end each step with xm.mark_step()"),),
            title="a range loop drawing from a plain DataLoader, on torch_xla 2.3",
        ),
        Example(
            HEADER + SETUP + "correct = torch.zeros((), device=device)\nfor data, target in loader:\n"
            "    data, target = data.to(device), target.to(device)\n"
            "    correct += (model(data).argmax(-1) == target).sum()\n",
            expect=((10, 1, "this evaluation loop never syncs the graph; end each batch with torch_xla.sync()",
                     "Every batch is appended to one lazy graph that grows until the loop ends. End each batch with "
                     "torch_xla.sync(), or iterate a torch_xla.distributed.parallel_loader.MpDeviceLoader (it syncs "
                     "after every batch)."),),
            title="an evaluation loop that keeps its counts on the device",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        regions: StepRegions = ctx.get(StepRegions)
        references = ctx.get(SemanticModel).references
        if not regions.training_loops and not any(r.qualname in PLAIN_LOADERS for r in references):
            return
        if any(r.qualname in EAGER for r in references):
            return
        device_loaders = any(r.qualname in DEVICE_LOADERS for r in ctx.get(SemanticModel).references)
        syncing, aliases = _syncing_functions(ctx)
        cut: Set[int] = set()  # loops whose body syncs, and the loops inside them
        for loop in ctx.get(NodeIndex).of(ast.For, ast.AsyncFor, ast.While):
            inside = ctx.get(NodeIndex).below([loop])
            if any(_cuts(ctx, node, syncing, aliases) for node in inside):
                cut.update(id(n) for n in inside if type(n) in (ast.For, ast.AsyncFor, ast.While))
        sync = "torch_xla.sync()" if ctx.target.version >= Version(2, 4) else "xm.mark_step()"
        for step in regions.training_loops:
            loop = step.loop
            region = regions.region_of(loop)
            if id(loop) in cut or (region is not None and region.kind in (RegionKind.COMPILED, RegionKind.DYNAMO)) or \
                    id(loop) in ctx.get(OffXla).nodes:
                continue
            if type(loop) is not ast.For or not _plain(ctx, loop.iter):
                continue
            draws = [call.args[0] for call in ctx.get(NodeIndex).below([loop]) if type(call) is ast.Call and
                     type(call.func) is ast.Name and call.func.id == "next" and call.args]
            if not all(_plain(ctx, source) for source in draws):
                continue
            if device_loaders and not draws and ctx.get(TensorFacts).loader(_iterated(loop.iter)) != HOST_TENSOR:
                continue  # a range() loop in a file with a device loader may get its batches from it
            if not draws and ctx.get(TensorFacts).loader(_iterated(loop.iter)) != HOST_TENSOR and \
                    ctx.get(TensorFacts).fed_by_caller(loop):
                continue  # the inner steps of a step function: its caller's loop brings the batches
            yield self.diagnostic(ctx, loop, f"this training loop never syncs the graph; end each step with {sync}",
                                  help=("Every step is appended to one lazy graph that grows until something reads a "
                                        f"value. End each step with {sync}, or iterate a {DEVICE_LOADER}."))
        training = {id(step.loop) for step in regions.training_loops}
        for loop in ctx.get(NodeIndex).of(ast.For, ast.AsyncFor):
            # an evaluation (or inference) loop over a plain DataLoader that runs the model on the device
            if id(loop) in training or id(loop) in cut or id(loop) in ctx.get(OffXla).nodes or not loop.body:
                continue
            region = regions.region_of(loop.body[0])
            if region is None or region.kind not in (RegionKind.MODEL_LOOP, RegionKind.DEVICE_LOOP) or \
                    regions.origin(region) is not loop:
                continue
            if ctx.get(TensorFacts).loader(_iterated(loop.iter)) != HOST_TENSOR or _reads_every_batch(ctx.get(NodeIndex), loop):
                continue
            yield self.diagnostic(ctx, loop, f"this evaluation loop never syncs the graph; end each batch with {sync}",
                                  help=("Every batch is appended to one lazy graph that grows until the loop ends. End "
                                        f"each batch with {sync}, or iterate a {DEVICE_LOADER}."))


def _reads_every_batch(index: NodeIndex, loop: ast.AST) -> bool:
    """A read of a value in the loop runs the graph traced so far (XLA303/XLA307 speak of it)."""
    for node in index.below([loop]):
        if type(node) is ast.Call:
            func = node.func
            if type(func) is ast.Attribute and (func.attr in READ_METHODS or func.attr == "to" and node.args and
                                                type(node.args[0]) is ast.Constant and node.args[0].value == "cpu"):
                return True
            if type(func) is ast.Name and func.id in ("float", "int", "bool", "print"):
                return True
        elif type(node) in (ast.If, ast.While, ast.JoinedStr):
            return True  # a branch or a formatted value may read a tensor: leave it to XLA304/XLA303
    return False


def _cuts(ctx: FileContext, node: ast.AST, syncing: Set[int], aliases: Set[str]) -> bool:
    """Whether ``node`` syncs the graph: a sync, a call of a name given one (``mark = xm.mark_step``,
    ``step = torch_xla.compile(fn)``), a barrier optimizer step, a compiled step, or a call of a
    function of this file that does one of those."""
    qualname = ctx.get(QualifiedNames).qualname
    if type(node) is ast.Call:
        name = qualname(node.func)
        if name is None and type(node.func) is ast.Name and node.func.id in aliases:
            return True
        if name in SYNCS or name in XLA_COMPILE or name in ctx.sync_functions:
            return True
        if name in STEP_MARKERS and any(k.arg == "barrier" and not is_constant(k.value, False)
                                        for k in node.keywords):
            return True
        helper = ctx.get(ProjectCalls).callee(node, ctx.get(TensorFacts).assigned_value)
        if helper is not None and helper.syncs:
            return True  # a function of another module of the project that syncs (`flake8-xla check`)
        return bool(syncing) and any(id(fn) in syncing for fn in ctx.get(LocalFunctions).targets(node, loose=True))
    if type(node) in (ast.With, ast.AsyncWith):
        return any(type(i.context_expr) is ast.Call and qualname(i.context_expr.func) in XLA_COMPILE
                   for i in node.items)
    return False


def _syncing_functions(ctx: FileContext) -> Tuple[Set[int], Set[str]]:
    """id() of the functions and methods of this file that sync (directly or through each other,
    resolved loosely: a wrongly resolved wrapper only keeps the rule silent) or are compiled as a
    step, and the names assigned a sync or a compiled step."""
    qualname = ctx.get(QualifiedNames).qualname
    aliases = set()
    for node in ctx.get(NodeIndex).of(ast.Assign):  # mark = xm.mark_step; step = torch_xla.compile(fn)
        value = node.value
        name = qualname(value.func) if type(value) is ast.Call else qualname(value)
        if name in SYNCS if type(value) is not ast.Call else name in XLA_COMPILE:
            aliases.update(t.id for t in node.targets if type(t) is ast.Name)
    direct = {id(fn) for fn in ctx.get(NodeIndex).of(ast.FunctionDef, ast.AsyncFunctionDef)
              if any(qualname(d.func if type(d) is ast.Call else d) in XLA_COMPILE for d in fn.decorator_list)}
    # the scopes of the syncs themselves (found from the references, not by walking every function)
    cutting = [r.call for r in ctx.get(SemanticModel).references if r.call is not None and
               (r.qualname in SYNCS or r.qualname in XLA_COMPILE or r.qualname in STEP_MARKERS or
                r.qualname in ctx.sync_functions)]
    if aliases:
        cutting += [c for c in ctx.get(NodeIndex).of(ast.Call) if type(c.func) is ast.Name and c.func.id in aliases]
    index = ctx.get(NodeIndex)
    direct.update(id(index.scope_of(node)) for node in cutting if _cuts(ctx, node, set(), aliases))
    return ctx.get(LocalFunctions).reaching(direct, loose=True), aliases


def _plain(ctx: FileContext, expr: ast.expr) -> bool:
    """Whether iterating ``expr`` provably yields host data: a DataLoader of this file, range(), a
    literal, or enumerate/zip/iter/tqdm of those."""
    if type(expr) in (ast.List, ast.Tuple):
        return True
    if type(expr) is ast.Name:
        value = ctx.get(TensorFacts).assigned_value(expr)
        if value is not None and type(value) is ast.Call and _iterator_of(value):
            return _plain(ctx, value)
    if type(expr) is ast.Call:
        callee = _iterator_of(expr)
        if callee == "range":
            return True
        if callee:
            return bool(expr.args) and all(_plain(ctx, a) for a in expr.args)
    return ctx.get(TensorFacts).loader(expr) == HOST_TENSOR


def _iterated(expr: ast.expr) -> ast.expr:
    """The loader under enumerate()/tqdm()/iter() (zip: its first argument)."""
    while type(expr) is ast.Call and _iterator_of(expr) and _iterator_of(expr) != "range" and expr.args:
        expr = expr.args[0]
    return expr


def _iterator_of(call: ast.Call) -> str:
    func = call.func
    name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
    return name if name in ITERATORS or name == "range" else ""
