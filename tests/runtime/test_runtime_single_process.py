"""xla_compat against the real torch_xla on the CPU, in one process: whichever release is installed
(2.9 for the README's test command; tools/runtime_on_release.sh runs the others)."""
import functools
import inspect
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


def _upstream_device():
    """This process's device as the release itself names it (torch_xla.device() is 2.3+)."""
    if hasattr(torch_xla, "device"):
        return torch_xla.device()
    return xm.xla_device()  # noqa: XLA102 -- the API replaced, on releases without the new one


def test_devices_match_upstream() -> None:
    assert xla_compat.device() == _upstream_device() == torch.device("xla:0")
    assert xla_compat.devices() == [torch.device("xla:0")]
    assert xla_compat.real_devices() == ["CPU:0"]
    assert xla_compat.device_type() == xr.device_type() == "CPU"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        upstream_hw = xm.xla_device_hw(_upstream_device())  # noqa: XLA103 -- the API replaced
    assert xla_compat.device_hw() == xla_compat.device_hw(_upstream_device()) == upstream_hw == "CPU"
    with pytest.raises(ValueError, match="is not one of this process's devices"):
        xla_compat.device_hw("xla:5")


@pytest.mark.release(">=2.3", why="torch_xla.devices() and torch_xla.real_devices() are 2.3+")
def test_device_lists_match_the_upstream_functions() -> None:
    assert xla_compat.devices() == torch_xla.devices()
    assert xla_compat.real_devices() == torch_xla.real_devices()


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


@pytest.mark.release(">=2.4", why="xm.mark_step takes reset_scope from 2.4 (test_sync_refuses_reset_scope...)")
def test_sync_passes_reset_scope_on(monkeypatch) -> None:
    calls = []
    for owner, name in ((torch_xla, "sync"), (xm, "mark_step")):
        real = getattr(owner, name, None)
        if real is not None:
            @functools.wraps(real)  # keeps the signature xla_compat inspects
            def spy(*args, _real=real, _name=name, **kwargs):
                calls.append((_name, kwargs.get("reset_scope", True)))
                return _real(*args, **kwargs)
            monkeypatch.setattr(owner, name, spy)
    t = torch.ones(2, device=xla_compat.device()) * 2
    before = _executions()
    xla_compat.sync(reset_scope=False)
    xm.wait_device_ops()
    assert _executions() == before + 1 and t.cpu().tolist() == [2.0, 2.0]
    new_sync = "reset_scope" in inspect.signature(torch_xla.sync).parameters  # 2.8+
    assert calls == [("sync" if new_sync else "mark_step", False)]


@pytest.mark.release("<2.4", why="from 2.4 reset_scope is passed on (test_sync_passes_reset_scope_on)")
def test_sync_refuses_reset_scope_it_cannot_honour() -> None:
    with pytest.raises(NotImplementedError, match=f"torch_xla {torch_xla.__version__} resets the IR scope at every"):
        xla_compat.sync(reset_scope=False)


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


def _double_sum(x):
    return (x * 2).sum()


def _reads_a_value(x):
    y = x * 2
    return y + 1 if y.sum().item() > 0 else y  # executes the graph inside: not one graph


def test_compile_matches_eager_as_decorator_and_as_context() -> None:
    dev = xla_compat.device()
    x = torch.arange(6.0, device=dev)
    assert xla_compat.compile(_double_sum)(x).item() == _double_sum(x).item() == 30.0
    before = _executions()
    with xla_compat.compile():
        y = torch.ones(3, device=dev) * 5
    xm.wait_device_ops()
    assert _executions() == before + 1  # the body's graph ran when the block ended
    assert y.cpu().tolist() == [5.0] * 3


@pytest.mark.release(">=2.8", why="2.5-2.7's compile() calls a limit binding their _XLAC does not have")
def test_compile_enforces_the_graph_limit() -> None:
    dev = xla_compat.device()
    compiled = xla_compat.compile(_double_sum, max_different_graphs=1)
    assert compiled(torch.arange(6.0, device=dev)).item() == 30.0
    assert compiled(torch.arange(6.0, device=dev) + 1).item() == 42.0  # same shape: the same graph
    with pytest.raises(RuntimeError, match="Maximum number of different graphs allowed per function exceeded: 1"):
        compiled(torch.arange(7.0, device=dev))


@pytest.mark.release("<2.8", why="from 2.8 the limit is enforced (test_compile_enforces_the_graph_limit)")
def test_compile_refuses_a_graph_limit_it_cannot_enforce() -> None:
    message = (f"torch_xla {torch_xla.__version__} cannot honour compile(max_different_graphs=...): the release "
               "lacks what enforces it; use a newer torch_xla or drop the argument")
    with pytest.raises(NotImplementedError) as raised:
        xla_compat.compile(_double_sum, max_different_graphs=2)
    assert str(raised.value) == message


@pytest.mark.release(">=2.5", why="execution inside a traced region can be forbidden from 2.5 (_set_allow_execution)")
def test_compile_full_graph_forbids_execution_inside() -> None:
    dev = xla_compat.device()
    assert xla_compat.compile(_double_sum, full_graph=True, name="double_sum")(torch.arange(6.0, device=dev)).item() \
        == 30.0
    with pytest.raises(RuntimeError, match="Unexpected execution"):
        xla_compat.compile(_reads_a_value, full_graph=True)(torch.arange(6.0, device=dev))
    assert xla_compat.compile(_reads_a_value)(torch.arange(3.0, device=dev)).cpu().tolist() == [1.0, 3.0, 5.0]


@pytest.mark.release("<2.5", why="from 2.5 full_graph is honoured (test_compile_full_graph_forbids_execution_inside)")
def test_compile_refuses_full_graph_it_cannot_honour() -> None:
    with pytest.raises(NotImplementedError, match=r"cannot honour compile\(full_graph=\.\.\.\)"):
        xla_compat.compile(_double_sum, full_graph=True)


@pytest.mark.release(">=2.2", why="torch_xla.distributed.spmd is 2.2+ (test_spmd_module_before_2_2)")
def test_spmd_module() -> None:
    import torch_xla.distributed.spmd as xs

    assert xla_compat.spmd() is xs


@pytest.mark.release("<2.2", why="from 2.2 the module is torch_xla.distributed.spmd (test_spmd_module)")
def test_spmd_module_before_2_2() -> None:
    import torch_xla.experimental.xla_sharding as xs

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
    tracker.add(8)
    assert tracker.rate() == 0.0  # no time elapsed: no rate, as upstream; the count waits for the next call
    now[0] = 105.0
    assert tracker.rate() == 0.5 * 8.0 + 0.5 * 10.0
    with pytest.raises(ValueError, match="smooth_factor"):
        xla_compat.RateTracker(smooth_factor=1.0)


def test_rate_tracker_reads_upstreams_smoothing_variable(monkeypatch) -> None:
    monkeypatch.setenv("RATE_TRACKER_SMOOTHING", "0.25")
    now = [0.0]
    tracker = xla_compat.RateTracker(clock=lambda: now[0])
    rates = []
    for count, at in ((10, 1.0), (30, 2.0)):
        tracker.add(count)
        now[0] = at
        rates.append(tracker.rate())
    assert rates == [10.0, 0.75 * 30.0 + 0.25 * 10.0]


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


def test_all_reduce_in_one_process_is_upstreams() -> None:
    t = torch.tensor([1.0, 2.0], device=xla_compat.device())
    reduced = xla_compat.all_reduce("sum", t, scale=0.5)
    upstream = xm.all_reduce(xm.REDUCE_SUM, t, scale=0.5)  # one replica: a copy, unscaled
    assert reduced is not t and reduced.cpu().tolist() == upstream.cpu().tolist() == [1.0, 2.0]
    pair = [t]
    assert xla_compat.all_reduce("max", pair) is pair
    with pytest.raises(ValueError, match=r"unknown reduce_type 'avg'; use one of \['and', 'max', 'min', 'mul', 'or', 'sum'\]"):
        xla_compat.all_reduce("avg", t)


def test_do_on_ordinals_passes_cpu_copies_as_upstream_does() -> None:
    t = torch.arange(3, device=xla_compat.device())
    seen = lambda tensor, n: (tensor.device.type, tensor.tolist(), n)  # noqa: E731
    assert xla_compat.do_on_ordinals(seen, (t, 1)) == xm.do_on_ordinals(seen, (t, 1)) == ("cpu", [0, 1, 2], 1)
