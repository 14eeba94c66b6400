"""Worker for test_runtime_without_group.py (must be importable by spawned processes): two
torch_xla.launch workers and no torch.distributed process group."""
import os


def calls():
    import torch_xla.core.xla_model as xm

    import xla_compat

    return {
        "xm.rendezvous": lambda: xm.rendezvous("ready"),
        "xla_compat.rendezvous": lambda: xla_compat.rendezvous("ready"),
        "xla_compat.mesh_reduce": lambda: xla_compat.mesh_reduce("loss", 1.0, sum),
    }


def call(index, out_dir, name):
    import xla_compat

    rank = xla_compat.global_ordinal()
    with open(os.path.join(out_dir, f"{rank}.reached"), "w") as f:
        f.write(str(xla_compat.world_size()))
    try:
        calls()[name]()
    except Exception as exc:
        with open(os.path.join(out_dir, f"{rank}.raised"), "w") as f:
            f.write(f"{type(exc).__name__}: {exc}")
        raise
    with open(os.path.join(out_dir, f"{rank}.returned"), "w") as f:
        f.write("")
