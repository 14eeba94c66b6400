"""XLA903 planned-removal-without-replacement."""
from typing import Optional

from flake8_xla.lifecycle.rules import LifecycleRule, LifecycleUse, planned_help, planned_message
from flake8_xla.rule import Example


class PlannedRemovalWithoutReplacement(LifecycleRule):
    code = "XLA903"
    name = "planned-removal-without-replacement"
    summary = "A torch_xla API the usability plan will remove, with no upstream replacement on the target"
    off_by_default = True
    level = "note"  # an opt-in heuristic's hint
    kinds = ("function", "class", "decorator")
    states = ("planned",)
    what_it_does = (
        "Flags uses of torch_xla APIs that the PyTorch/XLA usability plan slates for removal or "
        "internalization, that do not warn yet, and that have no upstream replacement on the target "
        "release (`xm.save`, `xm.mesh_reduce`, `xm.optimizer_step`, `xm.add_step_closure`, "
        "`xm.RateTracker`, ..., or `xmp.spawn` on a target before `torch_xla.launch`). The message "
        "names the companion (`xla_compat.*`) that works on every release, or what to do instead where "
        "there is none; the help says what to do without the companion. "
        "Planned APIs that do have an upstream replacement, or that already warn on the target "
        "(`xm.mesh_reduce`/`do_on_ordinals` on 2.8+, through the deprecated `xla_device()` they "
        "call), are XLA103."
    )
    why_bad = (
        "Nothing is wrong today: the call works and there is nothing upstream to move to, which is why "
        "this is off by default (on real code nobody wanted these calls changed yet). Turn it on "
        "(`--extend-select XLA903`, or `--enable-extensions=XLA9` in flake8) to see, ahead of the "
        "removal, every call that will then need the companion or a rewrite."
    )
    fix_safety = (
        "The fix rewrites to the companion (`xla_compat.*`), which adds a dependency on it: it is "
        "unsafe (`--unsafe-fixes`). `xla_compat.save` takes a path, not a file object. The companions "
        "need no process group: without one, several processes meet in torch_xla's own rendezvous and "
        "collectives, as the originals do; with one they use it (for the rendezvous helpers the fix "
        "summary says what that changes)."
    )
    valid = (
        Example("import torch\n\ntorch.save({}, 'model.pt')\n", title="torch.save is not xm.save"),
        Example("import torch_xla.core.xla_model as xm\n\nrank = xm.get_local_ordinal()\n",
                title="an upstream replacement exists: XLA103"),
        Example("import torch_xla.core.xla_model as xm\n\ntotal = xm.mesh_reduce('loss', loss, sum)\n",
                title="it warns on the target (through xla_device(), from 2.8): XLA103"),
    )
    invalid = (
        Example(
            "import torch_xla.core.xla_model as xm\n\nxm.save(model.state_dict(), 'model.pt')\n",
            expect=((3, 1, "xm.save() is planned for removal; use xla_compat.save()",
                     "The PyTorch/XLA usability plan (pytorch/xla#7739) slates it; no warning as of "
                     "torch_xla 2.9. No upstream replacement; torch.save() CPU copies on the master "
                     "ordinal (torch.distributed.checkpoint under SPMD)."),),
            title="no upstream replacement",
            fixed=("import xla_compat\n"
                   "\n"
                   "xla_compat.save(model.state_dict(), 'model.pt')\n"),
        ),
        Example(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n\nxmp.spawn(main, args=())\n",
            target="2.4",
            expect=((3, 1, "xmp.spawn() is planned to be replaced; use xla_compat.launch()",
                     "The PyTorch/XLA usability plan (pytorch/xla#7739) slates it; no warning as of "
                     "torch_xla 2.9. Upstream replacement: torch_xla.launch() (2.5+)."),),
            title="the replacement is newer than the target",
            fixed=("import xla_compat\n"
                   "\n"
                   "xla_compat.launch(main, args=())\n"),
        ),
    )

    def reports(self, use: LifecycleUse) -> bool:
        return not (use.row.upstream_on(use.target) or use.row.warns_on(use.target))

    def message(self, use: LifecycleUse) -> str:
        return planned_message(use)

    def help(self, use: LifecycleUse) -> Optional[str]:
        return planned_help(use)
