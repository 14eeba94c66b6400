"""What the graph rules' pages claim, measured on the real torch_xla (CPU): how many graph executions
an evaluation batch costs for each way of copying results to the host (XLA307)."""
import pytest
import torch
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

import xla_compat

BATCHES = 4


def _executions() -> int:
    data = met.metric_data("ExecuteTime")
    return data[0] if data else 0


def _evaluate(copy) -> int:
    """Graph executions over BATCHES evaluation batches whose results ``copy`` takes to the host."""
    dev = xla_compat.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
    batches = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(BATCHES)]
    xla_compat.sync()
    xm.wait_device_ops()
    before = _executions()
    kept = []
    with torch.no_grad():
        for x, y in batches:
            x, y = x.to(dev), y.to(dev)
            logits = model(x)
            kept.append(copy(logits.softmax(-1), logits.argmax(-1), y))
    xm.wait_device_ops()
    return _executions() - before


@pytest.mark.parametrize("copy, per_batch", [
    (lambda probs, pred, y: (probs.cpu(), pred.cpu()), 2),  # each copy of a computed tensor runs its own graph
    (lambda probs, pred, y: torch.stack([pred.float(), probs.max(-1).values]).cpu(), 1),  # one copy, one graph
    (lambda probs, pred, y: y.cpu(), 0),  # the loader's own input is data already on the device: no graph
    (lambda probs, pred, y: (probs.cpu(), y.cpu()), 1),
], ids=["two computed copies", "one stacked copy", "the loader input", "a computed copy and the input"])
def test_each_copy_of_a_computed_tensor_runs_a_graph_of_its_own(copy, per_batch: int) -> None:
    _evaluate(copy)  # compile first: what is counted is executions, not compilations
    assert _evaluate(copy) == per_batch * BATCHES
