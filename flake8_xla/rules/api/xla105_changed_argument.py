"""XLA105 changed-argument."""
from typing import Optional

from flake8_xla.lifecycle.rules import (LifecycleRule, LifecycleUse, indirect_phrase, lifecycle_help,
                                           removal_phrase)
from flake8_xla.rule import Example


class ChangedArgument(LifecycleRule):
    code = "XLA105"
    name = "changed-argument"
    summary = "A torch_xla call whose arguments stopped working or are deprecated"
    kinds = ("argument",)
    states = ("removed", "deprecated", "warns", "unavailable")
    what_it_does = (
        "Flags calls whose arguments the target release does not accept in that form: `defval` of "
        "the ordinal/world-size helpers, `devkind` of `get_xla_supported_devices`, "
        "`xmp.spawn(nprocs=N)`, FSDP's `mark_step_on_finalization=`, FSDPv2's positional `mesh`, "
        "`torch_xla.compile`'s graph limit (`num_different_graphs_allowed=` before 2.8, "
        "`max_different_graphs=` from 2.8, no alias either way), and `xm.get_memory_info()` "
        "without a device (required before 2.5; from 2.8 the default is filled in by the deprecated "
        "`xla_device()`, whose warning the call then shows, though `get_memory_info` itself is not "
        "deprecated). It points at the argument itself, or at the call when the argument is missing."
    )
    why_bad = (
        "These are signature changes without an alias: the call raises `TypeError` or "
        "`ValueError` on the target release, or, for `get_xla_supported_devices('TPU')` on 2.8+, "
        "the string lands in a different parameter."
    )
    fix_safety = (
        "Renaming `mark_step_on_finalization=` to `sync_on_finalization=` and turning FSDPv2's "
        "positional `mesh` into a keyword are safe. Dropping `nprocs` changes how many processes "
        "start and is unsafe."
    )
    valid = (
        Example("import torch_xla\n\ntorch_xla.launch(train, args=(cfg,))\n", title="launch() has no nprocs"),
        Example(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n\nxmp.spawn(train, args=(cfg,), nprocs=1)\n",
            title="nprocs=1 is still accepted",
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\nrank = xm.get_local_ordinal(0)\n",
            target="2.4",
            title="defval still existed in 2.4",
        ),
        Example("import torch_xla\n\nstep = torch_xla.compile(step, max_different_graphs=2)\n",
                title="the graph limit's keyword from 2.8"),
        Example("import torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
                "used = xm.get_memory_info(torch_xla.device())['bytes_used']\n", title="the device passed"),
        Example(
            "from torch_xla.experimental.spmd_fully_sharded_data_parallel import (\n"
            "    SpmdFullyShardedDataParallel as FSDPv2,\n)\n\n"
            "model = FSDPv2(model, mesh=mesh)\n",
            title="mesh as a keyword",
        ),
    )
    invalid = (
        Example(
            "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\n"
            "model = FSDP(model, mark_step_on_finalization=True)\n",
            expect=((3, 21, "FSDP(): `mark_step_on_finalization=` fails since torch_xla 2.8; "
                            "use sync_on_finalization= (2.8+)",
                     "FSDP is torch_xla.distributed.fsdp.XlaFullyShardedDataParallel. The call raises TypeError."),),
            title="a keyword renamed without an alias",
            fixed=("from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
                   "\n"
                   "model = FSDP(model, sync_on_finalization=True)\n"),
        ),
        Example(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n\nxmp.spawn(train, args=(cfg,), nprocs=8)\n",
            expect=((3, 31, "xmp.spawn(): `nprocs` other than None or 1 fails since torch_xla 2.6; omit nprocs",
                     "The call raises ValueError. Omit nprocs to use every device, or pass nprocs=1 to debug "
                     "in one process; companion: xla_compat.launch()."),),
            fixed=("import torch_xla.distributed.xla_multiprocessing as xmp\n"
                   "\n"
                   "xmp.spawn(train, args=(cfg,))\n"),
        ),
        Example(
            "from torch_xla.experimental.spmd_fully_sharded_data_parallel import (\n"
            "    SpmdFullyShardedDataParallel as FSDPv2,\n)\n\n"
            "model = FSDPv2(model, mesh)\n",
            expect=((5, 23, "FSDPv2(): positional `mesh`/`shard_output` fails since torch_xla 2.4; "
                            "pass them as keywords",
                     "FSDPv2 is torch_xla.experimental.spmd_fully_sharded_data_parallel."
                     "SpmdFullyShardedDataParallel. The call raises TypeError. "
                     "Pass them as keywords: mesh=..., shard_output=..."),),
            title="FSDPv2's mesh is keyword-only",
            fixed=("from torch_xla.experimental.spmd_fully_sharded_data_parallel import (\n"
                   "    SpmdFullyShardedDataParallel as FSDPv2,\n"
                   ")\n"
                   "\n"
                   "model = FSDPv2(model, mesh=mesh)\n"),
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\nrank = xm.get_local_ordinal(defval=0)\n",
            expect=((3, 29, "xm.get_local_ordinal(): `defval` fails since torch_xla 2.5; call it without arguments",
                     "The call raises TypeError. Use torch_xla.runtime.local_ordinal() (2.1+)."),),
            fixed=("import torch_xla.core.xla_model as xm\n"
                   "\n"
                   "rank = xm.get_local_ordinal()\n"),
        ),
        Example(
            "import torch_xla\n\nstep = torch_xla.compile(step, num_different_graphs_allowed=2)\n",
            expect=((3, 32, "torch_xla.compile(): `num_different_graphs_allowed=` fails since torch_xla 2.8; "
                            "use max_different_graphs= (2.8+)", "The call raises TypeError."),),
            title="the graph limit's keyword renamed in 2.8 without an alias",
            fixed="import torch_xla\n\nstep = torch_xla.compile(step, max_different_graphs=2)\n",
        ),
        Example(
            "import torch_xla\n\nstep = torch_xla.compile(step, max_different_graphs=2)\n",
            target="2.7",
            expect=((3, 32, "torch_xla.compile(): `max_different_graphs=` fails before torch_xla 2.8; "
                            "drop the argument",
                     "The call raises TypeError. 2.5-2.7 cannot enforce a graph limit (their "
                     "num_different_graphs_allowed= fails when the function is called): drop the argument until "
                     "the target is 2.8."),),
            title="... and the new keyword on an older target",
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\nused = xm.get_memory_info()['bytes_used']\n",
            expect=((3, 8, "xm.get_memory_info(): a call without `device` warns from torch_xla 2.8; "
                           "pass torch_xla.device()",
                     "xm.get_memory_info itself is not deprecated; the call warns indirectly from torch_xla 2.8 "
                     "through xla_device(). Pass the device: get_memory_info(torch_xla.device())."),),
            title="a default filled in by a deprecated call",
        ),
    )

    def message(self, use: LifecycleUse) -> str:
        row = use.row
        assert row.argument is not None
        if use.state == "removed":
            status = f"fails since torch_xla {row.removed_in}"
        elif use.state == "unavailable":
            status = f"fails before torch_xla {row.added_in}"
        elif use.state == "warns":
            status = f"warns from torch_xla {row.warns_in}"
        else:
            status = removal_phrase(row, use.state)
        return f"{use.api}: {row.argument.label} {status}; {use.advice().first}"

    def help(self, use: LifecycleUse) -> Optional[str]:
        row = use.row
        if use.state in ("removed", "unavailable"):
            fact = f"the call raises {row.effect}"
        elif use.state == "warns":
            fact = f"{use.api.removesuffix('()')} itself is not deprecated; the call {indirect_phrase(row)}"
        else:
            fact = None
        return lifecycle_help(use, fact)
