"""XLA210 native-auto-wrap-policy."""
import ast
from typing import Iterator, Optional

from flake8_xla.rules.examples import EXAMPLE_FSDP
from flake8_xla.analysis.syntax import PARTIAL, dotted
from flake8_xla.analysis.control import FlowFacts
from flake8_xla.analysis.semantic import QualifiedNames
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.wraps import FsdpWraps
from flake8_xla.analysis.assignments import Assignments

HEADER = "import functools\n" + EXAMPLE_FSDP
NATIVE_POLICIES = "torch.distributed.fsdp.wrap."


class NativeAutoWrapPolicy(Rule):
    code = "XLA210"
    name = "native-auto-wrap-policy"
    summary = "A torch.distributed.fsdp.wrap auto-wrap policy given to torch_xla's FSDP"
    what_it_does = (
        "Flags `auto_wrap_policy=` arguments of `XlaFullyShardedDataParallel` and FSDPv2 whose policy "
        "comes from `torch.distributed.fsdp.wrap` (directly, through `functools.partial`, or through a "
        "name bound to either in the same function)."
    )
    why_bad = (
        "torch_xla's `recursive_wrap` calls the policy as `policy(module=, recurse=, unwrapped_params=)`; "
        "PyTorch's policies take `nonwrapped_numel`, so wrapping fails with `TypeError: ... got an "
        "unexpected keyword argument 'unwrapped_params'`. torch_xla ships its own policies with the same "
        "names in `torch_xla.distributed.fsdp.wrap`."
    )
    fix_safety = "No automatic fix yet (the import must change too)."
    valid = (
        Example(HEADER + "from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy\n\n"
                "policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})\n"
                "model = FSDP(Net(), auto_wrap_policy=policy)\n", title="torch_xla's policy"),
    )
    invalid = (
        Example(
            HEADER + "from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy\n\n"
            "policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})\n"
            "model = FSDP(Net(), auto_wrap_policy=policy)\n",
            expect=((6, 21, "PyTorch's transformer_auto_wrap_policy fails in torch_xla's FSDP; use torch_xla's "
                            "own",
                     "auto_wrap_policy comes from torch.distributed.fsdp.wrap.transformer_auto_wrap_policy, "
                     "which torch_xla's FSDP calls with the wrong arguments (TypeError: unexpected keyword "
                     "argument 'unwrapped_params'). Use "
                     "torch_xla.distributed.fsdp.wrap.transformer_auto_wrap_policy."),),
        ),
        Example(
            HEADER + "import torch.distributed.fsdp.wrap as wrap\n\n"
            "model = FSDP(Net(), auto_wrap_policy=functools.partial(wrap.size_based_auto_wrap_policy, "
            "min_num_params=1e6))\n",
            expect=((5, 21, "PyTorch's size_based_auto_wrap_policy fails in torch_xla's FSDP; use torch_xla's "
                            "own",
                     "auto_wrap_policy comes from torch.distributed.fsdp.wrap.size_based_auto_wrap_policy, "
                     "which torch_xla's FSDP calls with the wrong arguments (TypeError: unexpected keyword "
                     "argument 'unwrapped_params'). Use "
                     "torch_xla.distributed.fsdp.wrap.size_based_auto_wrap_policy."),),
            title="a module alias and an inline partial",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps).wraps
        if not wraps:
            return
        for wrap in wraps:
            keyword = next((k for k in wrap.call.keywords if k.arg == "auto_wrap_policy"), None)
            if keyword is None:
                continue
            native = _native_policy(keyword.value, ctx, wrap.call)
            if native:
                leaf = native.rsplit(".", 1)[-1]
                yield self.diagnostic(
                    ctx, keyword, f"PyTorch's {leaf} fails in torch_xla's FSDP; use torch_xla's own",
                    help=(f"auto_wrap_policy comes from {native}, which torch_xla's FSDP calls with the wrong "
                          "arguments (TypeError: unexpected keyword argument 'unwrapped_params'). Use "
                          f"torch_xla.distributed.fsdp.wrap.{leaf}."))


def _native_policy(node: ast.AST, ctx: FileContext, at: ast.AST, depth: int = 0) -> Optional[str]:
    """The torch.distributed.fsdp.wrap policy ``node`` evaluates to, when it is one."""
    if depth > 3:
        return None
    names = ctx.get(QualifiedNames)
    if type(node) is ast.Call and names.qualname(node.func) == PARTIAL and node.args:
        return _native_policy(node.args[0], ctx, at, depth + 1)
    qualname = names.qualname(node)
    if qualname and qualname.startswith(NATIVE_POLICIES):
        return qualname
    name = dotted(node)
    where = ctx.get(FlowFacts).position(at)
    if name and where is not None and type(node) is ast.Name:
        bound = ctx.get(Assignments).bindings_before(name, where)
        if bound:
            return _native_policy(bound[-1].value, ctx, bound[-1].value, depth + 1)
    return None
