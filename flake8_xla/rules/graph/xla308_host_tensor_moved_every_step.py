"""XLA308 host-tensor-moved-every-step."""
import ast
import functools
from typing import Callable, Iterator, Optional, Tuple

from flake8_xla.fixing.edits import Edit, Fix
from flake8_xla.fixing.fixpoint import FixSite
from flake8_xla.rules.graph.wording import BUDGET, fit, spelled, where, where_in_full
from flake8_xla.analysis.semantic import QualifiedNames
from flake8_xla.analysis.loops import StepRegions, is_test_file
from flake8_xla.analysis.syntax import NodeIndex, Parents, argument, dotted
from flake8_xla.analysis.device_values import DeviceValues
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.values import DEVICE
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.versions import Version

# torch factories whose values do not depend on where they are made
DETERMINISTIC = frozenset({"zeros", "ones", "full", "empty", "arange", "eye"})
# torch factories that draw from a random generator: the host's and the device's differ
RANDOM = frozenset({"rand", "randn", "randint", "randperm"})
# tensor methods that keep the values exact (shape changes and casts) between the factory and .to()
_EXACT_METHODS = frozenset({
    "view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "flatten", "t", "transpose", "permute",
    "contiguous", "float", "double", "half", "bfloat16", "long", "int", "bool", "short", "byte", "unflatten",
    "expand_as", "view_as",
})
# factory keywords after which the factory call can no longer take device= as the only change
_NO_FIX_KEYWORDS = frozenset({"device", "requires_grad", "pin_memory", "out", "layout", "generator"})
_MANUAL_SEED = Version(2, 5)

HEADER = "import torch\nimport torch_xla\n\n"
LOOP = ("device = torch_xla.device()\nmodel = Net().to(device)\n"
        "for step, (data, target) in enumerate(loader):\n")
TRAIN = ("    loss = loss_fn(model(data.to(device)), target.to(device))\n    loss.backward()\n"
         "    optimizer.step()\n    torch_xla.sync()\n")


class HostTensorMovedEveryStep(Rule):
    code = "XLA308"
    name = "host-tensor-moved-every-step"
    summary = "A tensor made on the host by a torch factory and moved .to(device) on every step"
    what_it_does = (
        "Flags, in code that runs once per step (the step regions of XLA303: a training loop's body, a loop "
        "that runs a model, a function under `torch_xla.compile` or `torch.compile(backend=\"openxla\")`, "
        "`forward()` of an `nn.Module`, a framework's per-batch hook, and the file's functions they call), "
        "a tensor made on the host by a torch factory (`torch.zeros`, `ones`, `full`, `empty`, `arange`, `eye`, "
        "`rand`, `randn`, `randint`, `randperm`, without `device=`, and without `generator=`: a host generator is "
        "chosen on purpose, for data that is the same on every run and device) and moved to the XLA device in the same "
        "expression: `torch.zeros(n).to(device)`, also through shape changes and casts "
        "(`torch.arange(n).unsqueeze(0).long().to(device)`). The target must be the XLA device "
        "(`torch_xla.device()`, `xm.xla_device()`, `torch.device('xla')`, `'xla'`, or a name assigned one) or the "
        "`.device` of a tensor on the device (`x.device`). `torch.tensor(data).to(device)` is left alone: its data "
        "comes from the host either way, and `device=` copies it just the same. Code under `if step % N == 0:`, "
        "code that runs once (also a lazy `if self.cache is None: self.cache = ...` in `forward()`), branches that "
        "never run on XLA, and test modules (`test_*.py`, `*_test.py`, files in "
        "`tests/`) are left alone."
    )
    why_bad = (
        "The factory runs on the CPU and `.to(device)` copies the result to the device on every step: a "
        "host-to-device transfer (`TransferToDeviceTime`) and a new device buffer each time, instead of a constant "
        "or an op inside the step's graph. Measured on torch_xla 2.9 (CPU), 5 steps each: `torch.zeros(3).to(dev)` "
        "gave 5 `TransferToDeviceTime` samples and `torch.zeros(3, device=dev)` none (likewise `arange`, `empty`); "
        "`torch.zeros(1024, 1024).to(dev)` spent 11.8 ms in transfers, `torch.randn(1024, 1024).to(dev)` 36.0 ms "
        "while `torch.randn(1024, 1024, device=dev)` spent 0.08 ms (only the RNG seed goes to the device); "
        "`torch.tensor([1., 2., 3.], device=dev)` transferred 5 times like its `.to(dev)` form. "
        "Made with `device=`, the tensor is created by the device itself."
    )
    fix_safety = (
        "Safe fix, offered only for `zeros`, `ones`, `full`, `empty`, `eye` and `arange` (with a unit step) when "
        "`.to()` takes the XLA device as its only argument and the factory has no `device=`, `requires_grad=`, "
        "`pin_memory=`, `out=` or `**kwargs`: it moves the device into the factory (`torch.zeros(n, "
        "device=device)`) and drops `.to(device)`; the values are the same (an `empty` tensor's are undefined "
        "either way). No fix for the random factories: on the device they draw from the device's generator "
        "(seeded by `torch_xla.manual_seed`), so the numbers change."
    )
    references = (
        "https://github.com/pytorch/xla/issues/8861",
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/learn/troubleshoot.md",
    )
    valid = (
        Example(HEADER + LOOP + "    noise = torch.randn(data.shape, device=device)\n"
                "    mask = torch.ones(data.size(0), device=device)\n" + TRAIN,
                title="made on the device"),
        Example(HEADER + LOOP + "    weights = torch.tensor([0.2, 0.8]).to(device)\n" + TRAIN,
                title="data from the host: left alone"),
        Example(HEADER + "device = torch_xla.device()\nbias = torch.zeros(8).to(device)\nmodel = Net().to(device)\n"
                "for data, target in loader:\n"
                "    loss = loss_fn(model(data) + bias, target)\n    loss.backward()\n    optimizer.step()\n",
                title="moved once, before the loop"),
        Example(HEADER + LOOP + "    if step % 100 == 0:\n        probe = torch.randn(4, 8).to(device)\n" + TRAIN,
                title="every 100 steps"),
        Example(HEADER + "class Rotary(torch.nn.Module):\n    def forward(self, x):\n"
                "        if self.inv_freq is None:\n"
                "            self.inv_freq = 1.0 / 10000 ** (torch.arange(0, 64, 2).float().to(x.device) / 64)\n"
                "        return x * self.inv_freq\n",
                title="a cache filled on the first forward pass"),
    )
    invalid = (
        Example(
            HEADER + LOOP + "    mask = torch.ones(data.size(0), dtype=torch.bool).to(device)\n" + TRAIN,
            expect=((7, 12, "torch.ones(...) is copied from the host on every training step; make it with "
                            "device=device",
                     "It is made on the host and copied to the device on every training step (a host-to-device "
                     "transfer each time). Make it there: torch.ones(..., device=device)."),),
            fixed=HEADER + LOOP + "    mask = torch.ones(data.size(0), dtype=torch.bool, device=device)\n" + TRAIN,
        ),
        Example(
            HEADER + "class Net(torch.nn.Module):\n    def forward(self, x):\n"
            "        positions = torch.arange(x.size(1)).unsqueeze(0).to(x.device)\n"
            "        noise = torch.randn(x.shape).to(x.device)\n        return self.body(x + noise, positions)\n",
            expect=(
                (6, 21, "torch.arange(x.size(1)) is copied from the host on every forward pass; make it with "
                        "device=x.device"),
                (7, 17, "torch.randn(x.shape) is copied from the host on every forward pass; draw it with "
                        "device=x.device",
                 "It is drawn on the host and copied to the device on every forward pass (a host-to-device transfer "
                 "each time). Draw it there: torch.randn(..., device=x.device) (the device's generator gives other "
                 "numbers; torch_xla.manual_seed seeds it)."),
            ),
            title="in forward(): the device of the input",
        ),
        Example(
            HEADER + "device = torch_xla.device()\n\n\n@torch_xla.compile\ndef train_step(data, target):\n"
            "    eps = torch.full((1,), 0.5).to(device)\n    loss = loss_fn(model(data) + eps, target)\n"
            "    loss.backward()\n    optimizer.step()\n",
            expect=((9, 11, "torch.full(...) is copied from the host in a torch_xla.compile step; make it with "
                            "device=device"),),
            fixed=HEADER + "device = torch_xla.device()\n\n\n@torch_xla.compile\ndef train_step(data, target):\n"
            "    eps = torch.full((1,), 0.5, device=device)\n    loss = loss_fn(model(data) + eps, target)\n"
            "    loss.backward()\n    optimizer.step()\n",
            title="in a compiled step",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (d for d, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        if is_test_file(ctx.filename):
            return  # a test makes its inputs on purpose; a few iterations, not a training run
        regions = ctx.get(StepRegions)
        names = ctx.get(QualifiedNames)
        devices = ctx.get(DeviceValues)
        seed = "torch_xla.manual_seed" if ctx.target.version >= _MANUAL_SEED else "xm.set_rng_state"
        for call in ctx.get(NodeIndex).of(ast.Call):
            func = call.func
            if type(func) is not ast.Attribute or func.attr != "to" or not (call.args or call.keywords):
                continue
            factory, name = _factory(func.value, names)
            if factory is None:
                continue
            region = regions.region_of(call)
            if region is None or _lazy_init(call, ctx.get(Parents)):
                continue
            target = argument(call, 0, "device")
            if target is None or not _to_device(target, ctx):
                continue
            device = spelled(target, "device")
            place = where(region)
            if name in RANDOM:
                message = fit(factory, f"torch.{name}(...)", BUDGET, "",
                              f" is copied from the host {place}; draw it with device={device}")
                hint = (f"It is drawn on the host and copied to the device {where_in_full(region)} (a "
                        f"host-to-device transfer each time). Draw it there: torch.{name}(..., device={device}) "
                        f"(the device's generator gives other numbers; {seed} seeds it).")
                yield self.diagnostic(ctx, factory, message, help=hint), None
                continue
            message = fit(factory, f"torch.{name}(...)", BUDGET, "",
                          f" is copied from the host {place}; make it with device={device}")
            hint = (f"It is made on the host and copied to the device {where_in_full(region)} (a host-to-device "
                    f"transfer each time). Make it there: torch.{name}(..., device={device}).")
            fixable = _fixable(call, factory, name, target, devices)
            yield self.diagnostic(ctx, factory, message, help=hint), \
                functools.partial(_build_fix, call, factory, target) if fixable else None


def _factory(node: ast.AST, names: QualifiedNames) -> Tuple[Optional[ast.Call], str]:
    """The torch factory call (without ``device=``) at the root of ``node``, through shape changes
    and casts (``torch.arange(n).unsqueeze(0).long()``), and its name; else (None, "")."""
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _EXACT_METHODS and \
            names.qualname(node.func) is None:
        node = node.func.value
    if type(node) is not ast.Call:
        return None, ""
    qualname = names.qualname(node.func) or ""
    name = qualname[6:] if qualname.startswith("torch.") else ""
    if name not in DETERMINISTIC and name not in RANDOM:
        return None, ""
    if any(k.arg == "device" or k.arg == "generator" for k in node.keywords):
        return None, ""  # generator=: a host generator on purpose (reproducible data; torch.Generator has no XLA effect)
    return node, name


def _lazy_init(node: ast.AST, parents: Parents) -> bool:
    """Inside ``if self.cache is None: self.cache = ...``: it runs on the first call only."""
    for parent, part in parents.conditionals(node, within=(ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        if type(parent) is ast.If and part == "body":
            test = parent.test
            if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Is and \
                    type(test.comparators[0]) is ast.Constant and test.comparators[0].value is None:
                name = dotted(test.left)
                if name and any(type(stmt) in (ast.Assign, ast.AnnAssign) and
                                any(dotted(t) == name for t in (stmt.targets if type(stmt) is ast.Assign
                                                                else [stmt.target]))
                                for stmt in parent.body):
                    return True
    return False


def _to_device(target: ast.AST, ctx: FileContext) -> bool:
    """The XLA device, or ``x.device`` of a tensor on the device."""
    if ctx.get(DeviceValues).xla_device_value(target) is not None:
        return True
    return type(target) is ast.Attribute and target.attr == "device" and \
        ctx.get(TensorFacts).kind(target.value) == DEVICE


def _fixable(call: ast.Call, factory: ast.Call, name: str, target: ast.AST, devices: DeviceValues) -> bool:
    if len(call.args) + len(call.keywords) != 1 or devices.xla_device_value(target) is None:
        return False
    if any(k.arg is None or k.arg in _NO_FIX_KEYWORDS for k in factory.keywords):
        return False
    if name == "arange":  # a non-unit step may round differently on the device
        step = factory.args[2] if len(factory.args) > 2 else next(
            (k.value for k in factory.keywords if k.arg == "step"), None)
        return step is None or type(step) is ast.Constant and type(step.value) is int
    return True


def _build_fix(call: ast.Call, factory: ast.Call, target: ast.AST, site: FixSite) -> Optional[Fix]:
    lines = site.lines
    device = lines.text(target)
    arguments = list(factory.args) + list(factory.keywords)
    if arguments:
        last = max(arguments, key=lambda a: (a.end_lineno, a.end_col_offset))
        at = lines.end(last)
        insert = Edit(at, at, f", device={device}")
    else:
        at = lines.end(factory) - 1  # before the closing parenthesis
        insert = Edit(at, at, f"device={device}")
    drop = Edit(lines.end(call.func.value), lines.end(call), "")
    return Fix("Make the tensor on the device (device=)", (insert, drop), safe=True)
