"""A job of one process per "host", for the torchrun and multi-host tests of test_runtime_hosts.py.

Run by ``python -m xla_compat.torchrun ... hosts_job.py LOG_DIR MODE [DIR]`` or imported by
``xla_compat.launch``: a gloo loop with a Watchdog (``watched``), a preemptible loop with a
CheckpointManager (``preemptible``), or a loop whose rank 1 raises (``raise``)."""
import datetime
import os
import sys
import time


def job(rank, mode, directory=None):
    import torch
    import torch.distributed as dist

    import xla_compat

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    watch = xla_compat.Watchdog(timeout=4, interval=0.5) if mode == "watched" else None
    manager = xla_compat.CheckpointManager(directory, save_every=1000) if mode == "preemptible" else None
    for step in range(1, 100_000):
        grad = torch.ones(1)
        dist.all_reduce(grad)
        time.sleep(0.1)
        print(f"step {step}", flush=True)
        if mode == "raise" and rank == 1 and step == 3:
            raise ValueError("bad batch at step 3")
        if watch is not None:
            watch.step(step)
        if manager is not None:
            manager.step(step, lambda: {"rank": rank, "step": step})


if __name__ == "__main__":
    import xla_compat

    xla_compat.log_worker(sys.argv[1], echo=True)
    job(int(os.environ["RANK"]), sys.argv[2], *sys.argv[3:])
