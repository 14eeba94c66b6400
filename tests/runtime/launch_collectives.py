"""Run by test_runtime_multiprocess.py: worker processes that each own a torch_xla CPU device and
talk over a gloo process group. (XLA collectives across processes do not run on the CPU, and a
gloo group created inside torch_xla.launch workers timed out here, so the processes are started
with torch.multiprocessing.)"""
import datetime
import json
import os
import sys


def worker(rank, world, out_dir, port):
    import torch
    import torch.distributed as dist

    import xla_compat

    record = {"rank": rank}
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.tensor([rank], device=xla_compat.device())
    # each process is an XLA world of one: the companions count and reduce over the gloo group
    record["topology"] = [xla_compat.world_size(), xla_compat.global_ordinal(), xla_compat.local_ordinal()]
    mine = torch.tensor([1.0 + rank, 10.0 * (rank + 1)], device=xla_compat.device())
    record["sum"] = xla_compat.all_reduce("sum", mine, scale=0.5).cpu().tolist()
    record["untouched"] = mine.cpu().tolist()
    pair = [torch.full((2, 2), float(rank), device=xla_compat.device()), torch.tensor([rank + 5])]
    returned = xla_compat.all_reduce("max", pair)
    record["max_in_place"] = [returned is pair, pair[0].cpu().tolist(), pair[1].tolist(), pair[0].device.type]
    gathered = xla_compat.all_gather_object({"rank": rank, "t": t})
    record["gathered"] = [[g["rank"], g["t"].device.type, g["t"].tolist()] for g in gathered]
    record["mesh_sum"] = xla_compat.mesh_reduce("sum", rank + 1, sum)
    record["payloads"] = [p.decode() for p in xla_compat.rendezvous("hello", f"r{rank}".encode())]
    record["on_one"] = xla_compat.do_on_ordinals(lambda: f"ran on {rank}", ordinals=(1,))
    xla_compat.save({"written_by": rank}, os.path.join(out_dir, "master.pt"), global_master=True)
    record["master_file"] = torch.load(os.path.join(out_dir, "master.pt"), weights_only=False)["written_by"]
    record["shard_path"] = xla_compat.shard_path("ckpt")
    try:
        xla_compat.do_on_ordinals(print, ordinals=(2,))
    except ValueError as exc:
        record["bad_ordinal"] = str(exc)
    try:
        xla_compat.all_gather_object(lambda: None)
    except TypeError as exc:
        record["unpicklable"] = str(exc)
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(record, f)
    # torch 2.1-2.3's gloo group can deadlock when destroyed: its work thread frees a finished
    # all-gather's tensors, which needs the GIL the destroying thread holds (seen in gdb on 2.1)
    os._exit(0)


if __name__ == "__main__":
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(2, sys.argv[1], int(sys.argv[2])), nprocs=2)
