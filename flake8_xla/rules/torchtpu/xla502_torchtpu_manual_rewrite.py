"""XLA502 torchtpu-manual-rewrite."""
from flake8_xla.migration.matching import MigrationUse
from flake8_xla.migration.rules import MigrationRule
from flake8_xla.rule import Example

XM = "import torch_xla.core.xla_model as xm\n"
XMP = "import torch_xla.distributed.xla_multiprocessing as xmp\n"


class TorchTpuManualRewrite(MigrationRule):
    code = "XLA502"
    name = "torchtpu-manual-rewrite"
    summary = "A torch_xla use whose TorchTPU form needs a human: what it becomes, and what has to be decided"
    what_it_does = (
        "Under `--migrate-to torchtpu`, flags each use of a torch_xla API that has no drop-in TorchTPU form and "
        "says what replaces it and what a human has to decide: `xmp.spawn` / `torch_xla.launch` (torchrun), "
        "`xm.optimizer_step` (DistributedDataParallel), SPMD meshes and `mark_sharding` (DTensor), XLA FSDP "
        "(`fully_shard`), `MpDeviceLoader`, collectives, `xm.save`, `xm.rendezvous`, `torch_xla.compile`, "
        "world size and ordinals (`torch.distributed` after `init_process_group(\"tpu\")`), `initialize_cache`, "
        "metrics, the profiler, Pallas kernels, autocast; and the calls of mechanical rows whose arguments have "
        "no mechanical form (`xm.mark_step(wait=True)`, `xm.xla_device(1)`), or that only probe for a TPU inside "
        "a `try` (`_ = xm.xla_device()`, whose TorchTPU form cannot fail); and every torch_xla name the table has "
        "no row for (also `torch.ops.xla.*`), as having no known counterpart. Names TorchTPU marks experimental "
        "are said to be experimental. The table with its evidence is [docs/torchtpu.md](../torchtpu.md)."
    )
    why_bad = (
        "torch_xla cannot be installed beside TorchTPU (torch 2.9 against torch 2.11-2.15), so each of these "
        "lines fails after the move; and each replacement changes more than a name: who starts the processes "
        "and sets up the process group, where gradients are averaged, how tensors are sharded."
    )
    fix_safety = "No automatic fix: each rewrite changes behaviour or structure that a human has to choose."
    since = "0.2.0"
    references = ("https://github.com/pytorch/xla/issues/9684",
                  "https://docs.cloud.google.com/tpu/docs/pytorch-on-tpu")
    valid = (
        Example("import os\nimport torch.distributed as dist\n\ndist.init_process_group('tpu')\n"
                "rank = dist.get_rank()\nlocal_rank = int(os.environ['LOCAL_RANK'])\n",
                title="TorchTPU's process group under torchrun"),
        Example(XM + "\nxm.mark_step()\n", title="mechanical rewrites are XLA501"),
    )
    invalid = (
        Example(
            XMP + "\ndef _mp_fn(index):\n    train()\n\nif __name__ == '__main__':\n    xmp.spawn(_mp_fn, args=())\n",
            expect=((7, 5, "xmp.spawn() -> torchrun on TorchTPU",
                           "no launcher of its own: export the output of `python -m torch.tpu.distributed`, then "
                           "`torchrun --nproc_per_node=$WORLD_SIZE train.py`; or "
                           "torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=N) (experimental) and "
                           "torch.multiprocessing.spawn; needs a human: the script's entry point changes, and rank "
                           "and process-group set-up become the script's job"),),
        ),
        Example(
            XM + "\nloss.backward()\nxm.optimizer_step(optimizer)\nrank = xm.get_ordinal()\n",
            target="2.6",
            expect=((4, 1, "xm.optimizer_step() -> optimizer.step() under DistributedDataParallel on TorchTPU"),
                    (5, 8, "xm.get_ordinal() -> torch.distributed.get_rank() on TorchTPU")),
            title="the optimizer step and the ordinal",
        ),
        Example(
            XM + "\nxm.mark_step(wait=True)\ndevice = xm.xla_device(1)\n",
            expect=((3, 1, "xm.mark_step() with these arguments has no drop-in TorchTPU form",
                           "delete the call: TorchTPU runs eagerly and has nothing pending to execute; needs a "
                           "human: wait=True blocks until the device is done: torch.accelerator.synchronize() does "
                           "that"),
                    (4, 10, "xm.xla_device() with these arguments has no drop-in TorchTPU form",
                            "torch.device(\"tpu\", 0): one device per process, seen as tpu:0; needs a human: "
                            "another device index (or devkind) has no equivalent: a process drives one device")),
            title="arguments a mechanical rewrite does not take",
        ),
        Example(
            "import torch_xla.distributed.spmd as xs\n\nmesh = xs.Mesh(device_ids, (4, 2), ('data', 'model'))\n"
            "xs.mark_sharding(weight, mesh, ('data', None))\n",
            expect=((3, 8, "xs.Mesh() -> torch.distributed.device_mesh.init_device_mesh() on TorchTPU"),
                    (4, 1, "xs.mark_sharding() -> torch.distributed.tensor.distribute_tensor() on TorchTPU")),
            title="SPMD",
        ),
        Example(
            "import torch\nimport torch_xla.debug.metrics as met\n\nprint(met.counter_value('UncachedCompile'))\n"
            "torch.ops.xla.dynamo_set_buffer_donor_(buffer, True)\n",
            expect=((4, 7, "met.counter_value() has no TorchTPU equivalent; rewrite by hand",
                           "no public equivalent; for compiled code, TORCH_LOGS=recompiles,graph_breaks or "
                           "torch._dynamo.explain; needs a human: the counters have no public TorchTPU counterpart"),
                    (5, 1, "torch.ops.xla.dynamo_set_buffer_donor_() has no known TorchTPU equivalent; rewrite by "
                           "hand",
                           "no TorchTPU counterpart known; needs a human: find what it does and write that with "
                           "torch, torch.distributed or torch.tpu")),
            title="a torch_xla name the table has no row for is reported too",
        ),
        Example(
            XM + "\ntry:\n    device = xm.xla_device()\nexcept RuntimeError:\n    device = torch.device('cpu')\n"
            "model.to(device)\n",
            expect=((4, 14, "xm.xla_device() -> torch.device(\"tpu\", 0) on TorchTPU"),),
            title="a probe with a fallback: its rewrite would never fail, and the fallback never run",
        ),
    )

    def reports(self, use: MigrationUse) -> bool:
        return use.row is not None and not use.mechanical
