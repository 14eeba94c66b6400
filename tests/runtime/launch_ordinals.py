"""Worker for test_launch_starts_one_worker_per_device (must be importable by spawned processes)."""
import json
import os


def record(index, out_dir):
    import xla_compat

    rank = xla_compat.global_ordinal()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": xla_compat.world_size()}, f)
