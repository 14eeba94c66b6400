"""XLA221 spmd-with-multiprocess."""
import ast
from typing import Iterator, List, Optional, Tuple

from flake8_xla.analysis.fsdp import USE_SPMD
from flake8_xla.rules.examples import EXAMPLE_XR
from flake8_xla.analysis.launches import LAUNCH, SPAWN, Launches
from flake8_xla.analysis.control import FlowFacts, Place, within
from flake8_xla.analysis.syntax import argument
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
            expect=((9, 5, "torch_xla.launch() under SPMD raises NotImplementedError; call the training "
                           "function directly",
                     "use_spmd() on line 8 enables SPMD, and launch() raises NotImplementedError (launch "
                     "function does not support SPMD at this time): SPMD runs one process per host."),),
        ),
        Example(
            HEADER + "import torch_xla.distributed.xla_multiprocessing as xmp\n\ndef _mp_fn(index):\n"
            "    xr.use_spmd()\n\nif __name__ == '__main__':\n    xmp.spawn(_mp_fn)\n",
            expect=((9, 5, "xmp.spawn() under SPMD starts one process per device; call the training function "
                           "directly",
                     "use_spmd() on line 6 enables SPMD, which runs one process per host that drives every "
                     "device and cannot be mixed with one process per device."),),
            title="use_spmd() in each worker",
        ),
        Example(
            HEADER + "import torch.distributed as dist\nimport torch_xla.distributed.xla_backend\n\n"
            "xr.use_spmd()\ndist.init_process_group('xla', init_method='xla://')\n",
            expect=((7, 1, "init_process_group('xla') under SPMD fails; use backend='gloo' for host-side "
                           "coordination",
                     "use_spmd() on line 6 enables SPMD, and the XLA backend asserts 'XLA backend is not "
                     "supported with SPMD'. Use a CPU process group (backend='gloo') for host-side "
                     "coordination."),),
            title="the XLA process group",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        enables = [ref.call for ref in ctx.get(SemanticModel).references
                   if ref.call is not None and ref.qualname == USE_SPMD]
        if not enables:
            return
        launches = ctx.get(Launches)
        workers = {stmt.name: stmt for stmt in ctx.tree.body if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef)}
        # (call, kind, the top-level function it launches, whether it stays in this process)
        starts: List[Tuple[ast.Call, str, Optional[ast.AST], bool]] = [
            (launch.call, "launch" if launch.qualname in LAUNCH else "spawn",
             workers.get(launch.target.id) if launch.target is not None else None, launches.single_process(launch))
            for launch in launches.of(LAUNCH | SPAWN)]
        starts.extend((ref.call, "group", None, False) for ref in ctx.get(SemanticModel).references
                      if ref.call is not None and ref.qualname in INIT_GROUP and _xla_backend(ref.call))
        flow = ctx.get(FlowFacts)
        for call, kind, worker, single in sorted(starts, key=lambda s: (s[0].lineno, s[0].col_offset)):
            at = flow.place(call)
            if at is None:
                continue
            enable = _enabling(call, kind, at, enables, flow, ctx.tree, worker, single)
            if enable is not None:
                message, help = _message(kind, enable.lineno)
                yield self.diagnostic(ctx, call, message, help=help)


def _enabling(call: ast.Call, kind: str, at: Place, enables: List[ast.Call], flow: FlowFacts,
              tree: ast.AST, worker: Optional[ast.AST], single: bool) -> Optional[ast.Call]:
    """The use_spmd() call that surely runs in the same program as ``call``."""
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


def _message(kind: str, line: int) -> Tuple[str, str]:
    """(message, help) for a multi-process start in a program whose use_spmd() is on ``line``."""
    enabled = f"use_spmd() on line {line} enables SPMD"
    if kind == "launch":
        return ("torch_xla.launch() under SPMD raises NotImplementedError; call the training function directly",
                f"{enabled}, and launch() raises NotImplementedError (launch function does not support SPMD at "
                "this time): SPMD runs one process per host.")
    if kind == "spawn":
        return ("xmp.spawn() under SPMD starts one process per device; call the training function directly",
                f"{enabled}, which runs one process per host that drives every device and cannot be mixed with "
                "one process per device.")
    return ("init_process_group('xla') under SPMD fails; use backend='gloo' for host-side coordination",
            f"{enabled}, and the XLA backend asserts 'XLA backend is not supported with SPMD'. Use a CPU process "
            "group (backend='gloo') for host-side coordination.")


def _xla_backend(call: ast.Call) -> bool:
    backend = argument(call, 0, "backend")
    return type(backend) is ast.Constant and type(backend.value) is str and backend.value.lower() == "xla"
