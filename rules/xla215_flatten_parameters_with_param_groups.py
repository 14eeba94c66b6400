"""XLA215 flatten-parameters-with-param-groups."""
import ast
from typing import Iterator, Optional, Set, Tuple

# _is_optimizer: flow's own test of what counts as an optimizer class (see the report on flow.py)
from flake8_xla.flow import Binding, FlowFacts, Position, Wrap, _is_optimizer, dotted
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.rules.xla211_fsdp_wrap_order import RunOrder

FSDP1 = "import torch\nfrom torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
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
            expect=((9, 31, "optimizer parameter groups split the parameters of `model`, which "
                            "FSDP(flatten_parameters=True) (line 4) merges into one flat parameter: one "
                            "group silently gets all of it and the others nothing; keep flatten_parameters=False "
                            "(the default) to use parameter groups"),),
        ),
        Example(
            FSDP1 + "\ndef build(net):\n    model = FSDP(net, flatten_parameters=True)\n"
            "    decay = [p for n, p in model.named_parameters() if n.endswith('weight')]\n"
            "    rest = [p for n, p in model.named_parameters() if not n.endswith('weight')]\n"
            "    return torch.optim.SGD([{'params': decay, 'weight_decay': 1e-4}, {'params': rest}], lr=0.1)\n",
            expect=((8, 28, "optimizer parameter groups split the parameters of `model`, which "
                            "FSDP(flatten_parameters=True) (line 5) merges into one flat parameter: one "
                            "group silently gets all of it and the others nothing; keep flatten_parameters=False "
                            "(the default) to use parameter groups"),),
            title="groups built inline from named parameter lists",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        flow = ctx.flow
        if not any(_flattens(w) for w in flow.wraps):
            return
        order = RunOrder()
        for ref in ctx.model.references:
            call = ref.call
            if call is None or not _is_optimizer(ref.qualname):
                continue
            at = flow.position(call)
            argument = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "params"),
                                                           None)
            if at is None or argument is None:
                continue
            found = _group_list(flow, order, argument, at)
            if found is None:
                continue
            groups, built = found
            for wrap in flow.wraps:
                if _flattens(wrap) and flow.wrapper_at(wrap.target, call) is wrap and \
                        order.runs_before(wrap.at, at) and (built is at or order.runs_before(wrap.at, built)) and \
                        _split_groups(flow, order, groups, wrap, at):
                    yield self.diagnostic(ctx, argument, (
                        f"optimizer parameter groups split the parameters of `{wrap.target}`, which "
                        f"FSDP(flatten_parameters=True) (line {wrap.call.lineno}) merges into one flat parameter: "
                        "one group silently gets all of it and the others nothing; keep flatten_parameters=False "
                        "(the default) to use parameter groups"))
                    break


def _flattens(wrap: Wrap) -> bool:
    return wrap.kind == "v1" and wrap.target is not None and any(
        k.arg == "flatten_parameters" and type(k.value) is ast.Constant and k.value.value is True
        for k in wrap.call.keywords)


def _group_list(flow: FlowFacts, order: RunOrder, argument: ast.AST, at: Position) \
        -> Optional[Tuple[ast.List, Position]]:
    """The list of two or more group dicts the optimizer gets, and where it was built: inline, or
    the surely-run last binding of the name passed."""
    value, built = argument, at
    if type(argument) is not ast.List:
        binding = _last_binding(flow, order, dotted(argument), at)
        if binding is None:
            return None
        value, built = binding.value, binding.at
    if type(value) is ast.List and sum(type(e) is ast.Dict for e in value.elts) >= 2:
        return value, built
    return None


def _last_binding(flow: FlowFacts, order: RunOrder, name: Optional[str], at: Position) -> Optional[Binding]:
    """``name``'s last binding before ``at`` in its scope, if it surely runs."""
    last = None
    for binding in flow.bindings:
        if binding.name == name and binding.at.scope is at.scope and binding.at.order < at.order:
            last = binding
    return last if last is not None and order.runs_before(last.at, at) else None


def _split_groups(flow: FlowFacts, order: RunOrder, groups: ast.List, wrap: Wrap, at: Position) -> bool:
    """Whether two or more group dicts take the wrapper's parameters (directly, or through one
    name bound to a parameter list after the wrap, like ``decay = [p for n, p in ...]``)."""
    taking = 0
    for group in (e for e in groups.elts if type(e) is ast.Dict):
        owners = _owners(group)
        for node in ast.walk(group):
            binding = _last_binding(flow, order, node.id, at) if type(node) is ast.Name else None
            if binding is not None and order.runs_before(wrap.at, binding.at):
                owners |= _owners(binding.value)
        taking += any(o == wrap.target or o.startswith(wrap.target + ".") for o in owners)
    return taking >= 2


def _owners(node: ast.AST) -> Set[str]:
    """Dotted names whose ``parameters()`` / ``named_parameters()`` appear in ``node``."""
    out = set()
    for sub in ast.walk(node):
        if type(sub) is ast.Call and type(sub.func) is ast.Attribute and \
                sub.func.attr in ("parameters", "named_parameters"):
            name = dotted(sub.func.value)
            if name:
                out.add(name)
    return out
