"""XLA201 optimizer-before-fsdp-wrap."""
import ast
from typing import Iterator, List, Optional, Tuple

from flake8_xla.rules.examples import EXAMPLE_FSDP as FSDP1
from flake8_xla.rules.examples import EXAMPLE_FSDPV2 as FSDP2
from flake8_xla.analysis.control import Position
from flake8_xla.analysis.wraps import FsdpWraps, HelperWraps, OptimizerBuild, Wrap, is_optimizer
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.assignments import Assignments
from flake8_xla.analysis.semantic import SemanticModel


class OptimizerBeforeFsdpWrap(Rule):
    code = "XLA201"
    name = "optimizer-before-fsdp-wrap"
    summary = "An optimizer holding a model's parameters from before FSDP replaced them"
    what_it_does = (
        "Flags an optimizer built from `model.parameters()` before `model` is wrapped with "
        "`XlaFullyShardedDataParallel` in the same function (also by a helper that returns the wrapper it "
        "builds: a function of the file, or, under `flake8-xla check`, of another module of the project), or "
        "built after wrapping from the unwrapped module instead of the wrapper. For FSDPv2 (`SpmdFullyShardedDataParallel`) "
        "only while the model is still on the CPU: FSDPv2 moves it to the XLA device, which "
        "replaces CPU parameters, while a model already on the device keeps them."
    )
    why_bad = (
        "FSDP flattens and shards the parameters into new `Parameter` objects. The optimizer keeps "
        "the old ones, which never receive gradients, so training silently does nothing: no error, "
        "no warning, a flat loss curve."
    )
    fix_safety = "No automatic fix: moving the optimizer below the wrap can change other code in between."
    valid = (
        Example(FSDP1 + "import torch\n\nmodel = FSDP(Net())\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n", title="built after wrapping"),
        Example(FSDP1 + "import torch\n\nmodel = Net()\nmodel = FSDP(model)\n"
                "optimizer = torch.optim.AdamW(model.parameters())\n", title="the reference order"),
        Example(FSDP2 + "import torch\n\nmodel = Net().to('xla')\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model = FSDPv2(model, mesh=mesh)\n",
                title="FSDPv2 on a model already on the XLA device keeps its parameters"),
        Example(FSDP1 + "import torch\n\ndef build(model):\n"
                "    return torch.optim.SGD(model.parameters(), lr=0.1)\n\n"
                "optimizer = build(model)\nmodel = FSDP(model)\n",
                title="built in another function: unknown, silent"),
        Example(FSDP1 + "import torch\n\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model = Other()\nmodel = FSDP(model)\n", title="the name was rebound in between"),
    )
    invalid = (
        Example(
            FSDP1 + "import torch\n\nmodel = Net()\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel = FSDP(model)\n",
            expect=((5, 13, "optimizer built from model.parameters() before the FSDP wrap; build it after "
                            "wrapping",
                     "`model` is wrapped with FSDP at line 6: FSDP replaces its parameters, so this optimizer "
                     "never updates the model."),),
        ),
        Example(
            FSDP1 + "import torch\n\nnet = Net()\nmodel = FSDP(net)\n"
            "optimizer = torch.optim.Adam(net.parameters())\n",
            expect=((6, 13, "optimizer built from net.parameters(), which FSDP replaced; use model.parameters()",
                     "The FSDP wrapper is `model` (line 5): FSDP replaced the parameters of `net`, so this "
                     "optimizer never updates the model."),),
            title="built from the unwrapped module after wrapping",
        ),
        Example(
            FSDP2 + "import torch\n\ndef main(mesh):\n    model = Net()\n"
            "    optimizer = torch.optim.AdamW(model.parameters())\n"
            "    model = FSDPv2(model, mesh=mesh)\n",
            expect=((8, 17, "optimizer built from model.parameters() before the FSDPv2 wrap; build it after "
                            "wrapping",
                     "`model` is wrapped with FSDPv2 at line 9 while on the CPU: moving it to the XLA device "
                     "replaces its parameters, so this optimizer never updates the model."),),
            title="FSDPv2 while the model is still on the CPU",
        ),
        Example(
            FSDP1 + "import torch\n\nclass Trainer:\n    def setup(self):\n"
            "        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)\n"
            "        self.model = FSDP(self.model)\n",
            expect=((6, 20, "optimizer built from self.model.parameters() before the FSDP wrap; build it after "
                            "wrapping",
                     "`self.model` is wrapped with FSDP at line 7: FSDP replaces its parameters, so this "
                     "optimizer never updates the model."),),
            title="attributes are tracked too",
        ),
        Example(
            FSDP1 + "import torch\n\n\ndef shard(module):\n    return FSDP(module)\n\n\nmodel = Net()\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel = shard(model)\n",
            expect=((10, 7, "optimizer built from model.parameters() before the FSDP wrap; build it after "
                            "wrapping",
                     "`model` is wrapped with FSDP at line 11: FSDP replaces its parameters, so this optimizer "
                     "never updates the model."),),
            title="wrapped by a helper",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        own = ctx.get(FsdpWraps)
        wraps = list(own.wraps)
        if any(is_optimizer(r.qualname) and r.call is not None for r in ctx.get(SemanticModel).references):
            wraps += ctx.get(HelperWraps).assigned  # the wrapper may come from a helper: ``model = shard(model)``
        if not wraps:
            return
        bindings = ctx.get(Assignments)
        for optimizer in own.optimizers:
            problem = self._problem(bindings, optimizer, wraps)
            if problem:
                yield self.diagnostic(ctx, optimizer.call, problem[0], help=problem[1])

    def _problem(self, bindings: Assignments, optimizer: OptimizerBuild, wraps: List[Wrap]) -> Optional[Tuple[str, str]]:
        scope, order = optimizer.at.scope, optimizer.at.order
        for name in optimizer.params_of:
            for wrap in wraps:
                if wrap.at.scope is not scope or wrap.wrapped != name:
                    continue
                if wrap.kind == "v2" and _on_device_before(bindings, name, optimizer.at):
                    continue
                label = wrap.label
                if wrap.at.order > order and not bindings.rebound_between(name, scope, order, wrap.at.order):
                    why = (" while on the CPU: moving it to the XLA device replaces its parameters"
                           if wrap.kind == "v2" else f": {label} replaces its parameters")
                    return (f"optimizer built from {name}.parameters() before the {label} wrap; build it after "
                            "wrapping",
                            f"`{name}` is wrapped with {label} at line {wrap.call.lineno}{why}, so this "
                            "optimizer never updates the model.")
                if wrap.at.order < order and wrap.target and wrap.target != name and \
                        not bindings.rebound_between(name, scope, wrap.at.order, order) and \
                        not bindings.rebound_between(wrap.target, scope, wrap.at.order, order):
                    return (f"optimizer built from {name}.parameters(), which {label} replaced; use "
                            f"{wrap.target}.parameters()",
                            f"The {label} wrapper is `{wrap.target}` (line {wrap.call.lineno}): {label} replaced "
                            f"the parameters of `{name}`, so this optimizer never updates the model.")
        return None


def _on_device_before(bindings: Assignments, name: str, at: Position) -> bool:
    """Whether ``name`` was moved with ``.to(...)`` (or created by an expression ending in one)
    in the scope of ``at``, before it."""
    if any(_calls_to(binding.value) for binding in bindings.bindings_before(name, at)):
        return True
    return any(m.at.scope is at.scope and m.at.order < at.order and m.name == name for m in bindings.moves)


def _calls_to(node: ast.AST) -> bool:
    return type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "to"
