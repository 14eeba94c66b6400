"""XLA403 xla-tensors-saved-with-torch-save."""
import ast
import functools
from typing import Dict, Iterator, List, Optional

from flake8_xla.analysis.checkpoints import Checkpointing
from flake8_xla.analysis.flow import FlowFacts, Position, argument, dotted
from flake8_xla.analysis.fsdp import EXAMPLE_XM, TORCH_SAVE, USE_SPMD, checkpoint_facts
from flake8_xla.analysis.loops import StepRegions, is_test_file
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.syntax import NodeIndex
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

# methods that return the module they are called on (``Net().to(device).train()``)
_SELF_METHODS = frozenset({"to", "train", "eval", "float", "half", "bfloat16", "double", "requires_grad_"})
# torch factories; with ``device=<the XLA device>`` they make XLA tensors
_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "tensor", "eye",
                        "linspace", "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "full_like"})
_OPTIMIZERS_WITHOUT_STATE = frozenset({"torch.optim.SGD"})  # without momentum it keeps no tensors
ADVICE = ("save CPU copies instead: xla_compat.save(obj, path) (what xm.save does; xm.save is planned for removal), "
          "or torch.save of {k: v.cpu() for k, v in state_dict.items()}")

HEADER = "import torch\nimport torch_xla\n\n"


class XlaTensorsSavedWithTorchSave(Rule):
    code = "XLA403"
    name = "xla-tensors-saved-with-torch-save"
    summary = "torch.save() of XLA tensors: a model's or optimizer's state_dict() on the XLA device, or a device tensor"
    what_it_does = (
        "Flags `torch.save(obj, path)` where `obj` is, or holds in a dict, list or tuple (also through a name "
        "assigned one in the same function), a module placed on the XLA device in the same function, or its "
        "`state_dict()` (`model = Net().to(device)`, or `model.to(device)`, with `device` given `torch_xla.device()`, "
        "`xm.xla_device()`, `torch.device('xla')` or `'xla'`), the `state_dict()` of an optimizer built there from "
        "such a module's parameters (not a plain SGD without momentum, which keeps no tensors), or a tensor made "
        "on the XLA device there (`x.to(device)`, `torch.zeros(n, device=device)`), and nothing moved the module "
        "back (`model.cpu()`, `model.to('cpu')`) or rebound the name before the save. A module or tensor that "
        "comes from a parameter or another function stays unknown and is not reported. `xm.save` and "
        "`xla_compat.save` are left alone (they copy to the CPU first), and so are test modules (serialization "
        "tests save XLA tensors on purpose) and files that use SPMD or FSDP: there the saved tensors are shards or "
        "gathered on purpose, which XLA401 and the XLA2xx rules cover."
    )
    why_bad = (
        "`torch.save` keeps each tensor's device: the file records XLA storages. Measured on torch_xla 2.9 (CPU): "
        "the `state_dict()` of a module on the XLA device, an Adam optimizer's `state_dict()` after one step and "
        "`torch.ones(3, device=xla)` each saved with `torch.save`; `python -c 'import torch; torch.load(path)'` "
        "(torch_xla not imported) fails with `NotImplementedError: Could not run 'aten::empty.memory_format' with "
        "arguments from the 'XLA' backend`, while the same data saved with `xm.save` or as `.cpu()` copies loads. "
        "`torch.load(path, map_location='cpu')` does load it, but every consumer (an evaluation or serving job, a "
        "GPU machine, a converter script) must know to pass it, and a process that does import torch_xla gets "
        "the tensors back on its XLA device (`device(type='xla', index=0)`), holding device memory before "
        "`load_state_dict()` runs. torch_xla's troubleshooting guide (XLA tensor quirks) adds that the tensors go "
        "back to the device they were saved from (`xm.xla_device(n)`) and the load fails where it is unavailable; "
        "it and 'Saving and Loading XLA Tensors' say to move XLA tensors to the CPU before saving them."
    )
    fix_safety = ("No automatic fix: `xla_compat.save` (like `xm.save`) writes from the master ordinal only, which "
                  "changes what a multi-process job writes; moving the tensors to the CPU by hand is a choice of "
                  "where in the code to do it.")
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/learn/troubleshoot.md",
        "https://github.com/pytorch/xla/issues/1245",
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/learn/pytorch-on-xla-devices.md",
    )
    valid = (
        Example(HEADER + "import xla_compat\n\n\ndef train(loader):\n    device = torch_xla.device()\n"
                "    model = Net().to(device)\n    train_epochs(model, loader)\n"
                "    xla_compat.save(model.state_dict(), 'model.pt')\n",
                title="xla_compat.save copies to the CPU"),
        Example(HEADER + "def train(loader):\n    device = torch_xla.device()\n    model = Net().to(device)\n"
                "    train_epochs(model, loader)\n"
                "    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, 'model.pt')\n",
                title="CPU copies saved by hand"),
        Example(HEADER + "def train(loader):\n    model = Net().to(torch_xla.device())\n    train_epochs(model, loader)\n"
                "    model.cpu()\n    torch.save(model.state_dict(), 'model.pt')\n",
                title="the model moved back first"),
        Example(HEADER + "def save(model, path):\n    torch.save(model.state_dict(), path)\n",
                title="a model from a parameter: unknown, silent"),
        Example(HEADER + "def train(loader):\n    model = Net().to(torch_xla.device())\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    train_epochs(model, optimizer, loader)\n"
                "    torch.save(optimizer.state_dict(), 'optim.pt')\n",
                title="plain SGD keeps no tensors"),
        Example(HEADER + "def train(loader, args):\n    device = torch_xla.device() if args.tpu else 'cuda'\n"
                "    model = Net().to(device)\n    torch.save(model.state_dict(), 'model.pt')\n",
                title="the device chosen at run time"),
    )
    invalid = (
        Example(
            HEADER + "def train(loader):\n    device = torch_xla.device()\n    model = Net().to(device)\n"
            "    optimizer = torch.optim.AdamW(model.parameters())\n    train_epochs(model, optimizer, loader)\n"
            "    torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict()}, 'ckpt.pt')\n",
            expect=((9, 5, "torch.save() of the state_dict() of model `model` (on the XLA device since line 6) "
                           "writes XLA tensors: torch.load of the file fails without torch_xla (NotImplementedError "
                           "for the 'XLA' backend) unless given map_location='cpu', and puts every tensor back on "
                           "the XLA device with it; " + ADVICE),),
        ),
        Example(
            HEADER + EXAMPLE_XM + "\ndevice = xm.xla_device()\nmodel = Net()\nmodel.to(device)\n"
            "optimizer = torch.optim.Adam(model.parameters())\ntrain_epochs(model, optimizer)\n"
            "torch.save(optimizer.state_dict(), 'optim.pt')\nembeddings = model.embed(batch).to(device)\n"
            "torch.save(embeddings, 'embeddings.pt')\n",
            expect=(
                (11, 1, "torch.save() of the state_dict() of optimizer `optimizer` (over the parameters of `model`, "
                        "on the XLA device since line 8) writes XLA tensors: torch.load of the file fails without "
                        "torch_xla (NotImplementedError for the 'XLA' backend) unless given map_location='cpu', and "
                        "puts every tensor back on the XLA device with it; " + ADVICE),
                (13, 1, "torch.save() of tensor `embeddings` (on the XLA device since line 12) writes XLA tensors: "
                        "torch.load of the file fails without torch_xla (NotImplementedError for the 'XLA' "
                        "backend) unless given map_location='cpu', and puts every tensor back on the XLA device "
                        "with it; " + ADVICE),
            ),
            title="a script: an optimizer's state and a device tensor",
        ),
        Example(
            HEADER + "model = torch.nn.Linear(4, 2).to('xla')\ntorch.save(model, 'model.pt')\n",
            expect=((5, 1, "torch.save() of model `model` (on the XLA device since line 4) writes XLA tensors: "
                           "torch.load of the file fails without torch_xla (NotImplementedError for the 'XLA' "
                           "backend) unless given map_location='cpu', and puts every tensor back on the XLA device "
                           "with it; " + ADVICE),),
            title="the whole module",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        saves = [s for s in checkpoint_facts(ctx).saves if s.qualname == TORCH_SAVE and not s.unpacked]
        if not saves or is_test_file(ctx.filename) or _sharded_program(ctx):
            return  # a test saves XLA tensors on purpose (serialization tests)
        judge = _Placement(ctx)
        never = ctx.get(StepRegions).never_on_xla
        for save in saves:
            if id(save.call) in never or save.data is None:
                continue
            found = judge.holds(save.data, save.at, 3)
            if found is not None:
                yield self.diagnostic(ctx, save.call, (
                    f"{save.callee}() of {found} writes XLA tensors: torch.load of the file fails without torch_xla "
                    "(NotImplementedError for the 'XLA' backend) unless given map_location='cpu', and puts every "
                    f"tensor back on the XLA device with it; {ADVICE}"))


def _sharded_program(ctx: FileContext) -> bool:
    """SPMD (``xr.use_spmd()``, mark_sharding) or FSDP in the file: its saves are XLA401's and the XLA2xx rules'."""
    if ctx.get(FlowFacts).fsdp_refs or ctx.get(Checkpointing).shardings:
        return True
    return any(r.qualname == USE_SPMD for r in ctx.get(SemanticModel).references if not r.is_import)


class _Placement:
    """Which names hold a module, optimizer or tensor on the XLA device where a save runs."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.flow: FlowFacts = ctx.get(FlowFacts)
        self.flow.collect()
        self.tensors: TensorFacts = ctx.get(TensorFacts)

    def holds(self, expr: ast.AST, at: Position, depth: int) -> Optional[str]:
        """How the message names the XLA data ``expr`` is or carries, or None."""
        kind = type(expr)
        if kind is ast.Dict:
            return self._first([v for v in expr.values if v is not None], at, depth)
        if kind in (ast.List, ast.Tuple):
            return self._first(expr.elts, at, depth)
        if kind is ast.Call:
            func = expr.func
            if type(func) is ast.Attribute and func.attr == "state_dict" and not expr.args:
                return self._state_of(dotted(func.value), at)
            if type(func) is ast.Name and func.id == "dict" and self.flow.reference(func) is None:
                return self._first(list(expr.args) + [k.value for k in expr.keywords], at, depth)
            return None
        name = dotted(expr)
        if name is None or depth <= 0:
            return None
        line = self.module_on_xla(name, at) if self.tensors.kind(expr) == "module" else None
        if line is not None:
            return f"model `{name}` (on the XLA device since line {line})"
        binding = self.flow.binding_of(expr)
        if binding is None:
            return None
        if self._made_on_xla(binding.value):
            return f"tensor `{name}` (on the XLA device since line {binding.at.statement.lineno})"
        return self.holds(binding.value, at, depth - 1)

    def _first(self, items: List[ast.AST], at: Position, depth: int) -> Optional[str]:
        return next(filter(None, (self.holds(i, at, depth) for i in items)), None)

    def _state_of(self, owner: Optional[str], at: Position) -> Optional[str]:
        if owner is None:
            return None
        line = self.module_on_xla(owner, at)
        if line is not None:
            return f"the state_dict() of model `{owner}` (on the XLA device since line {line})"
        build = self.flow.optimizer_named(owner, at.statement)
        if build is None or build.param_groups or not self.flow.runs_before(build.at, at) or \
                self.flow.qualname(build.call.func) in _OPTIMIZERS_WITHOUT_STATE and \
                not _has_momentum(build.call):
            return None
        for module in build.params_of:
            line = self.module_on_xla(module, at)
            if line is not None:
                return (f"the state_dict() of optimizer `{owner}` (over the parameters of `{module}`, on the XLA "
                        f"device since line {line})")
        return None

    def module_on_xla(self, name: str, at: Position) -> Optional[int]:
        """The line since which the module ``name`` is on the XLA device where ``at`` runs: its last
        binding before ``at`` moves it there (``model = Net().to(device)``), or a ``model.to(device)``
        statement after that binding does; nothing moves it elsewhere or rebinds it in between."""
        bound = self.flow.bindings_before(name, at)
        last = bound[-1] if bound else None
        if last is not None and not self.flow.runs_before(last.at, at):
            return None  # bound in a branch or loop: which value reaches the save is unknown
        since = last.at.order if last is not None else -1
        found: Optional[int] = None
        if last is not None and self._moved_to_xla(last.value):
            found = last.at.statement.lineno
        for move in self.flow.moves:
            if move.name != name or move.at.scope is not at.scope or not since < move.at.order < at.order:
                continue
            call = move.at.statement.value
            if self._device(call) is not None:
                if self.flow.runs_before(move.at, at):
                    found = move.at.statement.lineno
            else:
                found = None  # moved to the CPU (or somewhere unknown) since
        if found is None:
            return None
        for node in self._away_calls(name, at.scope):
            position = self.flow.position(node)
            if position is not None and since < position.order < at.order:
                return None  # model.cpu() since
        return found

    def _moved_to_xla(self, value: ast.AST) -> bool:
        """``Net().to(device)``, also with ``.train()``/``.eval()``... around it."""
        while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in _SELF_METHODS:
            if value.func.attr == "to" and self._device(value) is not None:
                return True
            value = value.func.value
        return False

    def _device(self, call: ast.Call) -> Optional[ast.AST]:
        """The XLA device a ``.to(...)`` call moves to, or None."""
        where = argument(call, 0, "device")
        return self.tensors.xla_device_value(where) if where is not None else None

    def _made_on_xla(self, value: ast.AST) -> bool:
        """A tensor made on the XLA device: ``x.to(device)`` or ``torch.zeros(n, device=device)``."""
        if type(value) is not ast.Call:
            return False
        func = value.func
        qualname = self.flow.qualname(func) or ""
        if qualname.startswith("torch.") and qualname[6:] in _FACTORIES:
            device = next((k.value for k in value.keywords if k.arg == "device"), None)
            return device is not None and self.tensors.xla_device_value(device) is not None
        return type(func) is ast.Attribute and func.attr == "to" and not qualname and \
            self._device(value) is not None and self.tensors.kind(func.value) != "module"

    def _away_calls(self, name: str, scope: ast.AST) -> List[ast.Call]:
        """``name.cpu()`` / ``name.to(<not the XLA device>)`` calls in ``scope``."""
        return [c for c in self._method_calls.get(name, ()) if self.flow.position(c) is not None and
                self.flow.position(c).scope is scope and
                (c.func.attr == "cpu" or c.func.attr == "to" and self._device(c) is None)]

    @functools.cached_property
    def _method_calls(self) -> Dict[str, List[ast.Call]]:
        """``<dotted name>.cpu(...)`` / ``.to(...)`` calls of the file by receiver."""
        out: Dict[str, List[ast.Call]] = {}
        for call in self.ctx.get(NodeIndex).of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and func.attr in ("cpu", "to"):
                name = dotted(func.value)
                if name:
                    out.setdefault(name, []).append(call)
        return out


def _has_momentum(call: ast.Call) -> bool:
    value = argument(call, 2, "momentum")
    return value is not None and not (type(value) is ast.Constant and not value.value)
