"""XLA215 flatten-parameters-with-param-groups."""
import ast
from typing import Iterator, Optional, Tuple

from flake8_xla.rules.examples import EXAMPLE_FSDP
from flake8_xla.analysis.control import Position
from flake8_xla.analysis.wraps import FsdpWraps, Wrap, is_optimizer, parameter_owners
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.syntax import NodeIndex, dotted, is_constant, within_dotted
from flake8_xla.analysis.assignments import Assignments

FSDP1 = "import torch\n" + EXAMPLE_FSDP
GROUPS = ("groups = [\n"
          "    {'params': [p for n, p in model.named_parameters() if 'bias' not in n], 'weight_decay': 0.01},\n"
          "    {'params': [p for n, p in model.named_parameters() if 'bias' in n], 'weight_decay': 0.0},\n"
          "]\n")


class FlattenParametersWithParamGroups(Rule):
    code = "XLA215"
    name = "flatten-parameters-with-param-groups"
    summary = "Optimizer parameter groups over a model wrapped with FSDP(flatten_parameters=True)"
    what_it_does = (
        "Flags an optimizer built, after `model = XlaFullyShardedDataParallel(..., flatten_parameters=True)` "
        "in the same function, from a list of two or more parameter-group dicts that each take "
        "`model.parameters()` / `model.named_parameters()` (directly, or through a name bound to a "
        "list built from them after the wrap)."
    )
    why_bad = (
        "With `flatten_parameters=True` all parameters of the wrapped module become one flat parameter "
        "(`named_parameters()` yields a single `..._flat_param_0`), so \"one cannot apply separate optimizer "
        "groups to different original parameters\" (XlaFullyShardedDataParallel docstring). Name filters "
        "such as `'bias' in n` send the flat parameter to one group and leave the others empty: no error, "
        "but the weight decay meant for weights also hits biases and norms, or the other way round."
    )
    fix_safety = "No automatic fix: dropping `flatten_parameters=True` changes the wrap and its checkpoints."
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py",
    )
    valid = (
        Example(FSDP1 + "\nmodel = FSDP(Net())\n" + GROUPS + "optimizer = torch.optim.AdamW(groups, lr=1e-4)\n",
                title="flatten_parameters=False, the default"),
        Example(FSDP1 + "\nmodel = FSDP(Net(), flatten_parameters=True)\n"
                "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)\n",
                title="flattened, one group"),
        Example(FSDP1 + "\ndef build(model, groups):\n    model = FSDP(model, flatten_parameters=True)\n"
                "    return torch.optim.AdamW(groups)\n", title="groups from elsewhere: unknown, silent"),
    )
    invalid = (
        Example(
            FSDP1 + "\nmodel = FSDP(Net(), flatten_parameters=True)\n" + GROUPS
            + "optimizer = torch.optim.AdamW(groups, lr=1e-4)\n",
            expect=((9, 31, "parameter groups split `model`, which FSDP flattens; keep flatten_parameters=False",
                     "FSDP(flatten_parameters=True) (line 4) merges the parameters of `model` into one flat "
                     "parameter: one group silently gets all of it and the others nothing. Keep "
                     "flatten_parameters=False (the default) to use parameter groups."),),
        ),
        Example(
            FSDP1 + "\ndef build(net):\n    model = FSDP(net, flatten_parameters=True)\n"
            "    decay = [p for n, p in model.named_parameters() if n.endswith('weight')]\n"
            "    rest = [p for n, p in model.named_parameters() if not n.endswith('weight')]\n"
            "    return torch.optim.SGD([{'params': decay, 'weight_decay': 1e-4}, {'params': rest}], lr=0.1)\n",
            expect=((8, 28, "parameter groups split `model`, which FSDP flattens; keep flatten_parameters=False",
                     "FSDP(flatten_parameters=True) (line 5) merges the parameters of `model` into one flat "
                     "parameter: one group silently gets all of it and the others nothing. Keep "
                     "flatten_parameters=False (the default) to use parameter groups."),),
            title="groups built inline from named parameter lists",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps)
        if not any(_flattens(w) for w in wraps.wraps):
            return
        flow, bindings = wraps.flow, ctx.get(Assignments)
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or not is_optimizer(ref.qualname):
                continue
            at = flow.position(call)
            argument = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "params"),
                                                           None)
            if at is None or argument is None:
                continue
            found = _group_list(bindings, argument, at)
            if found is None:
                continue
            groups, built = found
            for wrap in wraps.wraps:
                if _flattens(wrap) and wraps.wrapper_at(wrap.target, call) is wrap and \
                        flow.runs_before(wrap.at, at) and (built is at or flow.runs_before(wrap.at, built)) and \
                        _split_groups(bindings, ctx.get(NodeIndex), groups, wrap, at):
                    yield self.diagnostic(
                        ctx, argument, f"parameter groups split `{wrap.target}`, which FSDP flattens; keep "
                        "flatten_parameters=False",
                        help=(f"FSDP(flatten_parameters=True) (line {wrap.call.lineno}) merges the parameters of "
                              f"`{wrap.target}` into one flat parameter: one group silently gets all of it and the "
                              "others nothing. Keep flatten_parameters=False (the default) to use parameter groups."))
                    break


def _flattens(wrap: Wrap) -> bool:
    return wrap.kind == "v1" and wrap.target is not None and any(
        k.arg == "flatten_parameters" and is_constant(k.value, True) for k in wrap.call.keywords)


def _group_list(bindings: Assignments, argument: ast.AST, at: Position) -> Optional[Tuple[ast.List, Position]]:
    """The list of two or more group dicts the optimizer gets, and where it was built: inline, or
    the surely-run last binding of the name passed."""
    value, built = argument, at
    if type(argument) is not ast.List:
        binding = bindings.last_binding(dotted(argument), at)
        if binding is None:
            return None
        value, built = binding.value, binding.at
    if type(value) is ast.List and sum(type(e) is ast.Dict for e in value.elts) >= 2:
        return value, built
    return None


def _split_groups(bindings: Assignments, index: NodeIndex, groups: ast.List, wrap: Wrap, at: Position) -> bool:
    """Whether two or more group dicts take the wrapper's parameters (directly, or through one
    name bound to a parameter list after the wrap, like ``decay = [p for n, p in ...]``)."""
    taking = 0
    for group in (e for e in groups.elts if type(e) is ast.Dict):
        owners = set(parameter_owners(group))
        for node in index.below([group]):
            binding = bindings.last_binding(node.id, at) if type(node) is ast.Name else None
            if binding is not None and bindings.flow.runs_before(wrap.at, binding.at):
                owners.update(parameter_owners(binding.value))
        taking += any(within_dotted(o, wrap.target) for o in owners)
    return taking >= 2
