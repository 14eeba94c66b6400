"""FSDP shard checkpoints on the real torch_xla: per-rank files with shard metadata, consolidated."""
import shutil

import pytest
import torch
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

import xla_compat


def test_save_sharded_then_consolidate(tmp_path) -> None:
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    expected = {k: v.clone() for k, v in plain.state_dict().items()}
    model = FSDP(plain.to(xla_compat.device()))
    prefix = str(tmp_path / "ckpt")

    path = xla_compat.save_sharded(model, prefix, extra={"step": 7})

    assert path == f"{prefix}_rank-00000000-of-00000001.pth"
    shard = torch.load(path, weights_only=False)
    assert shard["step"] == 7 and "shard_metadata" in shard
    assert all(t.device.type == "cpu" for t in shard["model"].values())
    full = xla_compat.consolidate_sharded(prefix, world=1, save_path=str(tmp_path / "full.pt"))  # noqa: XLA208
    assert sorted(full) == sorted(expected)
    for key, value in expected.items():
        assert torch.allclose(full[key], value), key
    assert torch.load(tmp_path / "full.pt", weights_only=False)["model"].keys() == full.keys()


def test_sharded_helpers_reject_wrong_input(tmp_path) -> None:
    with pytest.raises(TypeError, match="needs an XlaFullyShardedDataParallel model"):
        xla_compat.save_sharded(torch.nn.Linear(2, 2), str(tmp_path / "ckpt"))
    with pytest.raises(FileNotFoundError, match="missing checkpoint shards for a world of 2"):
        xla_compat.consolidate_sharded(str(tmp_path / "nothing"), world=2)


def test_consolidating_with_the_wrong_world_size_names_the_right_one(tmp_path) -> None:
    prefix = str(tmp_path / "ckpt")
    xla_compat.save_sharded(FSDP(torch.nn.Linear(2, 2).to(xla_compat.device())), prefix)
    with pytest.raises(FileNotFoundError, match=r"written by a world of \[1\] processes"):
        xla_compat.consolidate_sharded(prefix, world=2)  # noqa: XLA208 (one process)


def test_mixed_up_shard_files_are_rejected(tmp_path) -> None:
    written = xla_compat.save_sharded(FSDP(torch.nn.Linear(2, 2).to(xla_compat.device())), str(tmp_path / "a"))
    # rank 0's shard copied under both names of a two-process checkpoint
    for rank in range(2):
        shutil.copy(written, xla_compat.shard_path(str(tmp_path / "b"), rank, 2))
    with pytest.raises(ValueError, match="holds rank 0 of a world of 1, not rank 0 of 2"):
        xla_compat.consolidate_sharded(str(tmp_path / "b"), world=2)  # noqa: XLA208 (one process)
    torch.save({"weights": torch.ones(1)}, xla_compat.shard_path(str(tmp_path / "c"), 0, 1))
    with pytest.raises(ValueError, match="is not a shard written by save_sharded"):
        xla_compat.consolidate_sharded(str(tmp_path / "c"), world=1)  # noqa: XLA208 (one process)
