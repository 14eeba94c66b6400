"""XLA204 fsdp-root-only-method."""
import ast
from typing import Dict, Iterator, List, Optional

from flake8_xla.rules.examples import EXAMPLE_FSDP as FSDP1
from flake8_xla.analysis.control import FlowFacts, Position
from flake8_xla.analysis.wraps import FsdpWraps, Wrap
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.syntax import NodeIndex, dotted, prefixes
from flake8_xla.analysis.assignments import Assignments

ROOT_ONLY = ("clip_grad_norm_", "no_sync")


class FsdpRootOnlyMethod(Rule):
    code = "XLA204"
    name = "fsdp-root-only-method"
    summary = "clip_grad_norm_() or no_sync() called on an inner (nested) FSDP wrapper"
    what_it_does = (
        "Flags `x.clip_grad_norm_(...)` and `x.no_sync()` when `x` is bound to an "
        "`XlaFullyShardedDataParallel` wrapper that, earlier in the same function, was nested into "
        "another FSDP wrap: assigned onto the parent (`model.layer = FSDP(model.layer)` then "
        "`model = FSDP(model)`), passed to its constructor (`FSDP(Net(inner))`), or stored on it."
    )
    why_bad = (
        "Both methods work on the whole sharded model and assert that they run on the root instance: "
        "`clip_grad_norm should only be called on the root (parent) instance` and `no_sync on inner "
        "FSDP is not supported`. An inner wrapper only sees its own shard of the parameters. Before the "
        "first forward pass `no_sync()` on an inner wrapper even passes, but marks it as a root, and the "
        "real root's first forward then fails its assertion."
    )
    fix_safety = "No automatic fix: the call has to move to the outermost wrapper, which may have another name."
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py",
    )
    valid = (
        Example(FSDP1 + "\nmodel = Net()\nmodel.layer = FSDP(model.layer)\nmodel = FSDP(model)\n"
                "model(x).sum().backward()\nmodel.clip_grad_norm_(1.0)\n",
                title="called on the root wrapper"),
        Example(FSDP1 + "\ninner = FSDP(Block())\nwith inner.no_sync():\n    inner(x).sum().backward()\n",
                title="a wrapper nobody nests is its own root"),
        Example(FSDP1 + "\ndef train(model, block):\n    block = FSDP(block)\n    model = FSDP(model)\n"
                "    block.clip_grad_norm_(1.0)\n",
                title="not known to be nested: silent"),
    )
    invalid = (
        Example(
            FSDP1 + "\ninner = FSDP(Block())\nmodel = FSDP(Net(inner))\nmodel(x).sum().backward()\n"
            "inner.clip_grad_norm_(1.0)\n",
            expect=((6, 1, "clip_grad_norm_() on `inner`, a nested FSDP wrapper, fails; call "
                           "model.clip_grad_norm_()",
                     "`inner` is nested inside `model` (line 4), and FSDP asserts that only the root "
                     "(outermost) instance calls clip_grad_norm_()."),),
        ),
        Example(
            FSDP1 + "\ndef train(model, batches):\n    model.layer = FSDP(model.layer)\n    model = FSDP(model)\n"
            "    with model.layer.no_sync():\n        model(batches[0]).sum().backward()\n",
            expect=((6, 10, "no_sync() on `model.layer`, a nested FSDP wrapper, fails; call model.no_sync()",
                     "`model.layer` is nested inside `model` (line 5), and FSDP asserts that only the root "
                     "(outermost) instance calls no_sync()."),),
            title="an attribute wrapped in place before its parent",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps)
        outer_of = wraps.outer_wraps("v1")  # id(inner wrap call) -> the wrap it is nested into
        if not outer_of:
            return
        inner_by_name: Dict[str, List[Wrap]] = {}
        for inner in wraps.wraps:
            if id(inner.call) in outer_of:
                inner_by_name.setdefault(inner.target, []).append(inner)
        for node in ctx.get(NodeIndex).of(ast.Call):
            if type(node.func) is not ast.Attribute or node.func.attr not in ROOT_ONLY:
                continue
            name = dotted(node.func.value)
            at = wraps.flow.position(node) if name in inner_by_name else None
            if at is None:
                continue
            found = _nested_wrapper(ctx, inner_by_name[name], outer_of, at)
            if found is not None:
                root = _root(outer_of, found)
                where = f"`{root.target}`" if root.target else "another FSDP wrap"
                fix = f"call {root.target}.{node.func.attr}()" if root.target else "call it on the outermost wrapper"
                yield self.diagnostic(
                    ctx, node, f"{node.func.attr}() on `{name}`, a nested FSDP wrapper, fails; {fix}",
                    help=(f"`{name}` is nested inside {where} (line {root.call.lineno}), and FSDP asserts that only "
                          f"the root (outermost) instance calls {node.func.attr}()."))


def _nested_wrapper(ctx: FileContext, inners: List[Wrap], outer_of: Dict[int, Wrap], at: Position) -> Optional[Wrap]:
    """The inner wrap the name still holds at ``at``, once its parent wrap has surely run."""
    for inner in inners:
        outer = outer_of[id(inner.call)]
        if ctx.get(FlowFacts).runs_before(outer.at, at) and _still_bound(ctx, inner, at):
            return inner
    return None


def _still_bound(ctx: FileContext, inner: Wrap, at: Position) -> bool:
    """``model.layer`` keeps reaching the inner wrapper while ``model`` is only rebound to a
    wrapper of itself (FSDP forwards attribute access to the module it wraps)."""
    scope, start, end = at.scope, inner.at.order, at.order
    bindings, wraps = ctx.get(Assignments), ctx.get(FsdpWraps).wraps
    if bindings.rebound_between(inner.target, scope, start, end):
        return False
    for prefix in prefixes(inner.target):
        if any(not _wraps_itself(wraps, binding.value, prefix)
               for binding in bindings.bindings_between(prefix, scope, start, end)):
            return False
    return True


def _wraps_itself(wraps: List[Wrap], value: ast.AST, name: str) -> bool:
    return any(w.call is value and w.wrapped == name for w in wraps)


def _root(outer_of: Dict[int, Wrap], inner: Wrap) -> Wrap:
    """The outermost wrap above ``inner`` (each parent comes later in the scope, so this ends)."""
    outer = outer_of[id(inner.call)]
    while id(outer.call) in outer_of:
        outer = outer_of[id(outer.call)]
    return outer
