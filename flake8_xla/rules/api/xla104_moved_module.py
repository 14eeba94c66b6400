"""XLA104 moved-module."""
from typing import Optional

from flake8_xla.lifecycle.rules import LifecycleRule, LifecycleUse, lifecycle_help, removal_phrase
from flake8_xla.rule import Example


class MovedModule(LifecycleRule):
    code = "XLA104"
    name = "moved-module"
    summary = "A torch_xla module that moved, was removed, or whose import is deprecated"
    kinds = ("module",)
    states = ("removed", "deprecated")
    what_it_does = (
        "Flags imports of, and references into, torch_xla modules that were moved or removed "
        "(`torch_xla.experimental.xla_sharding`, `torch_xla.experimental.pjrt`, ...) or whose "
        "import is deprecated (`torch_xla.experimental.dynamo_mark_sharding`). A module is "
        "reported once at its import; uses of the imported name are not reported again. For a module "
        "that moved, the message names the new one and the help the release that removed the old one."
    )
    why_bad = (
        "Importing a removed module raises `ModuleNotFoundError` at start-up on the target "
        "release. The deprecated `dynamo_*` imports only warn, but they do nothing: the ops are "
        "registered automatically."
    )
    fix_safety = (
        "Moved modules with the same contents (`experimental.xla_sharding` -> "
        "`distributed.spmd`) are a safe import rewrite; deleting a deprecated `dynamo_*` import "
        "is safe. Removed modules without a replacement need a human."
    )
    valid = (
        Example("import torch_xla.distributed.spmd as xs\n\nmesh = xs.Mesh(ids, shape)\n", title="the new module"),
        Example(
            "try:\n"
            "    import torch_xla.distributed.spmd as xs\n"
            "except ImportError:\n"
            "    import torch_xla.experimental.xla_sharding as xs\n",
            title="compat import under try/except ImportError",
        ),
        Example(
            "import torch_xla.experimental.xla_sharding as xs\n",
            target="2.1",
            title="fine before the deprecation",
        ),
    )
    invalid = (
        Example(
            "import torch_xla.experimental.xla_sharding as xs\n\nmesh = xs.Mesh(ids, shape)\n",
            expect=((1, 8, "torch_xla.experimental.xla_sharding moved to torch_xla.distributed.spmd (2.2+)",
                     "The old module was removed in torch_xla 2.5."),),
            fixed=("import torch_xla.distributed.spmd as xs\n"
                   "\n"
                   "mesh = xs.Mesh(ids, shape)\n"),
        ),
        Example(
            "from torch_xla.experimental.pjrt import world_size, global_ordinal\n",
            expect=((1, 1, "torch_xla.experimental.pjrt moved to torch_xla.runtime (2.1+)",
                     "The old module was removed in torch_xla 2.5. "
                     "Rendezvous moved to xm.xla_rendezvous and spawn to torch_xla.launch."),),
            title="one diagnostic per import statement",
            fixed="from torch_xla.runtime import world_size, global_ordinal\n",
        ),
        Example(
            "import torch_xla.experimental.dynamo_mark_sharding\n",
            expect=((1, 8, "torch_xla.experimental.dynamo_mark_sharding is deprecated since torch_xla 2.5; "
                           "delete the import",
                     "Delete the import: the ops are registered automatically since 2.5."),),
            title="a deprecated import",
            fixed="",
        ),
    )

    def message(self, use: LifecycleUse) -> str:
        if _moved(use):
            return f"{use.api} moved to {use.row.replacement_text}"
        return f"{use.api} {removal_phrase(use.row, use.state)}; {use.advice().first}"

    def help(self, use: LifecycleUse) -> Optional[str]:
        if _moved(use):
            return lifecycle_help(use, f"the old module {removal_phrase(use.row, use.state)}")
        return lifecycle_help(use)


def _moved(use: LifecycleUse) -> bool:
    """A module that moved, on a target that has the new one: the message says where it went."""
    return use.row.fix.kind == "rename_module" and use.advice().first == f"use {use.row.replacement_text}"
