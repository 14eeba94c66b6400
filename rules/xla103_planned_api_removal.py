"""XLA103 planned-api-removal."""
from flake8_xla.lifecycle import api_table
from flake8_xla.lifecycle_match import LifecycleRule, LifecycleUse
from flake8_xla.rule import Example

_PLAN_PHRASES = {
    "deprecation": "is planned for deprecation",
    "removal": "is planned for removal",
    "internalization": "is planned to become internal",
    "replacement": "is planned to be replaced",
}


class PlannedApiRemoval(LifecycleRule):
    code = "XLA103"
    name = "planned-api-removal"
    summary = "A torch_xla API the usability plan will deprecate, remove or internalize"
    kinds = ("function", "class", "decorator")
    states = ("planned",)
    what_it_does = (
        "Flags uses of torch_xla APIs that the PyTorch/XLA usability plan (pytorch/xla#7739 and its "
        "per-API issues) slates for deprecation, removal or internalization but that do not warn "
        "yet. The message says that the change is planned, not done, and what to use instead."
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
            expect=((4, 29, "xm.rendezvous is planned for removal by the PyTorch/XLA usability plan "
                            "(no warning as of torch_xla 2.9); use torch.distributed.barrier()"),),
            title="a reference without a call",
            fixed=("import functools\n"
                   "import xla_compat\n"
                   "\n"
                   "barrier = functools.partial(xla_compat.rendezvous, 'init')\n"),
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\nxm.save(model.state_dict(), 'model.pt')\n",
            expect=((3, 1, "xm.save() is planned for removal by the PyTorch/XLA usability plan "
                           "(no warning as of torch_xla 2.9); no upstream replacement; torch.save() "
                           "CPU copies on the master ordinal (torch.distributed.checkpoint under SPMD); "
                           "companion: xla_compat.save()"),),
            title="no upstream replacement",
            fixed=("import xla_compat\n"
                   "\n"
                   "xla_compat.save(model.state_dict(), 'model.pt')\n"),
        ),
    )

    def message(self, use: LifecycleUse) -> str:
        phrase = _PLAN_PHRASES.get(use.row.plan or "removal", "is planned for removal")
        return (f"{use.api} {phrase} by the PyTorch/XLA usability plan "
                f"(no warning as of torch_xla {api_table().latest}); {use.row.advice(use.target)}")
