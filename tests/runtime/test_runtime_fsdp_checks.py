"""The runtime twins of XLA201/XLA202 on the real torch_xla (CPU, world size 1)."""
import json
import os
import subprocess
import sys

import pytest
import torch
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

import xla_compat

FIX_WRAP = ("FSDP replaces a module's parameters when it wraps it, so an optimizer holding the old ones never "
            "updates the model; build the optimizer after wrapping, from model.parameters()")


def stale_message(stale: int, held: int, wrapper: str = "XlaFullyShardedDataParallel") -> str:
    return (f"check_fsdp_optimizer: {stale} of the optimizer's {held} parameters are not parameters of the "
            f"{wrapper} model: {FIX_WRAP}")


def twice_message(caller: str, sharded: int, held: int) -> str:
    return (f"{caller}: {sharded} of the optimizer's {held} parameters are sharded by XlaFullyShardedDataParallel, "
            "which already reduce-scatters their gradients, so they would be reduced twice; "
            "call optimizer.step() directly")


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def raised(fn, *args) -> str:
    with pytest.raises(ValueError) as info:
        fn(*args)
    return str(info.value)


@pytest.mark.parametrize("on_device", [False, True], ids=["cpu-model", "xla-model"])
def test_optimizer_built_before_wrapping_is_rejected(on_device) -> None:
    module = net().to(xla_compat.device()) if on_device else net()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)  # noqa: XLA201 -- the misuse under test
    model = FSDP(module)  # FSDPv1 replaces the parameters wherever the model was
    assert raised(xla_compat.check_fsdp_optimizer, model, optimizer) == stale_message(4, 4)


def test_optimizer_built_after_wrapping_passes() -> None:
    model = FSDP(net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert xla_compat.check_fsdp_optimizer(model, optimizer) is None
    flat = FSDP(net(), flatten_parameters=True)
    assert xla_compat.check_fsdp_optimizer(flat, torch.optim.AdamW(flat.parameters())) is None


def test_optimizer_built_from_the_unwrapped_module_after_wrapping_is_rejected() -> None:
    module = net()
    params = list(module.parameters())
    model = FSDP(module)
    # FSDPv1 deregisters the wrapped module's parameters, so torch itself refuses the plain form ...
    assert list(module.parameters()) == []
    assert raised(torch.optim.SGD, module.parameters(), 0.1) == "optimizer got an empty parameter list"
    # ... and the check catches the old parameters however they reached the optimizer
    assert raised(xla_compat.check_fsdp_optimizer, model, torch.optim.SGD(params, lr=0.1)) == stale_message(4, 4)
    # partly stale: the wrapper's parameters plus one saved before wrapping
    mixed = torch.optim.SGD([{"params": list(model.parameters())}, {"params": params[:1]}], lr=0.1)
    assert raised(xla_compat.check_fsdp_optimizer, model, mixed) == stale_message(1, 5)


def test_a_model_containing_an_fsdp_wrapper_is_checked_as_fsdp() -> None:
    inner = net()
    early = torch.optim.SGD(inner.parameters(), lr=0.1)  # noqa: XLA201 -- the misuse under test
    model = torch.nn.Sequential(FSDP(inner), torch.nn.Linear(2, 1))
    assert raised(xla_compat.check_fsdp_optimizer, model, early) == stale_message(4, 4)
    assert xla_compat.check_fsdp_optimizer(model, torch.optim.SGD(model.parameters(), lr=0.1)) is None


def test_plain_models_get_the_same_identity_check() -> None:
    model, other = net(), net()
    assert xla_compat.check_fsdp_optimizer(model, torch.optim.SGD(model.parameters(), lr=0.1)) is None
    head_only = torch.optim.SGD(model[2].parameters(), lr=0.1)  # a subset (frozen layers left out) is fine
    assert xla_compat.check_fsdp_optimizer(model, head_only) is None
    assert raised(xla_compat.check_fsdp_optimizer, model, torch.optim.SGD(other.parameters(), lr=0.1)) == (
        "check_fsdp_optimizer: 4 of the optimizer's 4 parameters are not parameters of the Sequential model, "
        "so the optimizer never updates the model with them; build the optimizer from model.parameters()")


def test_is_fsdp_parameter_marks_only_fsdp_v1_shards() -> None:
    module = net().to(xla_compat.device())
    before = list(module.parameters())
    model = FSDP(module)
    after = list(model.parameters())
    assert after and all(map(xla_compat.is_fsdp_parameter, after))
    # the replaced full parameters carry FSDP handles (_sharded_param) but are no shards
    assert all(hasattr(p, "_sharded_param") for p in before)
    assert not any(map(xla_compat.is_fsdp_parameter, before))
    assert not any(map(xla_compat.is_fsdp_parameter, net().parameters()))
    lookalike = torch.nn.Parameter(torch.zeros(2))
    lookalike._is_sharded = True  # the flag alone is not enough
    assert not xla_compat.is_fsdp_parameter(lookalike)


def _fsdp_step_setup():
    dev = xla_compat.device()
    model = FSDP(net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(2, 4, device=dev)).sum().backward()
    return model, optimizer


def test_reduce_gradients_and_optimizer_step_refuse_fsdp_parameters() -> None:
    model, optimizer = _fsdp_step_setup()
    before = [p.detach().cpu().clone() for p in model.parameters()]
    assert raised(xla_compat.reduce_gradients, optimizer) == twice_message("reduce_gradients", 4, 4)
    assert raised(xla_compat.optimizer_step, optimizer) == twice_message("optimizer_step", 4, 4)
    extra = torch.nn.Parameter(torch.zeros(1, device=xla_compat.device()))
    mixed = torch.optim.SGD([{"params": list(model.parameters())}, {"params": [extra]}], lr=0.1)
    assert raised(xla_compat.optimizer_step, mixed) == twice_message("optimizer_step", 4, 5)
    # refused before stepping: nothing changed
    after = [p.detach().cpu() for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    optimizer.step()  # the right call for FSDP
    xla_compat.sync()
    assert not all(torch.equal(a, p.detach().cpu()) for a, p in zip(before, model.parameters()))


def test_reduce_gradients_and_optimizer_step_still_work_on_plain_models() -> None:
    dev = xla_compat.device()
    model = net().to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(2, 4, device=dev)).sum().backward()
    grads = [p.grad.cpu().clone() for p in model.parameters()]
    assert xla_compat.reduce_gradients(optimizer) is None
    assert all(torch.equal(g, p.grad.cpu()) for g, p in zip(grads, model.parameters()))  # one process: no-op
    expected = [(p - 0.1 * g).detach() for p, g in zip([p.cpu() for p in model.parameters()], grads)]
    assert xla_compat.optimizer_step(optimizer, barrier=True, optimizer_args={"closure": lambda: 2.5}) == 2.5
    assert all(torch.allclose(e, p.detach().cpu()) for e, p in zip(expected, model.parameters()))


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PJRT_DEVICE="CPU")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_plain_model_check_does_not_import_torch_xla() -> None:
    result = _python(
        "import sys, torch, xla_compat\n"
        "m = torch.nn.Linear(2, 2)\n"
        "assert xla_compat.check_fsdp_optimizer(m, torch.optim.SGD(m.parameters(), lr=0.1)) is None\n"
        "try:\n"
        "    xla_compat.check_fsdp_optimizer(m, torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1))\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
        "print('torch_xla' in sys.modules)\n")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "check_fsdp_optimizer: 2 of the optimizer's 2 parameters are not parameters of the Linear model, so the "
        "optimizer never updates the model with them; build the optimizer from model.parameters()",
        "False",
    ]


FSDP_V2_SCRIPT = """
import json
import numpy as np
import torch
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2
import xla_compat

xr.use_spmd()
count = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(count), (count, 1), ("fsdp", "model"))


def check(model, optimizer):
    try:
        return xla_compat.check_fsdp_optimizer(model, optimizer)
    except ValueError as exc:
        return str(exc)


record = {}
for where in ("cpu", "xla"):
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    if where == "xla":
        module = module.to("xla")
    early = torch.optim.SGD(module.parameters(), lr=0.1)
    kept = {id(p) for p in module.parameters()}
    model = FSDPv2(module, mesh=mesh)
    record[where] = {
        "kept": sum(id(p) in kept for p in model.parameters()),
        "before": check(model, early),
        "after": check(model, torch.optim.SGD(model.parameters(), lr=0.1)),
        "unwrapped_after": check(model, torch.optim.SGD(module.parameters(), lr=0.1)),
        "sharded": sum(map(xla_compat.is_fsdp_parameter, model.parameters())),
    }
print(json.dumps(record))
"""


@pytest.mark.release(">=2.2", why="FSDPv2 and torch_xla.distributed.spmd are 2.2+")
def test_fsdp_v2_replaces_only_cpu_parameters() -> None:
    result = _python(FSDP_V2_SCRIPT)  # use_spmd() changes the whole process: keep it out of this one
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.splitlines()[-1])
    assert record["cpu"] == {"kept": 0, "before": stale_message(4, 4, "SpmdFullyShardedDataParallel"),
                             "after": None, "unwrapped_after": None, "sharded": 0}
    assert record["xla"] == {"kept": 4, "before": None, "after": None, "unwrapped_after": None, "sharded": 0}
