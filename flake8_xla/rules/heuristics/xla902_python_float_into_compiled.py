"""XLA902 python-float-into-compiled."""
import ast
from typing import Dict, Iterator, Optional, Set

from flake8_xla.rules.graph.wording import spelled
from flake8_xla.analysis.loops import LOOPS, SCOPES, RegionKind, compiled_callables
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.values import TENSORS
from flake8_xla.analysis.semantic import QualifiedNames
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.syntax import NodeIndex

FLOAT_CALLS = frozenset({"float", "get_last_lr", "get_lr", "random", "uniform", "gauss", "time", "perf_counter"})
HEADER = ("import torch\nimport torch_xla\n\n\n@torch.compile(backend=\"openxla\")\ndef train_step(x, lr):\n"
          "    return x - lr * x.grad\n\n\ndevice = torch_xla.device()\nx = torch.ones(4, device=device)\n")


class PythonFloatIntoCompiled(Rule):
    code = "XLA902"
    name = "python-float-into-compiled"
    summary = "A Python float that changes every call passed to a torch.compile(backend=\"openxla\") function"
    off_by_default = True
    level = "note"  # an opt-in heuristic's hint
    what_it_does = (
        "Flags, inside a loop, an argument of a call to a function compiled with "
        "`torch.compile(backend=\"openxla\")` (decorated, or the result of `torch.compile(f, "
        "backend=\"openxla\")`) that is a Python float computed from something that changes in the loop: "
        "the loop variable, a value assigned in the loop, `float(...)`, `.item()`, `scheduler.get_last_lr()`. "
        "Constants and tensors are fine. A heuristic, off by default: whether a value really differs "
        "between calls is not always visible."
    )
    why_bad = (
        "torch_xla sets `torch._dynamo.config.specialize_float = True`: Dynamo bakes each Python float into "
        "the graph as a constant, so every new value is a new graph to trace and compile (measured on "
        "torch_xla 2.9: three values, three graphs; the same values as 0-d XLA tensors, one graph). "
        "In LazyTensor mode (no torch.compile) the same float is device data and does not recompile."
    )
    fix_safety = "No automatic fix: the function may use the value as a Python number."
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/perf/dynamo.md",)
    valid = (
        Example(HEADER + "lr = torch.tensor(0.1, device=device)\nfor step in range(100):\n"
                "    lr = lr * 0.99\n    x = train_step(x, lr)\n", title="a 0-d tensor on the device"),
        Example(HEADER + "for step in range(100):\n    x = train_step(x, 0.1)\n", title="a constant"),
        Example("import torch\n\n\n@torch.compile\ndef step(x, lr):\n    return x * lr\n\n\n"
                "for i in range(10):\n    step(torch.ones(2), 0.1 * i)\n", title="not compiled for XLA"),
    )
    invalid = (
        Example(
            HEADER + "for step in range(100):\n    lr = 0.1 * 0.99 ** step\n    x = train_step(x, lr)\n",
            expect=((14, 23, "lr, a changing Python float, recompiles train_step for each value; pass a 0-d "
                             "XLA tensor",
                     'train_step is a torch.compile(backend="openxla") function: Dynamo bakes each float into '
                     "the graph (torch_xla sets specialize_float=True), so every new value compiles a new "
                     "graph. Pass it as a 0-d tensor on the XLA device, e.g. torch.tensor(lr, device=device)."),),
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        callables = compiled_callables(ctx, RegionKind.DYNAMO)
        if not callables:
            return
        innermost: Dict[int, ast.AST] = {}
        index = ctx.get(NodeIndex)
        for loop in sorted(index.of(*LOOPS), key=lambda n: (n.lineno, n.col_offset), reverse=True):
            for node in index.below(loop.body, SCOPES):
                innermost.setdefault(id(node), loop)
        for call in ctx.get(NodeIndex).of(ast.Call):
            name = _called(call)
            loop = innermost.get(id(call))
            if name not in callables or loop is None:
                continue
            varying = _varying_names(index, loop)
            for arg in list(call.args) + [k.value for k in call.keywords]:
                if ctx.get(TensorFacts).kind(arg) in TENSORS or not _changes(index, arg, varying):
                    continue
                if not _floating(ctx, arg, loop, set()):
                    continue
                text = spelled(arg, "an argument")
                yield self.diagnostic(
                    ctx, arg, f"{text}, a changing Python float, recompiles {name} for each value; pass a 0-d XLA "
                    "tensor",
                    help=(f"{name} is a torch.compile(backend=\"openxla\") function: Dynamo bakes each float into "
                          "the graph (torch_xla sets specialize_float=True), so every new value compiles a new "
                          "graph. Pass it as a 0-d tensor on the XLA device, e.g. "
                          f"torch.tensor({spelled(arg, 'value')}, device=device)."))


def _called(call: ast.Call) -> Optional[str]:
    func = call.func
    if type(func) is ast.Name:
        return func.id
    if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
        return f"self.{func.attr}"
    return None


def _varying_names(index: NodeIndex, loop: ast.AST) -> Set[str]:
    """Names that take a new value on each iteration: loop targets and names assigned in the body."""
    roots = ([loop.target] if type(loop) is not ast.While else []) + list(loop.body)
    return {n.id for n in index.below(roots, SCOPES) if type(n) is ast.Name and type(n.ctx) is ast.Store}


def _changes(index: NodeIndex, expr: ast.expr, varying: Set[str]) -> bool:
    return any(type(n) is ast.Name and n.id in varying or type(n) is ast.Call for n in index.below([expr], SCOPES))


def _floating(ctx: FileContext, expr: ast.expr, loop: ast.AST, seen: Set[str]) -> bool:
    """Whether ``expr`` computes a Python float: a float constant, a true division, float(),
    .item(), a learning-rate getter, or a name assigned one of those in the loop."""
    index = ctx.get(NodeIndex)
    for node in index.below([expr], SCOPES):
        kind = type(node)
        if kind is ast.Constant and type(node.value) is float:
            return True
        if kind is ast.BinOp and type(node.op) is ast.Div:
            return True
        if kind is ast.Call:
            func = node.func
            called = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
            qualname = ctx.get(QualifiedNames).qualname(func) or ""
            if called in FLOAT_CALLS or called == "item" or qualname.startswith("math."):
                return True
        if kind is ast.Name and node.id not in seen:
            seen.add(node.id)
            for assign in index.below(loop.body, SCOPES):
                if type(assign) in (ast.Assign, ast.AugAssign, ast.AnnAssign) and any(
                        type(t) is ast.Name and t.id == node.id
                        for t in (assign.targets if type(assign) is ast.Assign else [assign.target])) and \
                        assign.value is not None and _floating(ctx, assign.value, loop, seen):
                    return True
    return False
