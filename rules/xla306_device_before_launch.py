"""XLA306 device-before-launch."""
import ast
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from flake8_xla.analysis.flow import FlowFacts, Place, argument, is_constant, is_main_guard
from flake8_xla.analysis.fsdp import EXAMPLE_XM, LAUNCH, SPAWN
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.versions import Version
from flake8_xla.analysis.semantic import SemanticModel

# Calls that initialize the XLA runtime of the calling process.
DEVICE_CALLS = frozenset({
    "torch_xla.device", "torch_xla.torch_xla.device", "torch_xla.devices", "torch_xla.torch_xla.devices",
    "torch_xla.core.xla_model.xla_device", "torch_xla.core.xla_model.get_xla_supported_devices",
    "xla_compat.device", "xla_compat.runtime.device", "xla_compat.devices", "xla_compat.runtime.devices",
})
_XLA_DEVICE_TEXT = re.compile(r"xla(:\d+)?")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
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
            expect=((3, 10, "torch_xla.device() initializes the XLA runtime in the launching process before "
                            "torch_xla.launch(...) on line 9: the launch then raises 'Runtime is already "
                            "initialized. Do not use the XLA device before calling xmp.spawn.'; get the device "
                            "inside the function you launch"),),
        ),
        Example(
            EXAMPLE_XM + XMP + "\ndevice = xm.xla_device()\n\ndef _mp_fn(index):\n    model = Net().to(device)\n\n"
            "if __name__ == '__main__':\n    xmp.spawn(_mp_fn)\n",
            target="2.7",
            expect=((4, 10, "xm.xla_device() initializes the XLA runtime in the launching process before "
                            "xmp.spawn(...) on line 10: the launch then raises 'Runtime is already initialized. "
                            "Do not use the XLA device before calling xmp.spawn.'; get the device inside the "
                            "function you launch"),),
            title="xm.xla_device() at top level, xmp.spawn() in the __main__ block",
        ),
        Example(
            "import torch_xla\n\ndef main():\n    dev = torch_xla.device()\n    torch_xla.launch(_mp_fn)\n",
            expect=((4, 11, "torch_xla.device() initializes the XLA runtime in the launching process before "
                            "torch_xla.launch(...) on line 5: the launch then raises 'Runtime is already "
                            "initialized. Do not use the XLA device before calling xmp.spawn.'; get the device "
                            "inside the function you launch"),),
            title="in the function that launches",
        ),
        Example(
            "import torch\nimport torch_xla\n\nmodel = Net().to('xla')\n\n"
            "def train():\n    torch_xla.launch(_mp_fn)\n\n"
            "if __name__ == '__main__':\n    x = torch.zeros(2, device='xla:0')\n    train()\n",
            expect=((4, 9, ".to('xla') initializes the XLA runtime in the launching process before "
                           "torch_xla.launch(...) on line 7: the launch then raises 'Runtime is already "
                           "initialized. Do not use the XLA device before calling xmp.spawn.'; get the device "
                           "inside the function you launch"),
                    (10, 31, "device='xla:0' initializes the XLA runtime in the launching process before "
                             "torch_xla.launch(...) on line 7: the launch then raises 'Runtime is already "
                             "initialized. Do not use the XLA device before calling xmp.spawn.'; get the device "
                             "inside the function you launch")),
            title="placing on the device by name, before the call that launches",
        ),
        Example(
            EXAMPLE_XM + XMP + "\nif __name__ == '__main__':\n    devices = xm.get_xla_supported_devices()\n"
            "    xmp.spawn(_mp_fn, args=(len(devices),))\n",
            target="2.2",
            expect=((5, 15, "xm.get_xla_supported_devices() initializes the XLA runtime in the launching process "
                            "before xmp.spawn(...) on line 6: the workers then find the devices taken; get the "
                            "device inside the function you launch"),),
            title="torch_xla before 2.3 does not check, the workers fail",
        ),
        Example(
            "import torch_xla\n\n\ndef setup():\n    return torch_xla.device()\n\n\n"
            "if __name__ == '__main__':\n    setup()\n    torch_xla.launch(_mp_fn)\n",
            expect=((9, 5, "setup() (it uses torch_xla.device() on line 5) initializes the XLA runtime in the "
                           "launching process before torch_xla.launch(...) on line 10: the launch then raises "
                           "'Runtime is already initialized. Do not use the XLA device before calling "
                           "xmp.spawn.'; get the device inside the function you launch"),),
            title="through a helper",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        launches: List[Tuple[ast.Call, str]] = []
        uses: List[Tuple[ast.AST, str]] = []
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None:
                continue
            if ref.qualname in LAUNCH or ref.qualname in SPAWN:
                if not _single_process(call, ref.qualname in SPAWN):
                    launches.append((call, ref.written_prefix(ref.qualname)))
            elif ref.qualname in DEVICE_CALLS:
                uses.append((call, ref.written_prefix(ref.qualname) + "()"))
        if not launches:
            return
        uses.extend(_placements(ctx.tree, ctx.get(FlowFacts)))
        if not uses:
            return
        launched = {call.args[0].id for call, _ in launches if call.args and type(call.args[0]) is ast.Name}
        uses.extend(_helper_calls(ctx.tree, uses, launched, {id(call) for call, _ in launches}))
        flow = ctx.get(FlowFacts)
        placed = [(call, spelled, flow.place(call)) for call, spelled in sorted(launches, key=lambda c: _start(c[0]))]
        entries: Optional[_Entries] = None
        for node, what in sorted(uses, key=lambda u: _start(u[0])):
            at = flow.place(node)
            if at is None:
                continue
            for call, spelled, where in placed:
                if where is None:
                    continue
                if at.scope is ctx.tree:
                    entries = entries or _Entries(ctx.tree)
                    hit = _runs_before_from_top(node, call, where, ctx.tree, entries)
                else:
                    hit = at.scope is where.scope and type(at.scope) is not ast.ClassDef and _before(node, call)
                if hit:
                    yield self.diagnostic(ctx, node, _message(what, spelled, call.lineno, ctx.target.version))
                    break


def _message(what: str, launch: str, line: int, version: Version) -> str:
    if version >= _CHECKED_SINCE:
        effect = ("the launch then raises 'Runtime is already initialized. Do not use the XLA device before "
                  "calling xmp.spawn.'")
    else:
        effect = "the workers then find the devices taken"
    return (f"{what} initializes the XLA runtime in the launching process before {launch}(...) on line {line}: "
            f"{effect}; get the device inside the function you launch")


def _start(node: ast.AST) -> Tuple[int, int]:
    return node.lineno, node.col_offset


def _before(node: ast.AST, launch: ast.AST) -> bool:
    """``node`` is evaluated before ``launch`` finishes: it comes earlier or sits in its arguments."""
    return _start(node) < (launch.end_lineno, launch.end_col_offset)


def _single_process(call: ast.Call, spawn: bool) -> bool:
    """``xmp.spawn(fn, nprocs=1)`` or ``torch_xla.launch(fn, debug_single_process=True)``: no new process."""
    if spawn:
        nprocs = argument(call, 2, "nprocs")
        return type(nprocs) is ast.Constant and nprocs.value == 1
    return is_constant(argument(call, 3, "debug_single_process"), True)


def _runs_before_from_top(node: ast.AST, launch: ast.Call, where: Place, tree: ast.AST, entries: "_Entries") -> bool:
    """Whether top-level ``node`` runs before ``launch``: before it at top level, before a top-level use
    of the function (or class) that leads to it, or at import when nothing at top level leads to it
    (callers elsewhere import the module first)."""
    if where.scope is tree:
        return _before(node, launch)
    triggers = entries.triggers(where.owners[0].name)
    if triggers:
        return any(_before(node, trigger) for trigger in triggers)
    return not entries.in_main(node)


class _Entries:
    """Which top-level code leads to a top-level function or class: its name used at top level, or
    the name of another top-level function or class that uses it (one module, by name)."""

    def __init__(self, tree: ast.AST) -> None:
        self.top: Dict[str, List[ast.AST]] = {}  # name -> its top-level uses (the call when called)
        self.inside: Dict[str, Set[str]] = {}  # top-level def/class name -> names it uses
        self.main = [(stmt.lineno, stmt.end_lineno) for stmt in tree.body if is_main_guard(stmt)]
        stack: List[Tuple[ast.AST, Optional[ast.AST]]] = [(child, tree) for child in ast.iter_child_nodes(tree)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, _DEFS):
                self.inside.setdefault(node.name, set()).update(
                    sub.id for sub in ast.walk(node) if type(sub) is ast.Name and type(sub.ctx) is ast.Load)
                continue
            if type(node) is ast.Name and type(node.ctx) is ast.Load:
                called = type(parent) is ast.Call and parent.func is node
                self.top.setdefault(node.id, []).append(parent if called else node)
            stack.extend((child, node) for child in ast.iter_child_nodes(node))

    def triggers(self, name: str) -> List[ast.AST]:
        reached, frontier = {name}, [name]
        while frontier:
            current = frontier.pop()
            for other, names in self.inside.items():
                if other not in reached and current in names:
                    reached.add(other)
                    frontier.append(other)
        return [use for n in reached for use in self.top.get(n, ())]

    def in_main(self, node: ast.AST) -> bool:
        return any(start <= node.lineno <= end for start, end in self.main)


def _helper_calls(tree: ast.AST, uses: List[Tuple[ast.AST, str]], launched: Set[str],
                  launch_calls: Set[int]) -> List[Tuple[ast.AST, str]]:
    """Calls of the module's functions that use the device (directly or through each other): ``setup()``
    before the launch starts the runtime as surely as its body. Not the launched functions, and not the
    ones that launch themselves (where their own order decides, above)."""
    by_id = {id(node): (node, what) for node, what in uses}
    functions = {node.name: node for node in tree.body if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef)
                 and node.name not in launched}
    inside = {name: list(ast.walk(fn)) for name, fn in functions.items()}
    inside = {name: nodes for name, nodes in inside.items() if not any(id(n) in launch_calls for n in nodes)}
    reason: Dict[str, str] = {}
    for name, nodes in inside.items():
        found = next((by_id[id(n)] for n in nodes if id(n) in by_id), None)
        if found is not None:
            reason[name] = f"{found[1]} on line {found[0].lineno}"
    changed = True
    while changed:  # a helper that calls a helper that uses the device
        changed = False
        for name, nodes in inside.items():
            if name in reason:
                continue
            callee = next((n.func.id for n in nodes if type(n) is ast.Call and type(n.func) is ast.Name
                           and n.func.id in reason), None)
            if callee is not None:
                reason[name] = f"{callee}() on line {functions[callee].lineno}"
                changed = True
    return [(node, f"{node.func.id}() (it uses {reason[node.func.id]})") for node in ast.walk(tree)
            if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in reason]


def _placements(tree: ast.AST, flow: FlowFacts) -> Iterator[Tuple[ast.AST, str]]:
    """``.to('xla')`` calls and ``device='xla:0'`` keywords (also ``torch.device('xla')`` there)."""
    for node in ast.walk(tree):
        if type(node) is not ast.Call:
            continue
        func = node.func
        if type(func) is ast.Attribute and func.attr == "to" and node.args:
            text = _xla_text(node.args[0], flow)
            if text:
                yield node, f".to({text})"
                continue
        for keyword in node.keywords:
            text = _xla_text(keyword.value, flow) if keyword.arg == "device" else None
            if text:
                yield keyword.value, f"device={text}"
                break


def _xla_text(node: ast.AST, flow: FlowFacts) -> Optional[str]:
    """How an XLA device written out by name reads (``'xla:0'``, ``torch.device('xla', 0)``), else None."""
    name = node
    if type(node) is ast.Call and node.args and flow.qualname(node.func) == "torch.device":
        name = node.args[0]
    if type(name) is not ast.Constant or type(name.value) is not str or not _XLA_DEVICE_TEXT.fullmatch(name.value):
        return None
    return ast.unparse(node)
