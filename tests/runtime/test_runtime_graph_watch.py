"""xla_compat.GraphWatch on the real torch_xla (CPU): recompiles, per-step host transfers and CPU fallbacks.

The metrics it reads are process-global and so is the compilation cache, so every test builds its
graphs from a tensor width no other test uses (``_fresh_width``): a graph compiled by an earlier
test can never hide a compilation this test expects, whatever the test order.
"""
import itertools
import os
import subprocess
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator, List

import pytest
import torch
import torch_xla.debug.metrics as met
from torch_xla.distributed.parallel_loader import MpDeviceLoader

import xla_compat
from xla_compat import GraphReport, GraphWarning, GraphWatch
from xla_compat.graph_watch import Finding

_widths = itertools.count(101)  # widths no other runtime test uses

RECOMPILE_CAUSES = (
    "; each compilation stalls training. Typical causes: input shapes that change between steps (pad or bucket "
    "them; DataLoader(drop_last=True) avoids a short last batch) and Python control flow on tensor values (use "
    "torch.where).")
TRANSFER_CAUSES = (
    "so every step waits for the device. Typical causes: .item(), .tolist(), .cpu() or printing a tensor in the "
    "step; read values every N steps instead, inside xla_compat.add_step_closure so the read runs after the step's "
    "graph.")
FALLBACK_CAUSES = (
    "no XLA lowering, so each call copies its inputs to the host and its result back, and when its result shape "
    "follows the data, what comes after it recompiles. Use a static-shape form in the step (e.g. a mask "
    "multiplication or 3-argument torch.where instead of nonzero or boolean indexing) or move the op out of the "
    "step.")


def _fresh_width() -> int:
    return next(_widths)


def _on_device(*shape: int) -> torch.Tensor:
    t = torch.ones(*shape, device=xla_compat.device())
    xla_compat.sync()  # device data from here on, so step 1 does not carry the tensor's creation
    return t


@contextmanager
def _graph_warnings() -> Iterator[List[str]]:
    messages: List[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield messages
    messages.extend(str(w.message) for w in caught if issubclass(w.category, GraphWarning))


def _recompile(step: int, graphs: str = "1 new graph") -> str:
    return f"GraphWatch: {graphs} compiled at step {step}, after 2 warm-up steps" + RECOMPILE_CAUSES


def _host_transfers(first: int, last: int, transfers: int, scalar_reads: int) -> str:
    return (f"GraphWatch: data was copied from the device to the host in each of steps {first}-{last} "
            f"({transfers} transfers, {scalar_reads} of them Python scalar reads), " + TRANSFER_CAUSES)


def _fallback(ops: str, step: int) -> str:
    return f"GraphWatch: {ops} ran on the CPU at step {step}: " + FALLBACK_CAUSES


def test_static_training_loop_stays_silent() -> None:
    width = _fresh_width()
    dev = xla_compat.device()
    model = torch.nn.Sequential(torch.nn.Linear(width, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # momentum: a second warm-up graph
    inputs, labels = torch.randn(8, width).to(dev), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1]).to(dev)
    compiles_before = met.counter_value("UncachedCompile") or 0
    with _graph_warnings() as messages:
        with GraphWatch() as watch:
            for _ in range(6):
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(inputs), labels)
                loss.backward()
                optimizer.step()
                xla_compat.sync()
                watch.step()
    assert (met.counter_value("UncachedCompile") or 0) - compiles_before == 2  # both in the warm-up
    assert messages == []
    assert watch.report() == GraphReport(steps=6, warmup_steps=2)
    assert watch.report().clean
    assert str(watch.report()) == "GraphWatch summary after 6 steps (2 warm-up): clean"


def test_compiles_during_warm_up_are_reported_without_it() -> None:
    x = _on_device(2, _fresh_width())
    with _graph_warnings() as messages:
        with GraphWatch(warmup_steps=0, summary=False) as watch:
            out = (x * 2).sum()
            xla_compat.sync()
            watch.step()
    assert messages == ["GraphWatch: 1 new graph compiled at step 1, after 0 warm-up steps" + RECOMPILE_CAUSES]
    assert watch.report().recompiles == Finding(first_step=1, steps=1, count=1)
    assert out.item() == 2 * x.numel()


def test_changing_shapes_warn_once_at_the_first_recompiling_step() -> None:
    width = _fresh_width()
    x = _on_device(3, width + 8)
    with _graph_warnings() as messages:
        with GraphWatch() as watch:
            for step in range(1, 9):
                n = width if step <= 3 else width + step  # a new length from step 4 on
                out = (x[:, :n] * 2).sum()
                xla_compat.sync()
                watch.step()
    summary = ("GraphWatch summary after 8 steps (2 warm-up): recompiled: 5 graphs in 5 steps, first at step 4")
    assert messages == [_recompile(4), summary]
    assert watch.report() == GraphReport(steps=8, warmup_steps=2, recompiles=Finding(4, 5, 5))
    assert str(watch.report()) == summary
    assert out.item() == 2 * 3 * (width + 8)


@pytest.mark.parametrize("read, scalar_reads", [
    (lambda t: t.item(), 3),
    (lambda t: t.tolist(), 0),
    (lambda t: t.cpu(), 0),
    (lambda t: str(t), 0),  # what print(t) does
], ids=["item", "tolist", "cpu", "print"])
def test_reading_a_value_every_step_warns_about_host_transfers(read, scalar_reads: int) -> None:
    x = _on_device(5, _fresh_width())
    with _graph_warnings() as messages:
        with GraphWatch() as watch:
            for _ in range(8):
                loss = (x * 3).sum()
                xla_compat.sync()
                read(loss)
                watch.step()
    summary = "GraphWatch summary after 8 steps (2 warm-up): host transfers: 6 transfers in 6 steps, first at step 3"
    assert messages == [_host_transfers(3, 5, transfers=3, scalar_reads=scalar_reads), summary]
    assert watch.report() == GraphReport(steps=8, warmup_steps=2, host_transfers=Finding(3, 6, 6))


def test_reading_a_value_every_other_step_stays_silent() -> None:
    x = _on_device(5, _fresh_width())
    with _graph_warnings() as messages:
        with GraphWatch() as watch:
            for step in range(1, 11):
                loss = (x * 3).sum()
                xla_compat.sync()
                if step % 2 == 0:  # throttled logging: the run of transferring steps never reaches 3
                    loss.item()
                watch.step()
    assert messages == []
    assert watch.report().clean


def test_nonzero_in_the_step_warns_about_the_cpu_fallback_not_a_host_transfer() -> None:
    x = _on_device(4, _fresh_width())
    with _graph_warnings() as messages:
        with GraphWatch() as watch:
            for _ in range(8):
                picked = torch.nonzero(x > 0.5)  # noqa: XLA301 -- the fallback under test
                out = (picked * 2).sum()
                xla_compat.sync()
                watch.step()
    summary = ("GraphWatch summary after 8 steps (2 warm-up): aten::nonzero on the CPU: 6 calls in 6 steps, "
               "first at step 3")
    assert messages == [_fallback("aten::nonzero", 3), summary]
    assert watch.report() == GraphReport(steps=8, warmup_steps=2, fallbacks={"aten::nonzero": Finding(3, 6, 6)})
    assert out.item() > 0


def test_fallbacks_before_the_watch_are_not_blamed_on_the_loop_but_new_ones_are() -> None:
    x = _on_device(4, _fresh_width())
    torch.nonzero(x).cpu()  # noqa: XLA301 -- a fallback the counters remember from before the loop
    assert met.counter_value("aten::nonzero")
    with _graph_warnings() as messages:
        with GraphWatch(summary=False) as watch:
            for step in range(1, 7):
                out = (x * 2).sum()
                if step >= 5:
                    out = out + torch.unique(x).sum()  # noqa: XLA301 -- aten::_unique2, from step 5 on
                xla_compat.sync()
                watch.step()
    # the op is new to the step, so the step's graph is new too
    assert messages == [_recompile(5), _fallback("aten::_unique2", 5)]
    assert watch.report() == GraphReport(steps=6, warmup_steps=2, recompiles=Finding(5, 1, 1),
                                         fallbacks={"aten::_unique2": Finding(5, 2, 2)})


def test_each_cause_is_warned_once_and_the_report_counts_every_step() -> None:
    x = _on_device(6, _fresh_width())
    with _graph_warnings() as messages:
        with GraphWatch() as watch:
            for step in range(1, 9):
                n = 4 if step <= 3 else step + 1  # a new length from step 4 on
                picked = torch.nonzero(x[:, :n] > 0.5)  # noqa: XLA301 -- the fallback; its shape follows n
                loss = (picked * 2).sum()
                xla_compat.sync()
                loss.item()
                watch.step()
    summary = ("GraphWatch summary after 8 steps (2 warm-up): recompiled: 10 graphs in 5 steps, first at step 4; "
               "host transfers: 6 transfers in 6 steps, first at step 3; "
               "aten::nonzero on the CPU: 6 calls in 6 steps, first at step 3")
    assert messages == [
        _fallback("aten::nonzero", 3),
        _recompile(4, graphs="2 new graphs"),  # the graphs before and after the fallback both change shape
        _host_transfers(3, 5, transfers=3, scalar_reads=3),
        summary,
    ]
    assert watch.report() == GraphReport(steps=8, warmup_steps=2, recompiles=Finding(4, 5, 10),
                                         host_transfers=Finding(3, 6, 6),
                                         fallbacks={"aten::nonzero": Finding(3, 6, 6)})


def test_clearing_the_metrics_during_the_loop_is_not_a_finding() -> None:
    x = _on_device(3, _fresh_width())
    with _graph_warnings() as messages:
        with GraphWatch() as watch:
            for step in range(1, 7):
                out = (x * 2).sum()
                xla_compat.sync()
                if step == 4:
                    met.clear_all()  # someone else resets the process-global counters
                watch.step()
    assert messages == []
    assert watch.report().clean
    assert out.item() == 2 * x.numel()


def _loader(samples: int, width: int, drop_last: bool) -> torch.utils.data.DataLoader:
    dataset = torch.utils.data.TensorDataset(torch.randn(samples, width), torch.randint(0, 3, (samples,)))
    return torch.utils.data.DataLoader(dataset, batch_size=4, drop_last=drop_last)


@pytest.mark.parametrize("drop_last", [False, True])
def test_watch_steps_over_an_mp_device_loader_flags_the_short_last_batch(drop_last: bool) -> None:
    width = _fresh_width()
    dev = xla_compat.device()
    model = torch.nn.Linear(width, 3).to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = MpDeviceLoader(_loader(22, width, drop_last), dev)  # 5 batches of 4, then one of 2
    seen = 0
    with _graph_warnings() as messages:
        for inputs, labels in xla_compat.watch_steps(loader):  # MpDeviceLoader syncs in its next()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(inputs), labels).backward()
            optimizer.step()
            seen += len(labels)
    if drop_last:
        assert (seen, messages) == (20, [])
    else:
        assert seen == 22
        assert messages == [_recompile(6), "GraphWatch summary after 6 steps (2 warm-up): recompiled: 1 graph in "
                                           "1 step, first at step 6"]


def test_watch_steps_warns_at_the_users_loop_and_summarizes_after_break() -> None:
    x = _on_device(2, _fresh_width())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in xla_compat.watch_steps(range(1, 100)):
            loss = (x * 2).sum()
            xla_compat.sync()
            loss.item()
            if step == 6:
                break
    assert [str(w.message) for w in caught] == [
        _host_transfers(3, 5, transfers=3, scalar_reads=3),
        # the step that broke off is not counted: it ended before the loop fetched another item
        "GraphWatch summary after 5 steps (2 warm-up): host transfers: 3 transfers in 3 steps, first at step 3",
    ]
    assert {w.filename for w in caught} == {__file__}
    assert all(issubclass(w.category, GraphWarning) and issubclass(w.category, UserWarning) for w in caught)


def test_step_warnings_point_at_the_callers_line() -> None:
    x = _on_device(2, _fresh_width())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with GraphWatch(warmup_steps=0) as watch:
            out = (x * 2).sum()
            xla_compat.sync()
            watch.step()
    assert [w.filename for w in caught] == [__file__, __file__]  # the recompile, then the summary
    assert out.item() == 2 * x.numel()


def test_a_graph_warning_turned_into_an_error_stops_the_loop_without_a_summary() -> None:
    width = _fresh_width()
    x = _on_device(2, width + 5)
    steps_run = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("error", category=GraphWarning)
        with pytest.raises(GraphWarning) as raised:
            with GraphWatch() as watch:
                for step in range(1, 6):
                    out = (x[:, :width + step] * 2).sum()  # a new shape every step
                    xla_compat.sync()
                    steps_run = step
                    watch.step()
    assert str(raised.value) == _recompile(3)
    assert steps_run == 3
    assert caught == []  # no summary on top of the error
    assert out.item() == 2 * 2 * (width + 3)


@pytest.mark.parametrize("kwargs, message", [
    ({"warmup_steps": -1}, "warmup_steps must be >= 0, got -1"),
    ({"transfer_window": 0}, "transfer_window must be >= 1, got 0"),
])
def test_invalid_arguments(kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GraphWatch(**kwargs)


def test_importing_xla_compat_does_not_import_torch_xla_but_watching_does() -> None:
    code = (
        "import sys\n"
        "import xla_compat\n"
        "steps = xla_compat.watch_steps([1, 2])  # a generator: nothing runs before the first item\n"
        "print('torch' in sys.modules, 'torch_xla' in sys.modules, issubclass(xla_compat.GraphWarning, UserWarning))\n"
        "watch = xla_compat.GraphWatch()\n"
        "print('torch_xla' in sys.modules, watch.report())\n")
    env = dict(os.environ, PJRT_DEVICE="CPU")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "False False True",
        "True GraphWatch summary after 0 steps (2 warm-up): clean",
    ]
