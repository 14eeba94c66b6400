"""XLA103 planned-api-removal."""
from flake8_xla.lifecycle.matching import LifecycleRule, LifecycleUse, planned_message
from flake8_xla.rule import Example


class PlannedApiRemoval(LifecycleRule):
    code = "XLA103"
    name = "planned-api-removal"
    summary = "A torch_xla API the usability plan will deprecate, remove or internalize (upstream replacement exists)"
    kinds = ("function", "class", "decorator")
    states = ("planned",)
    what_it_does = (
        "Flags uses of torch_xla APIs that the PyTorch/XLA usability plan (pytorch/xla#7739 and its "
        "per-API issues) slates for deprecation, removal or internalization but that do not warn "
        "yet, where the target release has an upstream replacement. The message says that the change "
        "is planned, not done, and what to use instead. Planned APIs with no upstream replacement on "
        "the target (`xm.save`, `xm.mesh_reduce`, `xm.optimizer_step`, ...) are XLA903, off by default: "
        "on real code nobody wanted to change a call that still works and has nothing to move to."
    )
    why_bad = (
        "Code written against these APIs today is the code that breaks in a release or two, "
        "and some of them have no drop-in upstream replacement, so migrating early is cheaper. "
        "Because nothing warns yet, this is the only signal. Teams that only want to hear about "
        "APIs that already warn or fail can ignore this one code (`extend-ignore = XLA103`)."
    )
    fix_safety = (
        "Renames with the same meaning (`xm.get_local_ordinal()` -> "
        "`torch_xla.runtime.local_ordinal()`, `xm.set_rng_state()` -> `torch_xla.manual_seed()`) "
        "are safe. A rewrite to a companion (`xla_compat.*`) adds a dependency on it, so it is "
        "unsafe even where the companion keeps upstream's parameters and behaviour "
        "(`add_step_closure`, `get_rng_state`, `RateTracker`); `xm.save`/`rendezvous`/`mesh_reduce`/"
        "`do_on_ordinals`/`optimizer_step`/`reduce_gradients` -> `xla_compat.*` also need a "
        "torch.distributed process group with several processes (the fix summary says so; `save` "
        "takes a path, not a file object). Unsafe too: `xmp.spawn` -> `torch_xla.launch` (no "
        "`nprocs`/`join`/`daemon`). The others need a human."
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
            expect=((3, 8, "xm.get_local_ordinal() is planned for deprecation by the PyTorch/XLA "
                           "usability plan (no warning as of torch_xla 2.9); "
                           "use torch_xla.runtime.local_ordinal() (2.1+)"),),
            fixed=("import torch_xla.runtime as xr\n"
                   "\n"
                   "rank = xr.local_ordinal()\n"),
        ),
        Example(
            "import functools\nimport torch_xla.core.xla_model as xm\n\n"
            "barrier = functools.partial(xm.rendezvous, 'init')\n",
            target="2.7",
            expect=((4, 29, "xm.rendezvous is planned for removal by the PyTorch/XLA usability plan "
                            "(it warns from torch_xla 2.8); use torch.distributed.barrier()"),),
            title="a reference without a call (from 2.8 it is XLA102: it warns)",
            fixed=("import functools\n"
                   "import xla_compat\n"
                   "\n"
                   "barrier = functools.partial(xla_compat.rendezvous, 'init')\n"),
        ),
    )

    def reports(self, use: LifecycleUse) -> bool:
        return use.row.upstream_on(use.target)

    def message(self, use: LifecycleUse) -> str:
        return planned_message(use)
