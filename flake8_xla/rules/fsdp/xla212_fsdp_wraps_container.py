"""XLA212 fsdp-wraps-container."""
import ast
from typing import Dict, Iterator, Optional, Tuple

from flake8_xla.rules.examples import EXAMPLE_FSDP
from flake8_xla.analysis.wraps import FsdpWraps, Wrap
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.assignments import Assignments

FSDP1 = "import torch.nn as nn\n" + EXAMPLE_FSDP
CONTAINERS = {
    "torch.nn.ModuleList": "nn.ModuleList",
    "torch.nn.ModuleDict": "nn.ModuleDict",
    "torch.nn.modules.ModuleList": "nn.ModuleList",
    "torch.nn.modules.ModuleDict": "nn.ModuleDict",
    "torch.nn.modules.container.ModuleList": "nn.ModuleList",
    "torch.nn.modules.container.ModuleDict": "nn.ModuleDict",
}
RAISES = "raises RuntimeError 'The module wrapped by FSDP *must define a `forward` method*...'"


class FsdpWrapsContainer(Rule):
    code = "XLA212"
    name = "fsdp-wraps-container"
    summary = "FSDP wrapping an nn.ModuleList or nn.ModuleDict, which has no forward()"
    what_it_does = (
        "Flags `XlaFullyShardedDataParallel(...)` and FSDPv2 (`SpmdFullyShardedDataParallel(...)`) whose "
        "module is an `nn.ModuleList(...)` / `nn.ModuleDict(...)` call, or a name bound to one earlier in "
        "the same function."
    )
    why_bad = (
        "FSDP gathers the parameters in its wrapper's forward pass, so it requires a module whose own "
        "`forward` runs them. Containers define none, and both wrappers refuse them: `RuntimeError: The "
        "module wrapped by FSDP *must define a `forward` method and call it during the module's forward "
        "pass for FSDP to work correctly.* Hence, do not wrap `nn.ModuleList` or `nn.ModuleDict` with "
        "FSDP`. Calling the container's blocks one by one would bypass the wrapper anyway."
    )
    fix_safety = "No automatic fix: which modules to wrap instead is a design choice."
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py",
        "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/experimental/spmd_fully_sharded_data_parallel.py",
    )
    valid = (
        Example(FSDP1 + "\nblocks = nn.ModuleList([Block() for _ in range(4)])\n"
                "for i, block in enumerate(blocks):\n    blocks[i] = FSDP(block)\n",
                title="wrap each block of the list"),
        Example(FSDP1 + "\nmodel = FSDP(nn.Sequential(Block(), Block()))\n",
                title="nn.Sequential has a forward"),
        Example(FSDP1 + "\nblocks = nn.ModuleList([Block()])\nblocks = Net(blocks)\nmodel = FSDP(blocks)\n",
                title="the name was rebound to a real module"),
    )
    invalid = (
        Example(
            FSDP1 + "\nmodel = FSDP(nn.ModuleList([Block() for _ in range(4)]))\n",
            expect=((4, 14, "FSDP wraps an nn.ModuleList, which has no forward(); wrap each block in it",
                     "FSDP raises RuntimeError 'The module wrapped by FSDP *must define a `forward` "
                     "method*...'. Wrap each block in it, or the module whose forward() calls them."),),
        ),
        Example(
            FSDP1 + "\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.heads = nn.ModuleDict({'a': Head(), 'b': Head()})\n"
            "        self.heads = FSDP(self.heads)\n",
            expect=((8, 27, "FSDP wraps `self.heads`, an nn.ModuleDict without forward(); wrap each module in "
                            "it",
                     "`self.heads` is an nn.ModuleDict (line 7), and FSDP raises RuntimeError 'The module "
                     "wrapped by FSDP *must define a `forward` method*...'. Wrap each module in it, or the "
                     "module whose forward() calls them."),),
            title="through a name bound in the same function",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps = ctx.get(FsdpWraps).wraps
        if not wraps:
            return
        containers = {id(r.call): CONTAINERS[r.qualname] for r in ctx.get(SemanticModel).references
                      if r.call is not None and r.qualname in CONTAINERS}
        if not containers:
            return
        for wrap in wraps:
            kind = containers.get(id(wrap.inner))
            if kind is not None:
                yield self.diagnostic(
                    ctx, wrap.inner, f"{wrap.label} wraps an {kind}, which has no forward(); {_instead(kind)}",
                    help=f"{wrap.label} {RAISES}. {_alternatives(kind)}")
                continue
            bound = _bound_container(ctx.get(Assignments), wrap, containers)
            if bound is not None:
                kind, line = bound
                yield self.diagnostic(
                    ctx, wrap.inner, f"{wrap.label} wraps `{wrap.wrapped}`, an {kind} without forward(); "
                    f"{_instead(kind)}",
                    help=(f"`{wrap.wrapped}` is an {kind} (line {line}), and {wrap.label} {RAISES}. "
                          f"{_alternatives(kind)}"))


def _instead(kind: str) -> str:
    return f"wrap each {'block' if kind.endswith('List') else 'module'} in it"


def _alternatives(kind: str) -> str:
    what = "block" if kind.endswith("List") else "module"
    return f"Wrap each {what} in it, or the module whose forward() calls them."


def _bound_container(bindings: Assignments, wrap: Wrap, containers: Dict[int, str]) -> Optional[Tuple[str, int]]:
    """The container the wrapped name surely holds: its last binding before the wrap, which runs."""
    if not wrap.wrapped:
        return None
    last = bindings.last_binding(wrap.wrapped, wrap.at)
    if last is None or type(last.value) is not ast.Call:
        return None
    kind = containers.get(id(last.value))
    return (kind, last.at.statement.lineno) if kind else None
