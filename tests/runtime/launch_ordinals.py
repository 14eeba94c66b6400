"""Worker for test_launch_starts_one_worker_per_device (must be importable by spawned processes)."""
import json
import os


def record(index, out_dir):
    import xla_compat

    rank = xla_compat.global_ordinal()
    try:
        xla_compat.all_gather_object(rank)
        without_group = False
    except RuntimeError as exc:  # two workers and no process group: a clear error, not a hang
        without_group = "need a torch.distributed process group" in str(exc)
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": xla_compat.world_size(), "without_group": without_group}, f)
