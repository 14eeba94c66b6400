"""xla_compat against the real torch_xla 2.9 on the CPU, in one process."""
import pickle
import warnings

import pytest
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr

import xla_compat


def test_topology_matches_upstream() -> None:
    assert xla_compat.world_size() == xr.world_size() == 1
    assert xla_compat.global_ordinal() == xr.global_ordinal() == 0
    assert xla_compat.local_ordinal() == xr.local_ordinal() == 0


def test_devices_match_upstream() -> None:
    assert xla_compat.device() == torch_xla.device()
    assert xla_compat.devices() == torch_xla.devices()
    assert xla_compat.real_devices() == torch_xla.real_devices() == ["CPU:0"]
    assert xla_compat.device_type() == xr.device_type() == "CPU"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        upstream_hw = xm.xla_device_hw(torch_xla.device())  # noqa: XLA103 -- the API replaced
    assert xla_compat.device_hw() == xla_compat.device_hw(torch_xla.device()) == upstream_hw == "CPU"
    with pytest.raises(ValueError, match="is not one of this process's devices"):
        xla_compat.device_hw("xla:5")


def _executions() -> int:
    data = met.metric_data("ExecuteTime")
    return data[0] if data else 0


@pytest.mark.parametrize("wait", [False, True])
def test_sync_executes_the_pending_graph(wait: bool) -> None:
    dev = xla_compat.device()
    t = torch.ones(4, device=dev) * 3 + 1
    before = _executions()
    xla_compat.sync(wait=wait)
    xm.wait_device_ops()  # an asynchronous execution records its metric when it finishes
    assert _executions() == before + 1
    assert t.cpu().tolist() == [4.0] * 4


def test_manual_seed_reproduces_random_streams() -> None:
    dev = xla_compat.device()
    xla_compat.manual_seed(1234)
    a = torch.rand(5, device=dev).cpu()
    xla_compat.manual_seed(1234)
    b = torch.rand(5, device=dev).cpu()
    xla_compat.manual_seed(4321)
    c = torch.rand(5, device=dev).cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)
    xla_compat.manual_seed(77)
    assert xla_compat.get_rng_state() == xm.get_rng_state() == 77  # noqa: XLA103 -- the API replaced


def test_compile_matches_eager() -> None:
    dev = xla_compat.device()

    def step(x):
        return (x * 2).sum()

    x = torch.arange(6.0, device=dev)
    enforceable = hasattr(torch_xla._XLAC, "_dynamic_shape_detector_set_max_num_different_graphs_allowed")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = xla_compat.compile(step, max_different_graphs=2)
    assert [str(w.message) for w in caught if "max_different_graphs" in str(w.message)] == (
        [] if enforceable else [f"torch_xla {torch_xla.__version__} cannot enforce max_different_graphs; "
                                "compiling without the limit"])
    assert compiled(x).item() == step(x).item() == 30.0


def test_spmd_module() -> None:
    import torch_xla.distributed.spmd as xs

    assert xla_compat.spmd() is xs


def test_step_closure_runs_after_sync() -> None:
    seen = []
    t = torch.tensor([2.0], device=xla_compat.device()) * 21
    xla_compat.add_step_closure(lambda v: seen.append(v.item()), args=(t,))
    assert seen == []
    xla_compat.sync()
    assert seen == [42.0]


def test_rate_tracker_with_a_fake_clock() -> None:
    now = [100.0]
    tracker = xla_compat.RateTracker(smooth_factor=0.5, clock=lambda: now[0])
    tracker.add(10)
    now[0] = 102.0
    assert tracker.rate() == 5.0
    tracker.add(30)
    now[0] = 104.0
    assert tracker.rate() == 0.5 * 15.0 + 0.5 * 5.0
    assert tracker.global_rate() == 40 / 4.0
    with pytest.raises(ValueError, match="smooth_factor"):
        xla_compat.RateTracker(smooth_factor=1.0)


def _model_and_optimizer(dev):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).to(dev)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_optimizer_step_equals_a_plain_step_in_one_process() -> None:
    dev = xla_compat.device()
    x = torch.ones(2, 3, device=dev)
    results = []
    for use_compat in (True, False):
        model, opt = _model_and_optimizer(dev)
        model(x).sum().backward()
        if use_compat:
            xla_compat.optimizer_step(opt, barrier=True)
        else:
            opt.step()
            xla_compat.sync()
        results.append(model.weight.detach().cpu())
    assert torch.equal(results[0], results[1])


def test_object_collectives_in_one_process() -> None:
    t = torch.arange(3, device=xla_compat.device())
    [gathered] = xla_compat.all_gather_object({"t": t, "n": 1})
    assert gathered["n"] == 1 and gathered["t"].device.type == "cpu" and gathered["t"].tolist() == [0, 1, 2]
    assert xla_compat.mesh_reduce("loss", 2.5, sum) == 2.5
    assert xla_compat.rendezvous("init", b"hi") == [b"hi"]
    assert xla_compat.do_on_ordinals(lambda a, b: a + b, (1, 2), ordinals=(0,)) == 3
    with pytest.raises(ValueError, match=r"ordinals \[5\] are outside the world of 1 processes"):
        xla_compat.do_on_ordinals(lambda: 1, ordinals=(0, 5))
    with pytest.raises(TypeError, match="cannot be pickled"):
        xla_compat.all_gather_object(lambda: None)
    with pytest.raises(TypeError, match="payload must be bytes"):
        xla_compat.rendezvous("x", "not bytes")


def test_save_writes_cpu_copies_atomically(tmp_path) -> None:
    dev = xla_compat.device()
    path = tmp_path / "model.pt"
    xla_compat.save({"w": torch.ones(2, device=dev), "step": 3}, str(path))
    loaded = torch.load(path, weights_only=False)
    assert loaded["step"] == 3 and loaded["w"].device.type == "cpu" and loaded["w"].tolist() == [1.0, 1.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_save_failures_leave_nothing_behind(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        xla_compat.save({"a": 1}, str(tmp_path / "missing" / "m.pt"))
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        xla_compat.save({"fn": lambda: None}, str(tmp_path / "m.pt"))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PermissionError, match="is not writable"):
        xla_compat.save({"a": 1}, "/proc/m.pt")  # not writable, even for root


def test_shard_paths() -> None:
    assert xla_compat.shard_path("ckpt", 1, 4) == "ckpt_rank-00000001-of-00000004.pth"
    with pytest.raises(ValueError, match="outside the world"):
        xla_compat.shard_path("ckpt", 4, 4)
    assert xla_compat.shard_path("ckpt") == "ckpt_rank-00000000-of-00000001.pth"  # rank and world of this process
