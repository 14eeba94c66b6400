"""XLA211 fsdp-wrap-order."""
import ast
from typing import Dict, Iterator, Optional, Tuple

from flake8_xla.rules.examples import EXAMPLE_FSDP as FSDP1
from flake8_xla.analysis.control import FlowFacts
from flake8_xla.analysis.wraps import FsdpWraps, Wrap
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.syntax import NodeIndex, prefixes
from flake8_xla.analysis.assignments import Assignments

POLICY = "from torch_xla.distributed.fsdp.wrap import always_wrap_policy\n"
ALREADY_WRAPPED = "RuntimeError 'Cannot wrap a module that is already wrapped with FSDP'"


class FsdpWrapOrder(Rule):
    code = "XLA211"
    name = "fsdp-wrap-order"
    summary = "Nested FSDP wrapping done in the wrong order, twice, or mixed with auto-wrapping"
    what_it_does = (
        "Flags, within one function: wrapping a submodule (`m.layer = FSDP(m.layer)`) after its parent "
        "`m` was already wrapped; wrapping a module that is already an FSDP wrapper (`FSDP(FSDP(x))`, or "
        "`FSDP(x)` where `x` is bound to a wrapper); and `auto_wrap_policy=` on a wrap whose module "
        "already contains a manually wrapped submodule. Applies to `XlaFullyShardedDataParallel` and "
        "FSDPv2 (`SpmdFullyShardedDataParallel`), each with its own kind."
    )
    why_bad = (
        "Wrapping a wrapper raises `RuntimeError: Cannot wrap a module that is already wrapped with FSDP. "
        "For nested FSDP, first wrap the inner child modules before wrapping the outer parent module.` "
        "Wrapping a child after its parent does not raise, but the parent already sharded the child's "
        "parameters, so the late wrap shards nothing; assigned through the parent wrapper "
        "(`m = FSDP(m)` then `m.layer = FSDP(m.layer)`) it is even registered on the wrapper instead of the "
        "model, so the forward pass never calls it. Either way the intended nested unit silently does not "
        "exist. Manual inner wraps under `auto_wrap_policy` raise `ValueError: Expected <name> to NOT "
        "be FullyShardedDataParallel if using an `auto_wrap_policy``."
    )
    fix_safety = "No automatic fix: reordering the wraps moves code that other statements may depend on."
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py",
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/experimental/spmd_fully_sharded_data_parallel.py",
        "https://github.com/pytorch/xla/blob/v2.9.0/test/test_train_mp_mnist_fsdp_with_ckpt.py",
    )
    valid = (
        Example(FSDP1 + "\nmodel = Net()\nmodel.layer = FSDP(model.layer)\nmodel = FSDP(model)\n",
                title="inner modules first, then the parent (the reference order)"),
        Example(FSDP1 + POLICY + "\nmodel = FSDP(Net(), auto_wrap_policy=always_wrap_policy)\n",
                title="auto-wrapping alone"),
        Example(FSDP1 + "\ndef build(use_fsdp):\n    model = Net()\n    if use_fsdp:\n"
                "        model = FSDP(model)\n    else:\n        model = FSDP(model, flatten_parameters=True)\n"
                "    return model\n", title="alternative wraps in separate branches"),
        Example(FSDP1 + "\ndef build(model, shard_layer):\n    model = FSDP(model)\n    if shard_layer:\n"
                "        model = Net()\n    model.layer = FSDP(model.layer)\n",
                title="the parent may have been rebound: unknown, silent"),
    )
    invalid = (
        Example(
            FSDP1 + "\nmodel = Net()\nmodel = FSDP(model)\nmodel.layer = FSDP(model.layer)\n",
            expect=((5, 15, "`model.layer` is wrapped with FSDP after its parent `model`; wrap inner modules "
                            "first",
                     "The parent wrap (line 4) already sharded its parameters, so this wrap shards nothing and "
                     "is no nested FSDP unit. Wrap inner modules first, then the parent."),),
        ),
        Example(
            FSDP1 + "\nmodel = FSDP(FSDP(Net()))\n",
            expect=((3, 9, "FSDP wraps a module that is already an FSDP wrapper; wrap it once",
                     "It raises RuntimeError 'Cannot wrap a module that is already wrapped with FSDP'. Wrap "
                     "each module once, inner modules first, then the parent."),),
            title="a wrapper wrapped again",
        ),
        Example(
            FSDP1 + "\ndef build(net):\n    model = FSDP(net)\n    return FSDP(model)\n",
            expect=((5, 12, "FSDP wraps `model`, already an FSDP wrapper; wrap it once",
                     "`model` is wrapped at line 4, so this raises RuntimeError 'Cannot wrap a module that is "
                     "already wrapped with FSDP'. Wrap each module once, inner modules first, then the parent."),),
            title="through a name",
        ),
        Example(
            FSDP1 + POLICY + "\nblock = FSDP(Block())\n"
            "model = FSDP(Net(block), auto_wrap_policy=always_wrap_policy)\n",
            expect=((5, 26, "auto_wrap_policy= over a module holding an FSDP wrapper; use the policy or manual "
                            "wraps",
                     "The module contains `block`, already wrapped with FSDP (line 4), so it raises ValueError "
                     "'Expected <name> to NOT be FullyShardedDataParallel if using an `auto_wrap_policy`'. Use "
                     "auto_wrap_policy alone, or manual inner wraps without it."),),
            title="a manual inner wrap under auto-wrapping",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps)
        if not wraps.wraps:
            return
        by_call = {id(w.call): w for w in wraps.wraps}
        for wrap in wraps.wraps:
            found = (_double_wrap(wraps, wrap, by_call) or _late_inner_wrap(ctx, wrap)
                     or _manual_under_auto_wrap(wraps, ctx.get(NodeIndex), wrap, by_call))
            if found:
                node, message, help = found
                yield self.diagnostic(ctx, node, message, help=help)


Finding = Optional[Tuple[ast.AST, str, str]]  # node, message, help


def _double_wrap(wraps: FsdpWraps, wrap: Wrap, by_call: Dict[int, Wrap]) -> Finding:
    tail = "Wrap each module once, inner modules first, then the parent."
    inner = by_call.get(id(wrap.inner))
    if inner is not None and inner.kind == wrap.kind:
        return (wrap.call, f"{wrap.label} wraps a module that is already an {wrap.label} wrapper; wrap it once",
                f"It raises {ALREADY_WRAPPED}. {tail}")
    earlier = wraps.wrapped_names(wrap.at.scope, wrap.at.order).get(wrap.wrapped or "")
    if earlier is not None and earlier.kind == wrap.kind and wraps.flow.runs_before(earlier.at, wrap.at):
        return (wrap.call, f"{wrap.label} wraps `{wrap.wrapped}`, already an {wrap.label} wrapper; wrap it once",
                f"`{wrap.wrapped}` is wrapped at line {earlier.call.lineno}, so this raises {ALREADY_WRAPPED}. "
                f"{tail}")
    return None


def _late_inner_wrap(ctx: FileContext, wrap: Wrap) -> Finding:
    """``m.layer = FSDP(m.layer)`` after ``m = FSDP(m)`` (or after ``w = FSDP(m)``)."""
    if not wrap.wrapped or "." not in wrap.wrapped:
        return None
    flow, bindings = ctx.get(FlowFacts), ctx.get(Assignments)
    scope = wrap.at.scope
    for parent in prefixes(wrap.wrapped):
        for outer in ctx.get(FsdpWraps).wraps:
            if outer.kind == wrap.kind and parent in (outer.target, outer.wrapped) and \
                    flow.runs_before(outer.at, wrap.at) and \
                    not bindings.rebound_between(parent, scope, outer.at.order, wrap.at.order):
                return (wrap.call, f"`{wrap.wrapped}` is wrapped with {wrap.label} after its parent `{parent}`; "
                        "wrap inner modules first",
                        f"The parent wrap (line {outer.call.lineno}) already sharded its parameters, so this wrap "
                        "shards nothing and is no nested FSDP unit. Wrap inner modules first, then the parent.")
    return None


def _manual_under_auto_wrap(wraps: FsdpWraps, index: NodeIndex, wrap: Wrap, by_call: Dict[int, Wrap]) -> Finding:
    policy = next((k for k in wrap.call.keywords if k.arg == "auto_wrap_policy"), None)
    if policy is None or (type(policy.value) is ast.Constant and policy.value.value is None) or wrap.inner is None:
        return None
    name = "FullyShardedDataParallel" if wrap.kind == "v1" else "SpmdFullyShardedDataParallel"
    message = f"auto_wrap_policy= over a module holding an {wrap.label} wrapper; use the policy or manual wraps"
    raises = f"ValueError 'Expected <name> to NOT be {name} if using an `auto_wrap_policy`'"
    instead = "Use auto_wrap_policy alone, or manual inner wraps without it."
    if any(id(node) in by_call and by_call[id(node)].kind == wrap.kind for node in index.below([wrap.inner])):
        return policy, message, f"It raises {raises}. {instead}"
    for inner in wraps.wraps:
        if inner.kind == wrap.kind and wraps.nested_in(inner, wrap):
            return policy, message, (f"The module contains `{inner.target}`, already wrapped with {wrap.label} "
                                     f"(line {inner.call.lineno}), so it raises {raises}. {instead}")
    return None
