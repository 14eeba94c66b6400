"""XLA221 spmd-with-multiprocess."""
import ast
from typing import Dict, Iterator, List, Optional, Tuple

from flake8_xla.analysis.fsdp import EXAMPLE_XR, LAUNCH, SPAWN, USE_SPMD
from flake8_xla.analysis.flow import FlowFacts, Place, argument, within
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel

INIT_GROUP = frozenset({"torch.distributed.init_process_group",
                        "torch.distributed.distributed_c10d.init_process_group"})
HEADER = "import torch_xla\n" + EXAMPLE_XR


class SpmdWithMultiprocess(Rule):
    code = "XLA221"
    name = "spmd-with-multiprocess"
    summary = "SPMD mixed with one process per device or with the 'xla' process group"
    what_it_does = (
        "Flags `torch_xla.launch(...)`, `xmp.spawn(...)` and `init_process_group('xla', ...)` in a "
        "program that calls `torch_xla.runtime.use_spmd()` where it surely runs with them: in the "
        "same function and not in a branch they are outside of, at top level, or at the top of the "
        "worker function handed to `launch`/`spawn`. `use_spmd()` under a flag (`if args.spmd:`) "
        "stays silent, and so do single-process debug runs (`nprocs=1`, `debug_single_process=True`) "
        "unless `use_spmd()` already ran, which makes `launch` raise."
    )
    why_bad = (
        "SPMD drives every device of the host from one process. `torch_xla.launch` refuses it "
        "(`NotImplementedError: launch function does not support SPMD at this time`); processes "
        "started otherwise inherit SPMD mode and each claims all devices; the XLA process group "
        "asserts `XLA backend is not supported with SPMD. Please use a CPU process group instead.`"
    )
    fix_safety = "No automatic fix: the program's structure changes (one process, a CPU process group)."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/spmd_basic.md",
                  "https://github.com/pytorch/xla/blob/v2.9.0/torch_xla/torch_xla.py")
    valid = (
        Example(HEADER + "\ndef train():\n    pass\n\nif __name__ == '__main__':\n    xr.use_spmd()\n    train()\n",
                title="SPMD: one process that calls the training function"),
        Example(HEADER + "import torch.distributed as dist\n\ndef train():\n    pass\n\n"
                "if __name__ == '__main__':\n    xr.use_spmd()\n    dist.init_process_group('gloo')\n    train()\n",
                title="a CPU process group for host-side coordination"),
        Example(HEADER + "\ndef main(spmd):\n    if spmd:\n        xr.use_spmd()\n        train(0)\n"
                "    else:\n        torch_xla.launch(train)\n",
                title="two modes behind a flag"),
    )
    invalid = (
        Example(
            HEADER + "\ndef train(index):\n    pass\n\nif __name__ == '__main__':\n    xr.use_spmd()\n"
            "    torch_xla.launch(train)\n",
            expect=((9, 5, "torch_xla.launch() in a program that enables SPMD (use_spmd() on line 8): it raises "
                           "NotImplementedError (launch function does not support SPMD at this time); SPMD runs "
                           "one process per host: call the training function directly"),),
        ),
        Example(
            HEADER + "import torch_xla.distributed.xla_multiprocessing as xmp\n\ndef _mp_fn(index):\n"
            "    xr.use_spmd()\n\nif __name__ == '__main__':\n    xmp.spawn(_mp_fn)\n",
            expect=((9, 5, "xmp.spawn() in a program that enables SPMD (use_spmd() on line 6): SPMD runs one "
                           "process per host that drives every device, and cannot be mixed with one process per "
                           "device; call the training function directly"),),
            title="use_spmd() in each worker",
        ),
        Example(
            HEADER + "import torch.distributed as dist\nimport torch_xla.distributed.xla_backend\n\n"
            "xr.use_spmd()\ndist.init_process_group('xla', init_method='xla://')\n",
            expect=((7, 1, "init_process_group('xla') in a program that enables SPMD (use_spmd() on line 6): the "
                           "XLA backend asserts 'XLA backend is not supported with SPMD'; use a CPU process group "
                           "(backend='gloo') for host-side coordination"),),
            title="the XLA process group",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        enables: List[ast.Call] = []
        starts: List[Tuple[ast.Call, str]] = []
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None:
                continue
            if ref.qualname == USE_SPMD:
                enables.append(call)
            elif ref.qualname in LAUNCH:
                starts.append((call, "launch"))
            elif ref.qualname in SPAWN:
                starts.append((call, "spawn"))
            elif ref.qualname in INIT_GROUP and _xla_backend(call):
                starts.append((call, "group"))
        if not enables or not starts:
            return
        workers = {stmt.name: stmt for stmt in ctx.tree.body if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef)}
        for call, kind in starts:
            at = ctx.get(FlowFacts).place(call)
            if at is None:
                continue
            enable = _enabling(call, kind, at, enables, ctx.get(FlowFacts), ctx.tree, workers)
            if enable is not None:
                yield self.diagnostic(ctx, call, _message(kind, enable.lineno))


def _enabling(call: ast.Call, kind: str, at: Place, enables: List[ast.Call], flow: FlowFacts,
              tree: ast.AST, workers: Dict[str, ast.AST]) -> Optional[ast.Call]:
    """The use_spmd() call that surely runs in the same program as ``call``."""
    worker = workers.get(_name(call.args[0])) if kind != "group" and call.args else None
    single = kind != "group" and _single_process(call, kind)
    for enable in sorted(enables, key=lambda c: (c.lineno, c.col_offset)):
        spmd = flow.place(enable)
        if spmd is None:
            continue
        before = (enable.lineno, enable.col_offset) < (call.lineno, call.col_offset)
        if single:
            # a debug run in this process: only launch() checks, and only if SPMD is already on
            if kind == "launch" and before and within(at, spmd):
                return enable
            continue
        if within(at, spmd) or (spmd.scope is tree and not spmd.branches) or \
                (worker is not None and spmd.scope is worker and not spmd.branches):
            return enable
    return None


def _message(kind: str, line: int) -> str:
    where = f"in a program that enables SPMD (use_spmd() on line {line})"
    if kind == "launch":
        return (f"torch_xla.launch() {where}: it raises NotImplementedError (launch function does not support SPMD "
                "at this time); SPMD runs one process per host: call the training function directly")
    if kind == "spawn":
        return (f"xmp.spawn() {where}: SPMD runs one process per host that drives every device, and cannot be "
                "mixed with one process per device; call the training function directly")
    return (f"init_process_group('xla') {where}: the XLA backend asserts 'XLA backend is not supported with SPMD'; "
            "use a CPU process group (backend='gloo') for host-side coordination")


def _name(node: ast.AST) -> Optional[str]:
    return node.id if type(node) is ast.Name else None


def _xla_backend(call: ast.Call) -> bool:
    backend = argument(call, 0, "backend")
    return type(backend) is ast.Constant and type(backend.value) is str and backend.value.lower() == "xla"


def _single_process(call: ast.Call, kind: str) -> bool:
    """``xmp.spawn(fn, nprocs=1)`` or ``torch_xla.launch(fn, debug_single_process=True)``."""
    keyword, index = ("nprocs", 2) if kind == "spawn" else ("debug_single_process", 3)
    value = argument(call, index, keyword)
    return type(value) is ast.Constant and value.value == 1  # True == 1 too
