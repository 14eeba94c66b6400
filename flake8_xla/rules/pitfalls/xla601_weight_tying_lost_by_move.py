"""XLA601 weight-tying-lost-by-move."""
import ast
import re
from typing import Dict, Iterator, List, Optional, Set

from flake8_xla.analysis.control import FlowFacts, Position
from flake8_xla.analysis.off_xla import OffXla
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.syntax import NodeIndex, dotted, within_dotted
from flake8_xla.analysis.device_values import DeviceValues
from flake8_xla.analysis.ties import Tie, tie_of
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.assignments import Assignments

# a call that (re)ties or restores shared parameters: ``model.tie_weights()``, ``retie(model)``,
# ``_set_shared_params(...)``, ``with preserve_shared_weights(model):``
_RETIE = re.compile(r"(?i)tie|shar")
# methods of a module class that take over moving it (and may tie again): silence
_MOVE_HOOKS = frozenset({"_apply", "to", "on_post_move_to_device"})
_SWAP = frozenset({"torch.__future__.set_swap_module_params_on_conversion"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
HEADER = "import torch.nn as nn\nimport torch_xla\n\n"
_NET = ("class LM(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.embed = nn.Embedding(100, 16)\n        self.head = nn.Linear(16, 100, bias=False)\n")


class WeightTyingLostByMove(Rule):
    code = "XLA601"
    name = "weight-tying-lost-by-move"
    summary = "Weights tied on the CPU, then the module moved to the XLA device without tying them again"
    since = "0.2.0"
    what_it_does = (
        "Flags `.to(device)` (and `.to_empty(device=...)`) of a module to the XLA device (`torch_xla.device()`, "
        "`xm.xla_device()`, `'xla'`, or a name given one of them) when the module's parameters were tied "
        "before the move and are not tied again after it in the same function. A tie is an assignment of "
        "one module's `weight`/`bias` to another's (`model.lm_head.weight = model.embed.weight`) or a "
        "`tie_weights()` call, either in the same function before the move, or in the `__init__` of a "
        "module class of the file that the moved module is built from (`model = LM().to(device)`, "
        "`model = LM()` ... `model.to(device)`). Tying again after the move is an assignment or a "
        "`tie_weights()` call on the moved module, or any call whose name says tie or shared "
        "(`retie(model)`, `with preserve_shared_weights(model):` around the move). Not reported: a class "
        "that overrides `_apply` or `to` (or has Lightning's `on_post_move_to_device`), a file that "
        "calls `torch.__future__.set_swap_module_params_on_conversion(True)`, moves to a device the rule "
        "cannot tell is XLA (a parameter), and models built elsewhere (`from_pretrained`): whether they tie "
        "is not in the file."
    )
    why_bad = (
        "`Module.to()` converts each module's parameters one by one. For a CPU parameter moved to XLA the "
        "converted tensor cannot take the parameter's place in memory (torch/nn/modules/module.py "
        "`_apply`: `_has_compatible_shallow_copy_type` is false), so every module that holds the shared "
        "Parameter gets a new Parameter of its own: after the move the two layers hold two separate "
        "tensors. Training then updates them apart, `model.parameters()` counts one more, the optimizer "
        "built afterwards trains both, and a checkpoint saves two weights where the model expects one. "
        "Measured on torch_xla 2.9, CPU (torch 2.9): an `Embedding` and a `Linear` sharing one weight had "
        "1 parameter and one `data_ptr` before `.to(torch_xla.device())`, 2 parameters and `head.weight is "
        "embed.weight == False` after; an in-place update of one and an SGD step left the two different. "
        "The same happened with `.to('xla')`, `.to_empty(device=...)`, a tie made through `.data`, and "
        "with `torch.__future__.set_overwrite_module_params_on_conversion(True)`; a tie made after the move "
        "stayed (1 parameter), as did a later `.to(torch.bfloat16)` on the device, a whole shared "
        "submodule, and any move under `torch.__future__.set_swap_module_params_on_conversion(True)`. "
        "torch_xla's troubleshooting guide: tie the weights after moving the modules to the XLA device "
        "(pytorch/xla#2719, #7042; transformers#13030; Lightning#2705, #5441)."
    )
    fix_safety = ("No automatic fix: the tie has to be repeated on the moved module (`model.tie_weights()`, or "
                  "the assignment again), which the rule does not write for you.")
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/learn/troubleshoot.md",
                  "https://github.com/pytorch/xla/issues/2719",
                  "https://github.com/pytorch/xla/issues/7042")
    valid = (
        Example(HEADER + _NET + "\n    def tie(self):\n        self.head.weight = self.embed.weight\n\n\n"
                "model = LM().to(torch_xla.device())\nmodel.tie()\n",
                title="tied after the move"),
        Example(HEADER + _NET + "        self.head.weight = self.embed.weight\n\n\n"
                "model = LM()\nmodel.to(torch_xla.device())\nmodel.head.weight = model.embed.weight\n",
                title="tied in __init__ and again after the move"),
        Example(HEADER + "from transformers import AutoModelForMaskedLM\n\n"
                "model = AutoModelForMaskedLM.from_pretrained('bert-base-uncased')\n"
                "model.to(torch_xla.device())\nmodel.tie_weights()\n",
                title="a pretrained model tied again after the move"),
        Example(HEADER + _NET + "        self.head.weight = self.embed.weight\n\n\n"
                "def build(device):\n    return LM().to(device)\n",
                title="a device the rule cannot tell is XLA"),
        Example("import torch\nimport torch.nn as nn\nimport torch_xla\n\n"
                "torch.__future__.set_swap_module_params_on_conversion(True)\n\n\n" + _NET +
                "        self.head.weight = self.embed.weight\n\n\nmodel = LM().to(torch_xla.device())\n",
                title="parameters swapped in place on conversion"),
    )
    invalid = (
        Example(
            HEADER + _NET + "        self.head.weight = self.embed.weight\n\n\n"
            "model = LM().to(torch_xla.device())\n",
            expect=((12, 9, "LM().to(...) unties `self.head.weight = self.embed.weight`; tie them again after "
                            "the move",
                     "It moves the parameters tied at line 9 to the XLA device as separate tensors: the tie is "
                     "lost and each copy trains on its own."),),
        ),
        Example(
            HEADER + "import torch_xla.core.xla_model as xm\n\n\n"
            "def main(model):\n    device = xm.xla_device()\n    model.tie_weights()\n    model = model.to(device)\n"
            "    optimizer = make_optimizer(model.parameters())\n",
            target="2.7",
            expect=((10, 13, "model.to(...) unties `model.tie_weights()`; call model.tie_weights() again after "
                             "the move",
                     "It moves the parameters tied at line 9 to the XLA device as separate tensors: the tie is "
                     "lost and each copy trains on its own."),),
            title="tie_weights() before the move",
        ),
        Example(
            HEADER + "\ndef run(model):\n    model.decoder.weight = model.encoder.weight\n"
            "    model.to('xla')\n",
            expect=((7, 5, "model.to(...) unties `model.decoder.weight = model.encoder.weight`; tie them again "
                           "after the move",
                     "It moves the parameters tied at line 6 to the XLA device as separate tensors: the tie is "
                     "lost and each copy trains on its own."),),
            title="an assignment in the same function, the device by name",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        refs = ctx.get(SemanticModel).references
        if any(r.qualname in _SWAP for r in refs):
            return
        index = ctx.get(NodeIndex)
        moves = [c for c in index.of(ast.Call) if _is_move(c, ctx)]
        if not moves:
            return
        flow = ctx.get(FlowFacts)
        classes = _tying_classes(index)
        never = ctx.get(OffXla).nodes
        for call in moves:
            if id(call) in never:
                continue
            at = flow.position(call)
            if at is None:
                continue
            tie = self._tie_before(ctx, flow, classes, call, at)
            if tie is None or _tied_again(ctx, flow, call, at, tie):
                continue
            receiver = ast.unparse(call.func.value)
            moved = _assigned_to(at.statement, call) or dotted(call.func.value)
            again = f"call {moved}.tie_weights() again after the move" if tie.tie_weights and moved else \
                "tie them again after the move"
            yield self.diagnostic(
                ctx, call, f"{receiver}.{call.func.attr}(...) unties `{tie.text}`; {again}",
                help=(f"It moves the parameters tied at line {tie.node.lineno} to the XLA device as separate tensors: "
                      "the tie is lost and each copy trains on its own."))

    @staticmethod
    def _tie_before(ctx: FileContext, flow: FlowFacts, classes: Dict[str, Tie], call: ast.Call,
                    at: Position) -> Optional[Tie]:
        receiver = call.func.value
        built = _built_from(receiver, ctx.get(Assignments), at)
        if built in classes:
            return classes[built]
        name = dotted(receiver)
        if name is None:
            return None
        for stmt in reversed([p.statement for p in _earlier_statements(flow, at)]):
            tie = tie_of(stmt)
            if tie is not None and tie.of(name):
                return tie
            if _rebinds(stmt, name):
                return None  # ``model = Other()``: what was tied before is not what moves
        return None


def _is_move(call: ast.Call, ctx: FileContext) -> bool:
    """``m.to(<XLA device>)`` / ``m.to(device=<XLA device>)`` / ``m.to_empty(device=<XLA device>)``."""
    func = call.func
    if type(func) is not ast.Attribute or func.attr not in ("to", "to_empty"):
        return False
    device = next((k.value for k in call.keywords if k.arg == "device"), None)
    if device is None and func.attr == "to" and call.args:
        device = call.args[0]
    return device is not None and ctx.get(DeviceValues).xla_device_value(device) is not None


def _tying_classes(index: NodeIndex) -> Dict[str, Tie]:
    """Module classes of the file whose construction ties parameters: a tie on ``self`` in ``__init__``
    (or in a method of the class that ``__init__`` calls on ``self``), or inherited from a class of the
    file through ``super().__init__()``. Classes that override ``_apply``/``to`` take over moving."""
    classes = {node.name: node for node in index.of(ast.ClassDef)}
    out: Dict[str, Tie] = {}
    for name, node in classes.items():
        methods = {s.name: s for s in node.body if type(s) in _DEFS}
        if _MOVE_HOOKS & set(methods):
            continue
        init = methods.get("__init__")
        if init is None:
            continue
        tie = _self_tie(index, init)
        if tie is None:
            for sub in index.below(init.body, _DEFS + (ast.ClassDef, ast.Lambda)):
                if type(sub) is ast.Call and type(sub.func) is ast.Attribute and dotted(sub.func.value) == "self" \
                        and sub.func.attr in methods and sub.func.attr != "__init__":
                    tie = _self_tie(index, methods[sub.func.attr])
                    if tie is not None:
                        break
        if tie is not None:
            out[name] = tie
    changed = True
    while changed:  # subclasses in the file that run their base's __init__
        changed = False
        for name, node in classes.items():
            if name in out:
                continue
            methods = {s.name: s for s in node.body if type(s) in _DEFS}
            if _MOVE_HOOKS & set(methods):
                continue
            base = next((b.id for b in node.bases if type(b) is ast.Name and b.id in out), None)
            init = methods.get("__init__")
            if base is not None and (init is None or _calls_super_init(index, init)):
                out[name] = out[base]
                changed = True
    return out


def _self_tie(index: NodeIndex, fn: ast.AST) -> Optional[Tie]:
    for stmt in index.below(fn.body, _DEFS + (ast.ClassDef, ast.Lambda)):
        if isinstance(stmt, ast.stmt):
            tie = tie_of(stmt)
            if tie is not None and tie.of("self"):
                return tie
    return None


def _calls_super_init(index: NodeIndex, fn: ast.AST) -> bool:
    return any(type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "__init__" and
               type(n.func.value) is ast.Call and type(n.func.value.func) is ast.Name and
               n.func.value.func.id == "super" for n in index.below(fn.body))


def _built_from(receiver: ast.AST, bindings: Assignments, at: Position) -> Optional[str]:
    """The class of the file a module was built from: ``LM(...)`` itself, or the value the name was
    last given before the move in the same function (``model = LM()``)."""
    value: Optional[ast.AST] = receiver
    if type(receiver) is not ast.Call:
        name = dotted(receiver)
        binding = bindings.last_binding(name, at) if name else None
        value = binding.value if binding is not None else None
        while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in ("to", "train"):
            value = value.func.value  # ``model = LM().to(torch.bfloat16)``
    if type(value) is ast.Call and type(value.func) is ast.Name:
        return value.func.id
    return None


def _earlier_statements(flow: FlowFacts, at: Position) -> List[Position]:
    """Positions of the statements of the move's scope that surely run before it, in order."""
    return [where for where in flow.statements_in(at.scope) if flow.runs_before(where, at)]


def _rebinds(stmt: ast.stmt, name: str) -> bool:
    if type(stmt) is ast.Assign:
        return any(dotted(t) == name for t in stmt.targets) and not _is_move_of(stmt.value, name)
    return False


def _is_move_of(value: ast.AST, name: str) -> bool:
    return type(value) is ast.Call and type(value.func) is ast.Attribute and dotted(value.func.value) == name


def _tied_again(ctx: FileContext, flow: FlowFacts, call: ast.Call, at: Position, tie: Tie) -> bool:
    """Whether the move's function ties again after it (or the move sits in a ``with`` that restores
    shared parameters)."""
    names: Set[str] = {n for n in (dotted(call.func.value), _assigned_to(at.statement, call)) if n}
    for where in flow.statements_in(at.scope):  # its statements, inner blocks included, nested defs not
        node = where.statement
        if type(node) in (ast.With, ast.AsyncWith) and node.lineno <= call.lineno <= node.end_lineno:
            if any(_names_retie(item.context_expr, names) for item in node.items):
                return True
        if where.order <= at.order:
            continue
        again = tie_of(node)
        if again is not None and any(again.of(n) for n in names):
            return True
        if type(node) is ast.Expr and type(node.value) is ast.Call and _names_retie(node.value, names):
            return True
    return False


def _names_retie(expr: ast.AST, names: Set[str]) -> bool:
    """A call named for tying or sharing that is about one of ``names``: a method of it
    (``model.tie()``, ``model.module.tie_weights()``) or given it (``retie(model)``)."""
    if type(expr) is not ast.Call:
        return False
    func = expr.func
    name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
    if not _RETIE.search(name):
        return False
    about = [dotted(func.value)] if type(func) is ast.Attribute else []
    about += [dotted(a) for a in expr.args] + [dotted(k.value) for k in expr.keywords]
    return any(within_dotted(a, n) for a in about if a for n in names)


def _assigned_to(stmt: ast.stmt, call: ast.Call) -> Optional[str]:
    if type(stmt) is ast.Assign and stmt.value is call and len(stmt.targets) == 1:
        return dotted(stmt.targets[0])
    return None
