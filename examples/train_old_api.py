"""A TPU training script written against the torch_xla API of 2022-2023.

Everything flake8-xla reports here was current once; `flake8 examples/` shows what changed.
"""
import os

import torch
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.experimental.xla_sharding as xs
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
from torch_xla.experimental.pjrt import using_pjrt

os.environ["XRT_TPU_CONFIG"] = "localservice;0;localhost:51011"
os.environ.setdefault("XLA_USE_BF16", "1")


def train(index, flags):
    device = xm.xla_device()
    world_size = xm.xrt_world_size()
    rank = xm.get_ordinal()
    local_rank = xm.get_local_ordinal(defval=0)
    xm.set_rng_state(flags["seed"] + rank)

    model = FSDP(torch.nn.Linear(128, 10), mark_step_on_finalization=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = xm.RateTracker()
    loader = pl.MpDeviceLoader(flags["loader"], device)

    for step, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()
        xm.optimizer_step(optimizer)
        tracker.add(flags["batch_size"])
        if step % 100 == 0:
            xm.add_step_closure(print, args=(step, local_rank, tracker.rate()))
        xm.mark_step()

    xm.rendezvous("checkpoint")
    xm.save(model.state_dict(), f"model-{world_size}.pt")
    print(met.short_metrics_report(), using_pjrt())


if __name__ == "__main__":
    mesh = xs.Mesh(list(range(8)), (8, 1))
    xmp.spawn(train, args=({"seed": 0, "batch_size": 8, "loader": None},), nprocs=8)
