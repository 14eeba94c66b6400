"""Workers for test_runtime_workers.py (importable by the processes the launcher spawns)."""
import datetime
import logging
import os
import signal
import sys
import time


def train(rank, failure, at_step):
    """A data-parallel loop over gloo; rank 1 fails at ``at_step`` in the way ``failure`` names."""
    import torch
    import torch.distributed as dist

    import xla_compat

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    print(f"hello from rank {rank} of {dist.get_world_size()}", flush=True)
    logging.warning("a logging record from rank %d", rank)
    dev = xla_compat.device()
    for step in range(1, 9):
        grad = torch.ones(1) * (rank + 1)
        dist.all_reduce(grad)
        loss = (torch.ones(2, device=dev) * step).sum()
        xla_compat.sync()
        print(f"rank {rank} step {step} grad {grad.item():g} loss {loss.item():g}", flush=True)
        if rank == 1 and step == at_step:
            if failure == "raise":
                raise ValueError(f"bad batch at step {step}")
            if failure == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
    print(f"rank {rank} done", flush=True)


def watched(rank, port, world, failure, at_step):
    """Started directly (no launcher): a gloo loop with a Watchdog; rank 1 freezes or sleeps."""
    import torch.distributed as dist

    import xla_compat

    xla_compat.log_worker(sys.argv[1], rank, echo=False)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    _watched_loop(rank, failure, at_step)


def watched_launch(rank, failure, at_step):
    """Under xla_compat.launch: the same loop, its process group set up from the launcher's variables."""
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    _watched_loop(rank, failure, at_step)


def _watched_loop(rank, failure, at_step):
    import torch
    import torch.distributed as dist

    import xla_compat

    watch = xla_compat.Watchdog(timeout=4, interval=0.5)
    for step in range(1, 10_000):
        if rank == 1 and step == at_step + 1 and failure == "sleep":
            time.sleep(3600)
        grad = torch.ones(1)
        dist.all_reduce(grad)
        time.sleep(0.2)
        if rank == 1 and step == at_step + 1 and failure == "freeze":
            os.kill(os.getpid(), signal.SIGSTOP)  # mid-step, as a real freeze: step at_step is the last done
            time.sleep(1)  # the stop takes this thread at its next system call, not at once
        print(f"step {step}", flush=True)
        watch.step(step)


def preemptible(rank, directory):
    """Trains until told to stop: a SIGTERM to the launcher reaches every worker's CheckpointManager."""
    import torch.distributed as dist

    import xla_compat

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    manager = xla_compat.CheckpointManager(directory, save_every=1000)
    for step in range(1, 100_000):
        time.sleep(0.05)
        print(f"step {step}", flush=True)
        manager.step(step, lambda: {"rank": rank, "step": step})


if __name__ == "__main__":
    watched(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
