"""XLA306 device-before-launch."""
import ast
from typing import Iterator, List, Tuple

from flake8_xla.analysis.devices import RUNTIME_STARTS, placements
from flake8_xla.analysis.control import FlowFacts, Place
from flake8_xla.rules.examples import EXAMPLE_XM
from flake8_xla.analysis.launches import Launches
from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.syntax import NodeIndex
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.versions import Version

# run_multiprocess() refuses an initialized runtime since 2.3; before, the workers just find the devices taken
_CHECKED_SINCE = Version(2, 3)
XMP = "import torch_xla.distributed.xla_multiprocessing as xmp\n"


class DeviceBeforeLaunch(Rule):
    code = "XLA306"
    name = "device-before-launch"
    summary = "The XLA device used in the launching process before torch_xla.launch / xmp.spawn"
    what_it_does = (
        "In a file that starts one process per device (`torch_xla.launch(fn)`, `xmp.spawn(fn)`, "
        "`xla_compat.launch(fn)`), flags uses of the XLA device that run in the launching process before "
        "the launch: `torch_xla.device()`, `torch_xla.devices()`, `xm.xla_device()`, "
        "`xm.get_xla_supported_devices()`, `xla_compat.device()` and tensors or modules placed on it by "
        "name (`.to('xla')`, `device='xla:0'`). It looks at top-level code (the `__main__` block included) "
        "that runs before the launch, or before the call that leads to it, and at code earlier in the "
        "function that calls the launch, including calls of the module's own functions that use the device "
        "(`setup()` returning `torch_xla.device()`). Code in the launched function, or in any other function, is not "
        "reported, and neither are single-process runs (`nprocs=1`, `debug_single_process=True`)."
    )
    why_bad = (
        "Each launched process must set up its own runtime for its own device. On torch_xla 2.3 and newer "
        "the launch checks that the launching process has not done so already and raises `RuntimeError: "
        "Runtime is already initialized. Do not use the XLA device before calling xmp.spawn.`; on older "
        "releases the launching process keeps the devices the workers need. The torch_xla docs: devices "
        "are to be retrieved and used only from within the target function of `torch_xla.launch()`."
    )
    fix_safety = "No automatic fix: the device and what uses it have to move into the launched function."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/learn/pytorch-on-xla-devices.md",
                  "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/_internal/pjrt.py")
    valid = (
        Example("import torch_xla\n\ndef _mp_fn(index):\n    device = torch_xla.device()\n"
                "    model = Net().to(device)\n\nif __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
                title="the device inside the launched function"),
        Example("import torch\nimport torch_xla\n\ndevice = torch_xla.device()\nx = torch.ones(2, device='xla')\n",
                title="a single-process script: nothing is launched"),
        Example("import torch_xla\n\ndef main():\n    torch_xla.launch(_mp_fn)\n    device = torch_xla.device()\n\n"
                "if __name__ == '__main__':\n    main()\n",
                title="after the launch returned"),
        Example("import torch_xla\n\ndevice = torch_xla.device()\n"
                "torch_xla.launch(_mp_fn, debug_single_process=True)\n",
                title="a single-process debug run"),
        Example("import torch\nimport torch_xla\n\nDEVICE = torch.device('xla')\n\ndef _mp_fn(index):\n"
                "    x = torch.ones(2, device=DEVICE)\n\ntorch_xla.launch(_mp_fn)\n",
                title="torch.device('xla') alone does not touch the runtime"),
    )
    invalid = (
        Example(
            "import torch_xla\n\ndevice = torch_xla.device()\n\ndef _mp_fn(index):\n    model = Net().to(device)\n\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            expect=((3, 10, "torch_xla.device() initializes XLA before torch_xla.launch(); move it into the launched "
                            "function",
                     "It initializes the XLA runtime in the launching process before torch_xla.launch(...) on line "
                     "9: the launch then raises 'Runtime is already initialized. Do not use the XLA device before "
                     "calling xmp.spawn.' Get the device inside the function you launch."),),
        ),
        Example(
            EXAMPLE_XM + XMP + "\ndevice = xm.xla_device()\n\ndef _mp_fn(index):\n    model = Net().to(device)\n\n"
            "if __name__ == '__main__':\n    xmp.spawn(_mp_fn)\n",
            target="2.7",
            expect=((4, 10, "xm.xla_device() initializes XLA before xmp.spawn(); move it into the launched function",
                     "It initializes the XLA runtime in the launching process before xmp.spawn(...) on line 10: the "
                     "launch then raises 'Runtime is already initialized. Do not use the XLA device before calling "
                     "xmp.spawn.' Get the device inside the function you launch."),),
            title="xm.xla_device() at top level, xmp.spawn() in the __main__ block",
        ),
        Example(
            "import torch_xla\n\ndef main():\n    dev = torch_xla.device()\n    torch_xla.launch(_mp_fn)\n",
            expect=((4, 11, "torch_xla.device() initializes XLA before torch_xla.launch(); move it into the launched "
                            "function"),),
            title="in the function that launches",
        ),
        Example(
            "import torch\nimport torch_xla\n\nmodel = Net().to('xla')\n\n"
            "def train():\n    torch_xla.launch(_mp_fn)\n\n"
            "if __name__ == '__main__':\n    x = torch.zeros(2, device='xla:0')\n    train()\n",
            expect=((4, 9, ".to('xla') initializes XLA before torch_xla.launch(); move it into the launched function"),
                    (10, 31, "device='xla:0' initializes XLA before torch_xla.launch(); move it into the launched "
                             "function")),
            title="placing on the device by name, before the call that launches",
        ),
        Example(
            EXAMPLE_XM + XMP + "\nif __name__ == '__main__':\n    devices = xm.get_xla_supported_devices()\n"
            "    xmp.spawn(_mp_fn, args=(len(devices),))\n",
            target="2.2",
            expect=((5, 15, "xm.get_xla_supported_devices() initializes XLA before xmp.spawn(); move it into the "
                            "launched function",
                     "It initializes the XLA runtime in the launching process before xmp.spawn(...) on line 6: the "
                     "workers then find the devices taken. Get the device inside the function you launch."),),
            title="torch_xla before 2.3 does not check, the workers fail",
        ),
        Example(
            "import torch_xla\n\n\ndef setup():\n    return torch_xla.device()\n\n\n"
            "if __name__ == '__main__':\n    setup()\n    torch_xla.launch(_mp_fn)\n",
            expect=((9, 5, "setup() initializes XLA before torch_xla.launch(); move it into the launched function",
                     "setup() uses torch_xla.device() on line 5 and so initializes the XLA runtime in the launching "
                     "process before torch_xla.launch(...) on line 10: the launch then raises 'Runtime is already "
                     "initialized. Do not use the XLA device before calling xmp.spawn.' Get the device inside the "
                     "function you launch."),),
            title="through a helper",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        launches = ctx.get(Launches).processes()
        if not launches:
            return
        direct: List[Tuple[ast.AST, str]] = [(ref.call, ref.written_prefix(ref.qualname) + "()")
                                             for ref in ctx.get(SemanticModel).references
                                             if ref.call is not None and ref.qualname in RUNTIME_STARTS]
        direct.extend(placements(ctx.get(NodeIndex), ctx.get(QualifiedNames).qualname))
        if not direct:
            return
        flow = ctx.get(FlowFacts)
        # (node, as spelled, what a helper it calls uses: "" for a direct use)
        uses = [(node, what, "") for node, what in direct] + ctx.get(Launches).helper_calls(direct)
        placed = [(launch.call, launch.spelled, flow.place(launch.call))
                  for launch in sorted(launches, key=lambda launch: _start(launch.call))]
        for node, what, via in sorted(uses, key=lambda u: _start(u[0])):
            at = flow.place(node)
            if at is None:
                continue
            for call, spelled, where in placed:
                if where is None:
                    continue
                if at.scope is ctx.tree:
                    hit = _runs_before_from_top(ctx, node, call, where)
                else:
                    hit = at.scope is where.scope and type(at.scope) is not ast.ClassDef and _before(node, call)
                if hit:
                    yield self.diagnostic(ctx, node, f"{what} initializes XLA before {spelled}(); move it into the "
                                                     "launched function",
                                          help=_help(what, via, spelled, call.lineno, ctx.target.version))
                    break


def _help(what: str, via: str, launch: str, line: int, version: Version) -> str:
    if version >= _CHECKED_SINCE:
        effect = ("the launch then raises 'Runtime is already initialized. Do not use the XLA device before "
                  "calling xmp.spawn.'")
    else:
        effect = "the workers then find the devices taken."
    subject = f"{what} uses {via} and so" if via else "It"
    return (f"{subject} initializes the XLA runtime in the launching process before {launch}(...) on line {line}: "
            f"{effect} Get the device inside the function you launch.")


def _start(node: ast.AST) -> Tuple[int, int]:
    return node.lineno, node.col_offset


def _before(node: ast.AST, launch: ast.AST) -> bool:
    """``node`` is evaluated before ``launch`` finishes: it comes earlier or sits in its arguments."""
    return _start(node) < (launch.end_lineno, launch.end_col_offset)


def _runs_before_from_top(ctx: FileContext, node: ast.AST, launch: ast.Call, where: Place) -> bool:
    """Whether top-level ``node`` runs before ``launch``: before it at top level, before a top-level use
    of the function (or class) that leads to it, or at import when nothing at top level leads to it
    (callers elsewhere import the module first)."""
    if where.scope is ctx.tree:
        return _before(node, launch)
    launches = ctx.get(Launches)
    triggers = launches.triggers(where.owners[0].name)
    if triggers:
        return any(_before(node, trigger) for trigger in triggers)
    return not launches.in_main(node)
