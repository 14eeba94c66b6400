"""Object collectives, barrier and rank-aware save across real processes, each with a torch_xla
CPU device, over gloo."""
import json
import os
import pathlib
import socket
import subprocess
import sys

HERE = pathlib.Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_collectives_across_processes(tmp_path) -> None:
    env = dict(os.environ, PJRT_DEVICE="CPU")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, str(HERE / "launch_collectives.py"), str(tmp_path), str(_free_port())],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    for rank, record in enumerate(records):
        assert record["rank"] == rank
        assert record["topology"] == [2, rank, rank]
        assert record["sum"] == [1.5, 15.0]  # (1 + 2) / 2, (10 + 20) / 2
        assert record["untouched"] == [1.0 + rank, 10.0 * (rank + 1)]
        assert record["max_in_place"] == [True, [[1.0, 1.0], [1.0, 1.0]], [6], "xla"]
        assert record["gathered"] == [[0, "cpu", [0]], [1, "cpu", [1]]]
        assert record["mesh_sum"] == 3
        assert record["payloads"] == ["r0", "r1"]
        assert record["on_one"] == ("ran on 1" if rank == 1 else None)
        assert record["master_file"] == 0
        assert record["shard_path"] == f"ckpt_rank-{rank:08d}-of-00000002.pth"
        assert record["bad_ordinal"] == "do_on_ordinals: ordinals [2] are outside the world of 2 processes"
        assert record["unpicklable"].startswith("all_gather_object: the payload cannot be pickled")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.json", "1.json", "master.pt"]


def test_launch_starts_one_worker_per_device(tmp_path) -> None:
    """xla_compat.launch -> torch_xla.launch: real worker processes with the right ordinals."""
    env = dict(os.environ, PJRT_DEVICE="CPU", CPU_NUM_DEVICES="2")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    code = ("import launch_ordinals, sys, xla_compat; "
            "xla_compat.launch(launch_ordinals.record, args=(sys.argv[1],))")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    records = sorted((json.loads(p.read_text()) for p in tmp_path.iterdir()), key=lambda r: r["rank"])
    assert records == [{"rank": 0, "world": 2}, {"rank": 1, "world": 2}]
