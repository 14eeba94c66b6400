"""XLA504 torchtpu-availability-check."""
import ast
from typing import Callable, Iterator, Optional, Tuple

from flake8_xla.analysis.availability import AvailabilityCheck, AvailabilityChecks
from flake8_xla.fixing import Edit, Fix, FixSite
from flake8_xla.fixing.lines import line_ending
from flake8_xla.migration.facts import CHECK, MigrationFacts
from flake8_xla.migration.matching import TORCHTPU
from flake8_xla.migration.rules import migration_diagnostic
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

# the table's availability row, checked against the wheels (spelled out here: the table loads only when migrating)
TPU_CHECK = 'torch.accelerator.is_available() and torch.accelerator.current_accelerator().type == "tpu"'
# why a check of each kind needs a human (none: its rewrite is mechanical)
_HUMAN = {
    "library": "the library's test looks for torch_xla, not for a TPU",
    "sys.modules": "it asks whether torch_xla was imported, not whether a TPU is there",
}
_GUARD_HUMAN = "what the try binds or sets steers the code after it: rewrite that with the test"
_SPEC_HUMAN = "the spec is used for more than a yes or no"
# what each kind of check does once torch_xla is gone ("device type" names its replacement instead)
_ANSWER = {"import guard": "fails", "spec": "finds nothing"}
_STATEMENT_PARENTS = (ast.If, ast.While, ast.Assert, ast.IfExp, ast.Assign, ast.AnnAssign, ast.Return, ast.Call)
TORCH = "import torch\n"


class TorchTpuAvailabilityCheck(Rule):
    code = "XLA504"
    name = "torchtpu-availability-check"
    summary = "A test of whether torch_xla is there, which always fails once the code runs on TorchTPU"
    migration = TORCHTPU
    what_it_does = (
        "Under `--migrate-to torchtpu`, flags the tests a program makes of torch_xla's presence, and says the "
        f"test TorchTPU answers: `{TPU_CHECK}`. They are: an import of torch_xla in a `try` that catches its "
        "failure (`try: import torch_xla...; HAS_XLA = True except ImportError: HAS_XLA = False`), "
        "`importlib.util.find_spec(\"torch_xla\")` (and `pkgutil.find_loader`), `\"torch_xla\" in sys.modules`, "
        "the libraries' own tests (`is_torch_xla_available()`, `is_torch_tpu_available()`, "
        "`is_tpu_available()` imported from `transformers`, `accelerate`, `optimum` or any other module, a relative "
        "import included; a function of that name defined in the file is not flagged at its calls, the test in its "
        "body is) and `device.type == \"xla\"`. A call inside such a `try` made only to see whether "
        "it fails (`_ = xm.xla_device()`) is part of the test: XLA502 says so instead of rewriting it to "
        "`torch.device(\"tpu\", 0)`, which cannot fail."
    )
    why_bad = (
        "torch_xla (torch 2.9) cannot be installed beside TorchTPU (torch 2.11-2.15), so after the move every such "
        "test answers no, and the program silently takes its other branch: it trains on the CPU, or skips the TPU "
        "set-up. `torch.accelerator.is_available()` is what TorchTPU names instead of its internal "
        "`torch.tpu.is_available()` (which raises on torch 2.11+); `current_accelerator().type` tells a TPU from a GPU."
    )
    fix_safety = (
        "Safe fixes under `fix --migrate-to torchtpu`: a `try` that only imports torch_xla (nothing else reads "
        "what it imports), probes, and sets one flag to True, with handlers that only set it to False, becomes "
        "`FLAG = <the test>`, once `torch` is imported before it; `find_spec(\"torch_xla\") is not None`, `is None` "
        "or in a truth test becomes the test (`torch` is imported beside the other imports where the file lacks "
        "it); `device.type == \"xla\"` becomes `== \"tpu\"`. A library's test and `sys.modules` need a human."
    )
    since = "0.3.0"
    references = ("https://github.com/pytorch/xla/issues/9684",
                  "https://docs.pytorch.org/docs/stable/accelerator.html")
    valid = (
        Example(TORCH + "\nHAS_TPU = " + TPU_CHECK + "\n", title="TorchTPU's test"),
        Example("import importlib.util\n\nHAS_JAX = importlib.util.find_spec(\"jax\") is not None\n",
                title="a test for another package"),
    )
    invalid = (
        Example(
            TORCH + "\ntry:\n    import torch_xla.core.xla_model as xm\n    HAS_XLA = True\nexcept ImportError:\n"
            "    HAS_XLA = False\n",
            expect=((4, 5, "import of torch_xla.core.xla_model in try fails on TorchTPU; test torch.accelerator "
                           "instead", TPU_CHECK),),
            fixed=TORCH + "\nHAS_XLA = " + TPU_CHECK + "\n",
            title="a flag set by an import",
        ),
        Example(
            "import importlib.util\n\nif importlib.util.find_spec(\"torch_xla\") is not None:\n    backend = 'tpu'\n",
            expect=((3, 4, "importlib.util.find_spec(\"torch_xla\") finds nothing on TorchTPU; test "
                           "torch.accelerator instead"),),
            fixed="import importlib.util\nimport torch\n\nif " + TPU_CHECK + ":\n    backend = 'tpu'\n",
            title="finding the package",
        ),
        Example(
            TORCH + "\nif device.type == \"xla\":\n    torch.accelerator.synchronize()\n",
            expect=((3, 19, "device.type == \"xla\" -> device.type == \"tpu\" on TorchTPU", None),),
            fixed=TORCH + "\nif device.type == \"tpu\":\n    torch.accelerator.synchronize()\n",
            title="the device type",
        ),
        Example(
            TORCH + "\ntry:\n    import torch_xla.core.xla_model as xm\n    _ = xm.xla_device()\n    HAS_TPU = True\n"
            "except Exception:\n    HAS_TPU = False\n",
            expect=((4, 5, "import of torch_xla.core.xla_model in try fails on TorchTPU; test torch.accelerator "
                           "instead"),),
            fixed=TORCH + "\nHAS_TPU = " + TPU_CHECK + "\n",
            title="a probe for a device",
        ),
        Example(
            "from transformers.utils import is_torch_xla_available\n\nif is_torch_xla_available():\n"
            "    use_tpu = True\n",
            expect=((3, 4, "is_torch_xla_available() is always false on TorchTPU; test torch.accelerator instead",
                           TPU_CHECK + "; needs a human: the library's test looks for torch_xla, not for a TPU"),),
            title="a library's test",
        ),
        Example(
            TORCH + "\ntry:\n    import torch_xla.core.xla_model as xm\n    device = xm.xla_device()\n"
            "except ImportError:\n    device = torch.device('cpu')\n",
            expect=((4, 5, "import of torch_xla.core.xla_model in try fails on TorchTPU; test torch.accelerator "
                           "instead"),),
            title="a fallback a human rewrites",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (d for d, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        for check in ctx.get(AvailabilityChecks):
            human = _HUMAN.get(check.kind) or \
                (_GUARD_HUMAN if check.kind == "import guard" and check.flag is None else "") or \
                (_SPEC_HUMAN if check.kind == "spec" and check.test is None else "")
            if check.kind == "device type":
                becomes = check.written.replace('"xla"', '"tpu"')
                message = f"{check.written} -> {becomes} on TorchTPU"
            else:
                becomes = TPU_CHECK
                answer = _ANSWER.get(check.kind, "is always false")
                message = f"{check.written} {answer} on TorchTPU; test torch.accelerator instead"
            facts = MigrationFacts(check.written, CHECK, becomes + (f"; needs a human: {human}" if human else ""))
            builder = None if human else (lambda site, c=check: _fix(c, site))
            yield migration_diagnostic(self, ctx, check.node, message, facts), builder


def _fix(check: AvailabilityCheck, site: FixSite) -> Optional[Fix]:
    lines = site.lines
    if check.kind == "device type":
        quote = lines.text(check.test)[-1]
        edit = Edit(lines.start(check.test), lines.end(check.test), f"{quote}tpu{quote}")
        return Fix("Test for the tpu device type", (edit,), True)
    if check.kind == "import guard":
        scope = next((r.scope for r in site.references if r.statement is check.node and r.scope is not None), None)
        reached = None if check.read_elsewhere or scope is None else site.importer.plan("torch", check.test, scope)
        if reached is None:
            return None  # the fix loop asks again once the uses of what it imports are rewritten
        torch, planned = reached
        start, end = lines.line_start(check.test.lineno), lines.line_end(check.test.end_lineno)
        if "#" in lines.source[start:end]:
            return None  # a comment would be lost with the statement
        indent = lines.source[start:lines.start(check.test)]
        ending = line_ending(lines.lines[check.test.end_lineno - 1]) or lines.default_ending()
        text = f"{indent}{check.flag} = {TPU_CHECK.replace('torch.', torch + '.')}{ending}"
        return Fix(f"Set {check.flag} from TorchTPU's test", (Edit(start, end, text),), True,
                   () if planned is None else (planned,))
    reached = site.importer.reach("torch", check.ref)
    if reached is None:
        return None
    prefix, planned = reached
    text = TPU_CHECK.replace("torch.", prefix + ".")
    test = check.test
    negated = type(test) is ast.Compare and type(test.ops[0]) is ast.Is
    parent = site.parents.get(id(test))
    bare = isinstance(parent, _STATEMENT_PARENTS) and not (type(parent) is ast.Call and parent.func is test)
    if negated:
        text = f"not ({text})"
    if not bare or negated and type(parent) is ast.UnaryOp:
        text = f"({text})"
    return Fix("Test for a TPU as TorchTPU does", (Edit(lines.start(test), lines.end(test), text),), True,
               () if planned is None else (planned,))

