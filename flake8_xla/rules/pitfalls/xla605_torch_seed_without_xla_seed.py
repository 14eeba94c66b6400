"""XLA605 torch-seed-without-xla-seed."""
import ast
import re
from typing import Iterator, List, Optional, Tuple

from flake8_xla.analysis.bindings import Bindings
from flake8_xla.analysis.device_values import DeviceValues
from flake8_xla.analysis.off_xla import OffXla
from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.placement import MovedModules, surely_on_xla
from flake8_xla.analysis.syntax import NodeIndex
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.versions import Version

TORCH_SEED = frozenset({"torch.manual_seed", "torch.random.manual_seed"})
# calls that seed the XLA generator: upstream's, the companion's, and the helpers of libraries that call
# xm.set_rng_state themselves (accelerate's set_seed, ignite's manual_seed, catalyst's set_global_seed,
# fairseq's set_torch_seed; read in their sources). transformers.set_seed and Lightning's seed_everything
# do not seed XLA and are not listed.
XLA_SEEDS = frozenset({
    "torch_xla.core.xla_model.set_rng_state", "torch_xla.manual_seed", "torch_xla.torch_xla.manual_seed",
    "torch_xla._XLAC._xla_set_rng_seed", "xla_compat.manual_seed", "xla_compat.runtime.manual_seed",
    "accelerate.utils.set_seed", "accelerate.utils.random.set_seed", "accelerate.set_seed",
    "ignite.utils.manual_seed", "catalyst.utils.set_global_seed", "catalyst.utils.misc.set_global_seed",
    "fairseq.utils.set_torch_seed",
})
# torch functions that draw random numbers where their result lives
_RANDOM = frozenset("torch." + n for n in (
    "rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson", "rand_like",
    "randn_like", "randint_like"))
# torch.nn.init functions that fill their first argument with random numbers where it lives
_RANDOM_INIT = frozenset("torch.nn.init." + n for n in (
    "uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
    "kaiming_normal_", "orthogonal_", "sparse_"))
# random torch functions whose result lives where their first operand does
_FROM_OPERAND = frozenset("torch." + n for n in ("normal", "bernoulli", "multinomial", "poisson"))
_DROPOUT_LAYERS = frozenset("torch.nn." + n for n in (
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"))
_DROPOUT_CALLS = frozenset({"torch.nn.functional.dropout", "torch.dropout", "torch.nn.functional.dropout1d",
                            "torch.nn.functional.dropout2d", "torch.nn.functional.dropout3d",
                            "torch.nn.functional.alpha_dropout"})
# in-place tensor methods that draw random numbers on the tensor's device
_RANDOM_METHODS = frozenset({"uniform_", "normal_", "bernoulli_", "random_", "exponential_", "geometric_",
                             "log_normal_", "cauchy_"})
_SEEDING = re.compile(r"(?i)seed")
# helpers known to leave the XLA generator alone (read in their sources), and generators that are not XLA's
_NOT_XLA_SEEDS = ("transformers.", "lightning.", "pytorch_lightning.", "lightning_fabric.", "torch.", "numpy.",
                  "random.", "tensorflow.", "jax.")
_DROPOUT = re.compile(r"(?i)dropout|drop_path|drop_rate")
_TRAINING_CALLS = frozenset({"backward"})
_SINCE = Version(2, 5)  # torch_xla.manual_seed
HEADER = "import torch\nimport torch_xla\n\n"


class TorchSeedWithoutXlaSeed(Rule):
    code = "XLA605"
    name = "torch-seed-without-xla-seed"
    summary = "torch.manual_seed() in torch_xla code that never seeds the XLA random generator"
    since = "0.2.0"
    what_it_does = (
        "Flags `torch.manual_seed(seed)` in a file that uses torch_xla, makes random numbers on the XLA device, "
        "and seeds the XLA generator nowhere. Random numbers on the device are a random torch op made on the XLA "
        "device (`torch.randn(..., device=device)` with `device = torch_xla.device()`) or applied to a tensor "
        "the file surely made or moved there (`torch.randn_like(x)`, `x.uniform_()`, `nn.init.normal_(x)`, "
        "`F.dropout(x)`, `torch.multinomial(x)`; a parameter of unknown device does not count), or "
        "dropout that surely runs on the device in a file that trains (`.backward()`): `nn.Dropout(0.1)` or "
        "`F.dropout(x, 0.1)` with a constant non-zero rate, or a setting such as `hidden_dropout_prob=0.1` / "
        "`drop_path_rate=0.1` in a call, in a model the file moves to the XLA device (a module class of the "
        "file built and moved, `Net().to(device)`, or built inside such a class, or a call whose module is "
        "moved). A rate from a variable may be 0, and a model the file does not move may stay on the CPU or "
        "be built for evaluation only; neither is counted. The XLA generator counts as seeded when "
        "the file calls `torch_xla.manual_seed`, `xm.set_rng_state`, `xla_compat.manual_seed`, or a library "
        "helper that calls `xm.set_rng_state` itself (accelerate's `set_seed`, ignite's `manual_seed`, "
        "catalyst's `set_global_seed`, fairseq's `set_torch_seed`), and also when it calls a seeding helper "
        "of another module or library the rule cannot read (`utils.set_seed(args.seed)`): it may seed XLA "
        "there. Not reported: files that make no random "
        "numbers on the device (CPU-side seeding for weight initialisation or data order is what "
        "`torch.manual_seed` does do), code that never runs on XLA (a CUDA branch), and library helpers "
        "that only seed (the file that calls them does the drawing elsewhere), and seeds written as a number "
        "(`torch.manual_seed(42)`, or a name given one): they ask for the same numbers in every run, which the "
        "XLA generator's fixed default seed gives too (re-seeding to replay the same draws is the case this "
        "leaves out)."
    )
    why_bad = (
        "`torch.manual_seed` seeds the CPU generator (and CUDA's); the XLA device has a generator of its own, "
        "set only by `torch_xla.manual_seed` (`xm.set_rng_state`). Without it, dropout masks and "
        "`torch.randn(..., device=xla)` use the generator's default seed: a run with `--seed 1` and one with "
        "`--seed 2` draw the same numbers on the device, and so does every replica, even when the seed is made "
        "per rank (`seed + rank`). Measured on torch_xla 2.9, CPU: after `torch.manual_seed(0)` twice, "
        "`torch.randn(3, device=torch_xla.device())` gave two different draws, and the first draw was the "
        "same as in a fresh process without any seed; after `torch_xla.manual_seed(0)` twice the draws were "
        "equal; under `torch_xla.launch` with two processes, `torch.manual_seed(1000 + rank)` left "
        "`xm.get_rng_state()` at 101 on both and both drew the same numbers. (pytorch/xla#2092; "
        "`torch_xla.manual_seed` came with #7340 in 2.5; a `torch.Generator` for XLA, pytorch/xla#9159, is "
        "still open.)"
    )
    fix_safety = ("No automatic fix: where the XLA generator should be seeded (once, per rank, after the "
                  "device exists) is the program's choice; add `torch_xla.manual_seed(seed)` next to it.")
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/torch_xla.py",
                  "https://github.com/pytorch/xla/issues/2092",
                  "https://github.com/pytorch/xla/issues/9159")
    valid = (
        Example(HEADER + "def main(seed):\n    torch.manual_seed(seed)\n    torch_xla.manual_seed(seed)\n"
                "    return torch.randn(8, device=torch_xla.device())\n",
                title="both generators seeded"),
        Example(HEADER + "def main(seed):\n    torch.manual_seed(seed)\n"
                "    model = torch.nn.Linear(4, 4).to(torch_xla.device())\n"
                "    return model(torch.randn(8, 4).to(torch_xla.device()))\n",
                title="random numbers made on the CPU only (weight initialisation, a CPU tensor moved)"),
        Example(HEADER + "SEED = 42\ntorch.manual_seed(SEED)\nnoise = torch.randn(8, device=torch_xla.device())\n",
                title="a fixed seed: the same numbers every run is what it asks for"),
        Example(HEADER + "from accelerate.utils import set_seed\n\n\ndef main(seed):\n    set_seed(seed)\n"
                "    torch.manual_seed(seed)\n    return torch.randn(8, device=torch_xla.device())\n",
                title="a library helper that seeds XLA too"),
        Example(HEADER + "def seed_everything(seed):\n    torch.manual_seed(seed)\n",
                title="a helper that only seeds: nothing random on the device in this file"),
        Example(HEADER + "def main(seed):\n    if torch.cuda.is_available():\n        torch.manual_seed(seed)\n"
                "    return torch.randn(8, device=torch_xla.device())\n",
                title="seeding on the CUDA path only"),
    )
    invalid = (
        Example(
            HEADER + "def main(seed):\n    torch.manual_seed(seed)\n"
            "    return torch.randn(8, device=torch_xla.device())\n",
            expect=((5, 5, "torch.manual_seed() does not seed the XLA generator; also call "
                           "torch_xla.manual_seed(seed) (2.5+)",
                     "The random numbers made on the device (torch.randn() on line 6) keep the XLA generator's "
                     "default seed, the same in every run and every process."),),
        ),
        Example(
            HEADER + "import torch.nn as nn\nimport torch_xla.core.xla_model as xm\n\n\n"
            "def set_seed(args):\n    torch.manual_seed(args.seed + xm.get_ordinal())\n\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.drop = nn.Dropout(0.1)\n\n\n"
            "def train(loader, make_optimizer):\n    model = Net().to(xm.xla_device())\n"
            "    optimizer = make_optimizer(model)\n    for x, y in loader:\n"
            "        loss = model(x).sum()\n        loss.backward()\n        xm.optimizer_step(optimizer)\n",
            target="2.4",
            expect=((9, 5, "torch.manual_seed() does not seed the XLA generator; also call "
                           "xm.set_rng_state(seed)",
                     "The random numbers made on the device (dropout on line 15) keep the XLA generator's "
                     "default seed, the same in every run and every process. Or call "
                     "xla_compat.manual_seed(seed), on any release."),),
            title="a per-rank seed for a model with dropout, torch_xla before 2.5",
        ),
        Example(
            HEADER + "import torch.nn as nn\n\n\ndef init_table(rank):\n    torch.manual_seed(rank)\n"
            "    table = torch.empty(1000, 64, device=torch_xla.device())\n    nn.init.normal_(table)\n"
            "    return table\n",
            expect=((8, 5, "torch.manual_seed() does not seed the XLA generator; also call "
                           "torch_xla.manual_seed(seed) (2.5+)",
                     "The random numbers made on the device (nn.init.normal_() on line 10) keep the XLA "
                     "generator's default seed, the same in every run and every process."),),
            title="weights initialised on the device, seeded per rank",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        refs = ctx.get(SemanticModel).references
        seeds = [r for r in refs if r.call is not None and r.qualname in TORCH_SEED]
        if not seeds or any(r.qualname in XLA_SEEDS for r in refs) or _other_seeding(ctx):
            return
        never = ctx.get(OffXla).nodes
        bindings = ctx.get(Bindings)
        seeds = [r for r in seeds if id(r.call) not in never and not _fixed(r.call, bindings)]
        if not seeds:
            return
        evidence = _device_randomness(ctx, never)
        if evidence is None:
            return
        line, what = evidence
        if ctx.target.version >= _SINCE:
            instead, other = "torch_xla.manual_seed(seed) (2.5+)", ""
        else:
            instead, other = "xm.set_rng_state(seed)", " Or call xla_compat.manual_seed(seed), on any release."
        for ref in seeds:
            spelled = ref.written_prefix(ref.qualname)
            yield self.diagnostic(
                ctx, ref.call, f"{spelled}() does not seed the XLA generator; also call {instead}",
                help=(f"The random numbers made on the device ({what} on line {line}) keep the XLA generator's "
                      f"default seed, the same in every run and every process.{other}"))


def _other_seeding(ctx: FileContext) -> bool:
    """A call of a seeding helper from another module of the project or an unknown library
    (``utils.set_seed(args.seed)``, ``from common import seed_all``): it may seed XLA as well."""
    local = {node.name for node in ctx.get(NodeIndex).of(ast.FunctionDef, ast.AsyncFunctionDef)}
    names = ctx.get(QualifiedNames)
    for call in ctx.get(NodeIndex).of(ast.Call):
        func = call.func
        name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
        if not _SEEDING.search(name) or name in local:
            continue
        qualname = names.qualname(func)
        if qualname is not None and (qualname in TORCH_SEED or qualname.startswith(_NOT_XLA_SEEDS)):
            continue
        if type(func) is ast.Attribute and qualname is None:
            continue  # a method: ``generator.manual_seed(...)``, ``np.random.seed`` through an alias
        return True
    return False


def _fixed(call: ast.Call, bindings: Bindings) -> bool:
    """A seed written as a number (``torch.manual_seed(42)``, or a name given one): it asks for the same
    numbers in every run, which the XLA generator's default seed happens to give as well."""
    seed = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "seed"), None)
    if type(seed) is ast.Name:
        seed = bindings.assigned_value(seed) or seed
    return type(seed) is ast.Constant and type(seed.value) is int


def _device_randomness(ctx: FileContext, never: set) -> Optional[Tuple[int, str]]:
    """(line, what) of the first random numbers the file surely makes on the XLA device, or None."""
    devices = ctx.get(DeviceValues)
    found: List[Tuple[int, str]] = []
    for ref in ctx.get(SemanticModel).references:
        call = ref.call
        if call is None or id(call) in never:
            continue
        if ref.qualname in _RANDOM:
            device = next((k.value for k in call.keywords if k.arg == "device"), None)
            on_xla = devices.xla_device_value(device) is not None if device is not None else \
                bool(call.args) and ref.qualname.endswith("_like") and surely_on_xla(devices, call.args[0], 3)
            if not on_xla and device is None and ref.qualname in _FROM_OPERAND and call.args:
                on_xla = surely_on_xla(devices, call.args[0], 3)
        elif ref.qualname in _RANDOM_INIT or ref.qualname in _DROPOUT_CALLS:
            on_xla = bool(call.args) and surely_on_xla(devices, call.args[0], 3)
        else:
            continue
        if on_xla:
            found.append((call.lineno, ref.written_prefix(ref.qualname) + "()"))
    index = ctx.get(NodeIndex)
    for call in index.of(ast.Call):
        func = call.func
        if type(func) is ast.Attribute and func.attr in _RANDOM_METHODS and id(call) not in never and \
                surely_on_xla(devices, func.value, 3):
            found.append((call.lineno, f".{func.attr}()"))
    if found:
        return min(found)
    trains = any(type(c.func) is ast.Attribute and c.func.attr in _TRAINING_CALLS and id(c) not in never
                 for c in index.of(ast.Call))
    if not trains:
        return None
    dropout = _first_dropout(ctx, never)
    return (dropout, "dropout") if dropout is not None else None


def _first_dropout(ctx: FileContext, never: set) -> Optional[int]:
    """The first line that sets up dropout that surely runs on the XLA device: a Dropout layer or
    ``F.dropout`` with a constant non-zero rate, or a ``dropout=0.1`` / ``hidden_dropout_prob=0.1`` /
    ``drop_path_rate=0.1`` setting in a call, in a model the file moves to the XLA device (a class of the
    file built and moved, ``Net().to(device)``, or built inside such a class; a module built by a call
    that is moved). A rate from a variable may be 0 and is not counted."""
    index = ctx.get(NodeIndex)
    moved = ctx.get(MovedModules)
    lines = []
    for ref in ctx.get(SemanticModel).references:
        call = ref.call
        if call is None or id(call) in never:
            continue
        if ref.qualname in _DROPOUT_CALLS:
            rate = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "p"), None)
        elif ref.qualname in _DROPOUT_LAYERS:
            rate = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "p"), None)
            if rate is None:
                rate = ast.Constant(0.5)  # the default rate
        else:
            continue
        if _positive(rate) and moved.holds(call):
            lines.append(call.lineno)
    for node in index.of(ast.keyword):
        if node.arg and _DROPOUT.search(node.arg) and _positive(node.value) and id(node.value) not in never and \
                moved.holds(node.value):
            lines.append(node.value.lineno)
    return min(lines) if lines else None


def _positive(node: Optional[ast.AST]) -> bool:
    return type(node) is ast.Constant and type(node.value) in (int, float) and node.value > 0
