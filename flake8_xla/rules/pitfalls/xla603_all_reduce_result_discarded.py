"""XLA603 all-reduce-result-discarded."""
import ast
from typing import Callable, Iterator, Optional, Tuple

from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.syntax import NodeIndex, argument, dotted
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.values import TENSORS
from flake8_xla.fixing.edits import Edit, Fix
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

# xm.all_reduce(reduce_type, inputs, scale=1.0, groups=None, pin_layout=True), and the companion's copy
ALL_REDUCE = frozenset({"torch_xla.core.xla_model.all_reduce", "xla_compat.all_reduce",
                        "xla_compat.collectives.all_reduce"})
# methods that only a tensor has and that return a tensor: a list or tuple of tensors has none of them
_TENSOR_METHODS = frozenset({
    "sum", "mean", "detach", "clone", "float", "double", "half", "bfloat16", "long", "int", "to", "view",
    "reshape", "flatten", "unsqueeze", "squeeze", "abs", "norm", "pow", "sqrt", "exp", "log", "mul", "div",
    "add", "sub", "contiguous", "type_as", "new_tensor", "new_zeros", "new_ones", "new_full", "count_nonzero",
})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# torch functions that return one tensor whatever they are given
_TORCH_TENSOR = frozenset("torch." + n for n in (
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "tensor",
    "as_tensor", "zeros", "ones", "full", "empty", "stack", "cat", "concat", "scalar_tensor"))
HEADER = "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\n"


class AllReduceResultDiscarded(Rule):
    code = "XLA603"
    name = "all-reduce-result-discarded"
    summary = "xm.all_reduce() of a single tensor used as a statement: the reduced tensor is thrown away"
    since = "0.2.0"
    what_it_does = (
        "Flags `xm.all_reduce(reduce_type, t)` (and `inputs=t`, and `xla_compat.all_reduce`) written as a "
        "statement of its own when `t` is known to be one tensor: a tensor the value analysis knows "
        "(`torch.zeros(1, device=device)`, `correct = (pred == y).sum()` on device tensors), a `.grad`, or "
        "a tensor method's result (`loss.detach()`). A list or tuple of tensors is reduced in place and is "
        "not reported, and neither is an input the rule cannot tell apart from a list (a parameter, a name "
        "from another function). A result that is assigned, returned or passed on is used and fine."
    )
    why_bad = (
        "For a list, `xm.all_reduce` reduces the tensors in place; for a single tensor it returns a new "
        "tensor holding the reduced value and leaves its input alone (its docstring says so; "
        "`torch_xla/core/xla_model.py` takes `torch.ops._c10d_functional.all_reduce` or "
        "`_xla_all_reduce` for a tensor, `_xla_all_reduce_inplace` for a list). As a statement the result "
        "is dropped: each replica goes on with its own local value (a metric that is one replica's, "
        "gradients that are not averaged), and the lazy collective never even runs. Measured on torch_xla "
        "2.9, CPU (`XLA_ALWAYS_ALLREDUCE=1` so that one process runs the reduction, scale=0.5): the input "
        "tensor stays `[1.0, 1.0, 1.0]` while the returned one is `[0.5, 0.5, 0.5]`; the same call with "
        "`[t]` changes `t` to `[0.5, 0.5, 0.5]`; and the `torch_xla.sync()` after a discarded call executes no "
        "graph at all."
    )
    fix_safety = (
        "When the input is a name or an attribute (`total`, `p.grad`), the fix wraps it in a list, "
        "`xm.all_reduce(op, [total])`, which reduces that very tensor in place, as the statement expects; "
        "every other reference to it sees the reduced value. (Rebinding, `total = xm.all_reduce(op, total)`, "
        "would leave aliases such as the caller's tensor or `self.total` unreduced, and makes a global "
        "name local to the function.) The fix is unsafe: it changes the numbers the program computes on "
        "every multi-process run, and code after the call may have been written around the missing "
        "reduction (a second, correct all_reduce, or a manual `* world_size`). Other inputs (a call) get "
        "no fix: assign the result."
    )
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/core/xla_model.py",
                  "https://github.com/pytorch/xla/pull/3442")
    valid = (
        Example(HEADER + "def evaluate(pred, y):\n    correct = (pred == y).sum()\n"
                "    correct = xm.all_reduce(xm.REDUCE_SUM, correct)\n    return correct\n",
                title="the result is used"),
        Example(HEADER + "def reduce_grads(model):\n    grads = [p.grad for p in model.parameters()]\n"
                "    xm.all_reduce(xm.REDUCE_SUM, grads, scale=0.5)\n",
                title="a list is reduced in place"),
        Example(HEADER + "def sync_metric(metric):\n    xm.all_reduce(xm.REDUCE_SUM, metric)\n",
                title="a parameter: it may hold a list"),
        Example(HEADER + "device = torch_xla.device()\nt = torch.ones(2, device=device)\n"
                "xm.all_reduce(xm.REDUCE_SUM, [t, t * 2])\n",
                title="a list display"),
    )
    invalid = (
        Example(
            HEADER + "device = torch_xla.device()\ncorrect = torch.zeros(1, device=device)\n"
            "xm.all_reduce(xm.REDUCE_SUM, correct)\nprint(correct)\n",
            expect=((7, 1, "xm.all_reduce() result is discarded, so `correct` keeps each replica's value; "
                           "assign it",
                     "xm.all_reduce() of one tensor returns the reduced tensor and leaves its input as it was. "
                     "Assign it (`correct = xm.all_reduce(...)`) or pass a list (`[correct]`) to reduce in "
                     "place."),),
            fixed=HEADER + "device = torch_xla.device()\ncorrect = torch.zeros(1, device=device)\n"
            "xm.all_reduce(xm.REDUCE_SUM, [correct])\nprint(correct)\n",
        ),
        Example(
            HEADER + "def step(model, optimizer):\n    for p in model.parameters():\n"
            "        xm.all_reduce(xm.REDUCE_SUM, inputs=p.grad, scale=0.5)\n    optimizer.step()\n",
            expect=((7, 9, "xm.all_reduce() result is discarded, so `p.grad` keeps each replica's value; "
                           "assign it",
                     "xm.all_reduce() of one tensor returns the reduced tensor and leaves its input as it was. "
                     "Assign it (`p.grad = xm.all_reduce(...)`) or pass a list (`[p.grad]`) to reduce in place."),),
            fixed=HEADER + "def step(model, optimizer):\n    for p in model.parameters():\n"
            "        xm.all_reduce(xm.REDUCE_SUM, inputs=[p.grad], scale=0.5)\n    optimizer.step()\n",
            title="gradients one by one, the keyword form",
        ),
        Example(
            HEADER + "def report(loss):\n    xm.all_reduce('sum', loss.detach())\n",
            expect=((6, 5, "xm.all_reduce() result is discarded, and its input is unchanged; assign it and use "
                           "that",
                     "xm.all_reduce() of one tensor returns the reduced tensor and does not change its input. "
                     "Assign it (`reduced = xm.all_reduce(...)`) and use that."),),
            title="an expression: no fix",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (diagnostic for diagnostic, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        tensors: Optional[TensorFacts] = None
        statements: Optional[set] = None
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or ref.qualname not in ALL_REDUCE:
                continue
            if statements is None:  # calls that are a statement of their own
                statements = {id(node.value) for node in ctx.get(NodeIndex).of(ast.Expr)}
            if id(call) not in statements:
                continue
            if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
                continue
            inputs = argument(call, 1, "inputs")
            if inputs is None:
                continue
            tensors = tensors or ctx.get(TensorFacts)
            if not _one_tensor(ctx, tensors, inputs, 3):
                continue
            spelled = ref.written_prefix(ref.qualname)
            if type(inputs) in (ast.Name, ast.Attribute):
                text = ast.unparse(inputs)
                yield self.diagnostic(
                    ctx, call, f"{spelled}() result is discarded, so `{text}` keeps each replica's value; assign it",
                    help=(f"{spelled}() of one tensor returns the reduced tensor and leaves its input as it was. "
                          f"Assign it (`{text} = {spelled}(...)`) or pass a list (`[{text}]`) to reduce in "
                          "place.")), _list_fix(inputs)
            else:
                yield self.diagnostic(
                    ctx, call, f"{spelled}() result is discarded, and its input is unchanged; assign it and use that",
                    help=(f"{spelled}() of one tensor returns the reduced tensor and does not change its input. "
                          f"Assign it (`reduced = {spelled}(...)`) and use that.")), None


def _one_tensor(ctx: FileContext, tensors: TensorFacts, node: ast.AST, depth: int) -> bool:
    """Whether ``node`` surely holds one tensor, not a list or tuple of them."""
    if type(node) in (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp, ast.Starred):
        return False
    if tensors.kind(node) in TENSORS:
        return True
    if type(node) is ast.Attribute:
        return node.attr == "grad"
    if type(node) is ast.Call:
        func = node.func
        if ctx.get(QualifiedNames).qualname(func) in _TORCH_TENSOR:
            return True
        return type(func) is ast.Attribute and func.attr in _TENSOR_METHODS
    if type(node) is ast.BinOp:
        return depth > 0 and any(_one_tensor(ctx, tensors, side, depth - 1) for side in (node.left, node.right))
    if type(node) is ast.Name and depth > 0:
        value = tensors.assigned_value(node)
        if value is not None:
            return _one_tensor(ctx, tensors, value, depth - 1)
        return _tensor_parameter(ctx, node)
    return False


def _tensor_parameter(ctx: FileContext, name: ast.Name) -> bool:
    """A parameter annotated ``torch.Tensor`` that its function never rebinds."""
    scope = ctx.get(NodeIndex).scope_of(name)
    if type(scope) not in (ast.FunctionDef, ast.AsyncFunctionDef):
        return False
    args = scope.args
    param = next((a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg == name.id), None)
    if param is None or param.annotation is None:
        return False
    annotation = param.annotation
    if ctx.get(QualifiedNames).qualname(annotation) != "torch.Tensor" and dotted(annotation) != "torch.Tensor":
        return False
    return not any(type(n) is ast.Name and n.id == name.id and type(n.ctx) is not ast.Load
                   for n in ctx.get(NodeIndex).below(scope.body, _SCOPES))


def _list_fix(inputs: ast.expr) -> Callable:
    def build(site) -> Fix:
        start, end = site.lines.start(inputs), site.lines.end(inputs)
        text = site.source[start:end]
        return Fix(f"Pass `[{text}]`: reduced in place", (Edit(start, end, f"[{text}]"),), safe=False)
    return build
