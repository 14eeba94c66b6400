"""XLA103 planned-api-removal."""
from typing import Optional

from flake8_xla.lifecycle.rules import LifecycleRule, LifecycleUse, planned_help, planned_message
from flake8_xla.rule import Example


class PlannedApiRemoval(LifecycleRule):
    code = "XLA103"
    name = "planned-api-removal"
    summary = ("A torch_xla API the usability plan will deprecate, remove or internalize (upstream replacement "
               "exists, or it already warns through a deprecated call)")
    kinds = ("function", "class", "decorator")
    states = ("planned",)
    what_it_does = (
        "Flags uses of torch_xla APIs that the PyTorch/XLA usability plan (pytorch/xla#7739 and its "
        "per-API issues) slates for deprecation, removal or internalization but that upstream has not "
        "deprecated, where the target release has an upstream replacement, or where a call already "
        "warns on the target: `xm.rendezvous`, `xla_rendezvous`, `mesh_reduce` and `do_on_ordinals` are "
        "not deprecated, but from 2.8 they call the deprecated `xla_device()` and show its warning. "
        "The message says that the change is planned, not done, and what to use instead; the help says "
        "whose plan it is, whether a use warns yet, and the caveats of the replacement. Planned APIs "
        "with no upstream replacement that do not warn on the target (`xm.save`, `xm.optimizer_step`, "
        "...) are XLA903, off by default: on real code nobody wanted to change a call that still works "
        "and has nothing to move to."
    )
    why_bad = (
        "These APIs are the ones the plan removes next, and some of them have no drop-in upstream "
        "replacement, so migrating early is cheaper; the plan is not a schedule, though (upstream now "
        "points to TorchTPU as the successor of PyTorch/XLA, and a planned change may never land in "
        "torch_xla). For most of them nothing warns, so this is the only signal. The rendezvous "
        "helpers do warn from 2.8, but with `xla_device()`'s advice (\"Use torch_xla.device instead\"), "
        "which is not the caller's to follow; measured on torch_xla 2.9, CPU: the warning is "
        "attributed to torch_xla's `xla_model.py:1332`, so Python's default filters hide it and only "
        "`python -W default`, `-X dev` or pytest show it. Teams that only want to hear about APIs "
        "that are deprecated or fail can ignore this one code (`extend-ignore = XLA103`)."
    )
    fix_safety = (
        "Renames with the same meaning (`xm.get_local_ordinal()` -> "
        "`torch_xla.runtime.local_ordinal()`, `xm.set_rng_state()` -> `torch_xla.manual_seed()`) "
        "are safe. A rewrite to a companion (`xla_compat.*`) adds a dependency on it, so it is "
        "unsafe even where the companion keeps upstream's parameters and behaviour "
        "(`add_step_closure`, `get_rng_state`, `RateTracker`), and the message names the companion the "
        "fix writes. `xm.rendezvous`/`mesh_reduce`/`do_on_ordinals` -> `xla_compat.*` need no process "
        "group: without one the workers meet in torch_xla's own rendezvous, as before (so the rewrite "
        "keeps working where the original did); with a torch.distributed process group they meet over "
        "gloo, without the graph syncs torch_xla's rendezvous performs (the fix summary says so). "
        "Upstream's replacement, `torch.distributed.barrier()`, needs that process group (the help "
        "says so). Unsafe too: `xmp.spawn` -> `torch_xla.launch`, for the index "
        "passed to the function: spawn passes the global ordinal, launch under torchrun passes "
        "`LOCAL_RANK`, so on several hosts `if index == 0:` changes meaning (the fix summary says "
        "so; `join`/`daemon` are ignored by every PJRT release and dropped). The others need a human."
    )
    valid = (
        Example("import torch_xla.runtime as xr\n\nrank = xr.local_ordinal()\n", title="the replacement"),
        Example(
            "from lightning.fabric import Fabric\n\nfabric = Fabric()\nfabric.save('ckpt.pt', {})\n",
            title="a save() of another library",
        ),
        Example(
            "import torch\n\ntorch.save({}, 'model.pt')\n",
            title="torch.save is not xm.save",
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\nxm.save(model.state_dict(), 'model.pt')\n",
            title="no upstream replacement: XLA903 (opt-in)",
        ),
    )
    invalid = (
        Example(
            "import torch_xla.core.xla_model as xm\n\nrank = xm.get_local_ordinal()\n",
            expect=((3, 8, "xm.get_local_ordinal() is planned for deprecation; "
                           "use torch_xla.runtime.local_ordinal() (2.1+)",
                     "The PyTorch/XLA usability plan (pytorch/xla#7739) slates it; "
                     "no warning as of torch_xla 2.9."),),
            fixed=("import torch_xla.runtime as xr\n"
                   "\n"
                   "rank = xr.local_ordinal()\n"),
        ),
        Example(
            "import functools\nimport torch_xla.core.xla_model as xm\n\n"
            "barrier = functools.partial(xm.rendezvous, 'init')\n",
            target="2.7",
            expect=((4, 29, "xm.rendezvous is planned for removal; use xla_compat.rendezvous()",
                     "The PyTorch/XLA usability plan (pytorch/xla#7739) slates it; not deprecated, but it "
                     "warns indirectly from torch_xla 2.8 through xla_device(). Upstream replacement: "
                     "torch.distributed.barrier(); it needs a process group: "
                     "torch.distributed.init_process_group('xla', init_method='xla://') in every worker."),),
            title="a reference without a call",
            fixed=("import functools\n"
                   "import xla_compat\n"
                   "\n"
                   "barrier = functools.partial(xla_compat.rendezvous, 'init')\n"),
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\ntotal = xm.mesh_reduce('loss', loss, sum)\n",
            expect=((3, 9, "xm.mesh_reduce() is planned for removal; use xla_compat.mesh_reduce()",
                     "The PyTorch/XLA usability plan (pytorch/xla#7739) slates it; not deprecated, but it "
                     "warns indirectly from torch_xla 2.8 through xla_device(). No working upstream "
                     "replacement: torch.distributed.all_gather_object fails on the 'xla' process group; "
                     "gather over a gloo group and reduce."),),
            title="no upstream replacement, but it warns on the target",
            fixed=("import xla_compat\n"
                   "\n"
                   "total = xla_compat.mesh_reduce('loss', loss, sum)\n"),
        ),
    )

    def reports(self, use: LifecycleUse) -> bool:
        return use.row.upstream_on(use.target) or use.row.warns_on(use.target)

    def message(self, use: LifecycleUse) -> str:
        return planned_message(use)

    def help(self, use: LifecycleUse) -> Optional[str]:
        return planned_help(use)
