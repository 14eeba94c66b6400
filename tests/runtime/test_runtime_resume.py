"""xla_compat.CheckpointManager on the real torch_xla (CPU), in worker processes that are really
signalled: SIGTERM at a random step then a restart ends bit-identical to an uninterrupted run, and a
SIGKILL while a checkpoint is being written leaves the previous one to restore."""
import glob
import os
import random
import signal
import subprocess
import sys
import time

import torch

import xla_compat
from xla_compat.resume import PREEMPTED_EXIT_CODE

TRAIN = r'''
import sys
import torch
import xla_compat

directory, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dev = xla_compat.device()
torch.manual_seed(0)
model = torch.nn.Linear(4, 2).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
manager = xla_compat.CheckpointManager(directory, save_every=5, keep=2)
start = 0
found = manager.restore()
if found is not None:
    start, state = found
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    print(f"resumed at {start}", flush=True)
for step in range(start + 1, steps + 1):
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(8, 4, generator=g).to(dev), torch.randn(8, 2, generator=g).to(dev)
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xla_compat.sync()
    print(f"step {step}", flush=True)
    manager.step(step, lambda: {"model": model.state_dict(), "opt": opt.state_dict()})
torch.save({k: v.cpu() for k, v in model.state_dict().items()}, out)
'''

BIG_SAVE = r'''
import sys
import torch
import xla_compat

manager = xla_compat.CheckpointManager(sys.argv[1], save_every=1)
manager.save(1, {"w": torch.ones(4)})
print("committed 1", flush=True)
manager.save(2, {"w": torch.ones(4), "ballast": torch.zeros(128 * 1024 * 1024)})  # 512 MB: slow to write
print("committed 2", flush=True)
'''

ENV = dict(os.environ, PJRT_DEVICE="CPU")


def _start(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)


def _train(directory, out, steps=20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", TRAIN, str(directory), str(steps), str(out)], capture_output=True,
                          text=True, env=ENV, timeout=600)


def test_sigterm_at_a_random_step_then_restart_is_bit_identical(tmp_path) -> None:
    plain = _train(tmp_path / "plain", tmp_path / "plain.pt")
    assert plain.returncode == 0, plain.stderr[-2000:]

    stop_after = random.Random().randint(3, 17)
    proc = _start(TRAIN, str(tmp_path / "ckpt"), "20", str(tmp_path / "resumed.pt"))
    printed = []
    for line in proc.stdout:
        printed.append(line.strip())
        if printed[-1] == f"step {stop_after}":
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=600)
    printed += out.strip().splitlines()
    assert proc.returncode == PREEMPTED_EXIT_CODE, (stop_after, err[-2000:])
    manager = xla_compat.CheckpointManager(str(tmp_path / "ckpt"), save_every=5, signals=())
    stopped_at = manager.committed_steps()[-1]
    # the first boundary after the signal arrived: on a loaded machine the child can be a step or two past
    # the line the parent read when the signal lands, so only "not before it, and before the end" is exact
    assert stop_after <= stopped_at < 20
    assert printed[-1] == f"step {stopped_at}"  # it stopped right after saving

    resumed = _train(tmp_path / "ckpt", tmp_path / "resumed.pt")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert resumed.stdout.startswith(f"resumed at {stopped_at}\n")
    a, b = torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "resumed.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), stop_after
    assert manager.committed_steps() == sorted({5, 10, 15, 20, stopped_at})[-2:], stop_after  # keep=2


def test_sigkill_while_writing_leaves_the_previous_checkpoint(tmp_path) -> None:
    proc = _start(BIG_SAVE, str(tmp_path))
    assert proc.stdout.readline().strip() == "committed 1"
    deadline = time.monotonic() + 120
    while not glob.glob(str(tmp_path / "step-00000002" / ".tmp-*")) and time.monotonic() < deadline:
        time.sleep(0.001)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    manager = xla_compat.CheckpointManager(str(tmp_path), save_every=1, signals=())
    assert manager.committed_steps() == [1]
    assert not os.path.exists(tmp_path / "step-00000002" / "COMMITTED")
    step, state = manager.restore()
    assert step == 1 and torch.equal(state["w"], torch.ones(4))
    manager.save(3, {"w": torch.full((4,), 3.0)})  # the next save clears the half-written step
    assert sorted(os.listdir(tmp_path)) == ["step-00000001", "step-00000003"]


def test_nothing_to_restore_and_bad_arguments(tmp_path) -> None:
    assert xla_compat.CheckpointManager(str(tmp_path / "none"), save_every=5, signals=()).restore() is None
    for save_every, keep in ((0, 2), (5, 0)):
        try:
            xla_compat.CheckpointManager(str(tmp_path), save_every=save_every, keep=keep, signals=())
        except ValueError as exc:
            assert str(exc) == f"save_every and keep must be at least 1, got {save_every} and {keep}"
        else:
            raise AssertionError("accepted")


AGREE = r'''
import sys
import time
import torch.distributed as dist
import xla_compat

rank, port, directory = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
manager = xla_compat.CheckpointManager(directory, save_every=1000)
for step in range(1, 2000):
    time.sleep(0.02)
    print(f"step {step}", flush=True)
    manager.step(step, lambda: {"rank": rank, "step": step})
'''


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_signal_to_one_rank_stops_every_rank_at_the_same_step(tmp_path) -> None:
    port = str(_free_port())
    ranks = [_start(AGREE, str(r), port, str(tmp_path)) for r in (0, 1)]
    for line in ranks[1].stdout:
        if line.strip() == "step 5":
            ranks[1].send_signal(signal.SIGTERM)  # rank 0 is never told
            break
    results = [p.communicate(timeout=120) for p in ranks]
    assert [p.returncode for p in ranks] == [PREEMPTED_EXIT_CODE] * 2, [err[-1500:] for _, err in results]
    manager = xla_compat.CheckpointManager(str(tmp_path), save_every=1000, signals=())
    [step] = manager.committed_steps()
    assert step >= 5
    for r in (0, 1):
        saved = torch.load(tmp_path / f"step-{step:08d}" / f"rank-{r:05d}.pt", weights_only=False)
        assert saved == {"rank": r, "step": step}


SPMD = r'''
import os, sys
import numpy as np
import torch
import xla_compat

xs = xla_compat.spmd()
import torch_xla.runtime as xr
xr.use_spmd()
mesh = xs.Mesh(np.arange(4), (4, 1), ("data", "model"))


def sharded_model():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(xla_compat.device())
    xs.mark_sharding(model.weight, mesh, ("data", None))
    return model


model = sharded_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
manager = xla_compat.CheckpointManager(sys.argv[1], save_every=3)
for step in range(1, 4):
    loss = model(torch.ones(2, 8, device=xla_compat.device())).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xla_compat.sync()
    manager.step(step, model.state_dict)
fresh = sharded_model()
try:
    manager.restore()
except TypeError as exc:
    print(exc)
step, state = manager.restore(into=fresh.state_dict())
fresh.load_state_dict(state)
spec = xla_compat._upstream.torch_xla()._XLAC._get_xla_sharding_spec
print(step, torch.equal(fresh.weight.cpu(), model.weight.cpu()), torch.equal(fresh.bias.cpu(), model.bias.cpu()),
      spec(fresh.weight))
'''


def test_an_spmd_model_is_checkpointed_by_shard_and_restored_into_its_sharding(tmp_path) -> None:
    env = dict(ENV, CPU_NUM_DEVICES="4")
    result = subprocess.run([sys.executable, "-c", SPMD, str(tmp_path)], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    folder = tmp_path / "step-00000003"
    assert result.stdout.splitlines() == [
        f"{folder} holds a distributed (SPMD) checkpoint: pass restore(into=state_dict), the state dict of the "
        "sharded model to load it into",
        "3 True True {devices=[4,1]0,1,2,3}"]
    assert sorted(p.name for p in folder.iterdir()) == ["COMMITTED", "distributed"]
    assert sorted(p.name for p in (folder / "distributed").iterdir()) == [".metadata", "__0_0.distcp"]


FSDP = r'''
import sys
import torch
import xla_compat
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

torch.manual_seed(0)
model = FSDP(torch.nn.Linear(8, 4).to(xla_compat.device()))
opt = torch.optim.Adam(model.parameters(), lr=0.1)
manager = xla_compat.CheckpointManager(sys.argv[1], save_every=2)
state = lambda: {"model": model.state_dict(), "shard_metadata": model.get_shard_metadata(), "opt": opt.state_dict()}
for step in range(1, 3):
    loss = model(torch.ones(2, 8, device=xla_compat.device())).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xla_compat.sync()
    manager.step(step, state)
step, saved = manager.restore()
print(step, sorted(saved), all(torch.equal(saved["model"][k], v.cpu()) for k, v in model.state_dict().items()))
full = manager.consolidate()
torch.manual_seed(0)
plain = torch.nn.Linear(8, 4)  # the same training without FSDP
opt = torch.optim.Adam(plain.parameters(), lr=0.1)
for step in range(1, 3):
    loss = plain(torch.ones(2, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(sorted(full), all(torch.allclose(full[k], v, atol=1e-6) for k, v in plain.state_dict().items()))
'''


def test_an_fsdp_model_checkpoints_each_ranks_shard_with_its_metadata(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-c", FSDP, str(tmp_path)], capture_output=True, text=True, env=ENV,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "2 ['model', 'opt', 'shard_metadata'] True"
    assert lines[1] == "['bias', 'weight'] True"  # consolidated: the unwrapped model's names and values
