"""python -m xla_compat.trace and xla_compat.trace() on the real torch_xla (CPU): each event at its line.

Every traced program runs in a process of its own (the compilation cache and the counters are
process-wide), except the context-manager test, whose graphs use a width no other test uses.
"""
import json
import os
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from flake8_xla.engine import all_rules

REPO = Path(__file__).resolve().parents[2]
RELEASE = metadata.version("torch_xla")
LIBRARY_LINE = re.compile(r"(\S+\.py):\d+")  # in an XLA310 help: "At torch_xla/x.py:51, ..."
HEADER = """\
import torch
import xla_compat
import torch_xla.core.xla_model as xm

torch.manual_seed(0)
device = xla_compat.device()
model = torch.nn.Linear(16, 4).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = torch.randn(64, 16)
"""  # 9 lines: a program's own lines start at 10


def trace(tmp_path: Path, source: str, *options: str, name: str = "train.py",
          args: Tuple[str, ...] = ()) -> Tuple[dict, subprocess.CompletedProcess]:
    """Trace ``source`` written as ``name`` in ``tmp_path``; the json document and the process."""
    script = tmp_path / name
    script.write_text(source)
    out = tmp_path / "trace.json"
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "xla_compat.trace", "--format", "json", "--output", str(out),
                           *options, str(script), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert out.exists(), done.stderr
    return json.loads(out.read_text()), done


def rows(document: dict, code: Optional[str] = None) -> List[tuple]:
    return [(f["code"], f["filename"], f["line"], f["message"], f["severity"], f["help"])
            for f in document["findings"] if code is None or f["code"] == code]


RUN_ONLY = [(rule, example, valid) for rule in all_rules() if rule.run_only
            for valid, examples in ((True, rule.valid), (False, rule.invalid)) for example in examples]


@pytest.mark.release(">=2.4", why="the rule pages' examples use torch_xla.device() and torch_xla.sync() (2.4+)")
@pytest.mark.parametrize("rule, example, valid", RUN_ONLY,
                         ids=[f"{r.code}-{'valid' if v else 'invalid'}" for r, _, v in RUN_ONLY])
def test_run_only_rule_examples_are_what_the_trace_reports(tmp_path, rule, example, valid):
    document, done = trace(tmp_path, example.source, name="example.py")
    assert done.returncode == 0, done.stderr
    found = [(f["line"], f["column"], f["message"], f["help"]) for f in document["findings"] if f["code"] == rule.code]
    expected = [] if valid else list(example.expect)
    if not RELEASE.startswith("2.9"):  # the pages show 2.9's library lines; other releases number theirs otherwise
        found, expected = ([tuple(LIBRARY_LINE.sub(r"\1:N", part) if isinstance(part, str) else part for part in row)
                            for row in rows_] for rows_ in (found, expected))
    # an expectation of three items leaves the help unpinned
    assert [f[:len(e)] for f, e in zip(found, expected)] == expected and len(found) == len(expected)


TRAINING = HEADER + """\
for start in range(0, 64, 8):
    loss = model(dataset[start:start + 8].to(device)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if loss > 100:
        print("diverged")
    print(f"loss {loss.item():.4f}")
    keep = torch.nonzero(loss.reshape(1) > 0)
    xla_compat.sync()
    if start % 32 == 0:
        print("checkpoint", model.weight.sum().item())
print("done", float(loss))
"""


def test_a_training_loop_reports_each_read_at_its_line_with_how_often(tmp_path):
    document, done = trace(tmp_path, TRAINING)
    assert done.returncode == 0, done.stderr
    assert rows(document) == [
        ("XLA304", "train.py", 15, "a truth test on a tensor read its value to the host on every step", "warning",
         "On 7 of 7 steps, 1 per step."),
        ("XLA303", "train.py", 17, ".item() read a device value to the host on every step", "warning",
         "On 7 of 7 steps, 1 per step."),
        ("XLA301", "train.py", 18, "aten::nonzero ran on the CPU (no XLA lowering) on every step", "warning",
         "On 7 of 7 steps, 1 per step."),
        # every fourth step: a throttled read is a note, as the linter leaves `if step % N == 0:` alone
        ("XLA303", "train.py", 21, ".item() read a device value to the host on some steps", "note",
         "On 2 of 7 steps, 1 per step."),
        ("XLA307", "train.py", 22, "float() read a device value to the host after the last step", "note",
         "Once after the last step."),
    ]
    assert document["step_boundaries"] == 8 and document["steps"] == 7 and not document["stopped_early"]
    # the lines that made torch calls in full steps (xla_compat.sync() on line 19 makes one on 2.9, none on 2.5)
    assert list(document["lines_ran"]) == [str(tmp_path / "train.py")]
    assert set(document["lines_ran"][str(tmp_path / "train.py")]) - {19} == {11, 12, 13, 14, 15, 17, 18, 21}
    assert {f["path"] for f in document["findings"]} == {str(tmp_path / "train.py")}


EVALUATION = HEADER + """\
import torch_xla.distributed.parallel_loader as pl

batches = [dataset[i:i + 8] for i in range(0, 64, 8)]
loader = pl.MpDeviceLoader(batches, device)
model.eval()
predictions = []
with torch.no_grad():
    for batch in loader:
        predictions.append(model(batch).argmax(-1).cpu())
print(torch.cat(predictions).shape)
"""


def test_an_evaluation_loop_copy_is_xla307_on_every_batch(tmp_path):
    document, done = trace(tmp_path, EVALUATION)
    assert done.returncode == 0, done.stderr
    assert rows(document) == [
        ("XLA307", "train.py", 18, ".cpu() copied device data to the host on every step", "warning",
         "On 8 of 8 steps, 1 per step."),
    ]


FRAMEWORK = '''\
import torch


class Trainer:
    """A framework's loop: calls the user's hook, then logs what it returned, every step."""

    def fit(self, module, batches, device):
        import xla_compat
        for batch in batches:
            out = module.training_step(batch.to(device))
            out["loss"].backward()
            module.optimizer.step()
            module.optimizer.zero_grad()
            self.log(out)
            xla_compat.sync()

    def log(self, out):
        self.last = {name: value.item() for name, value in out.items()}
'''
HOOKS = """\
import torch
import xla_compat
from framework import Trainer


class Module(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(16, 4)
        self.optimizer = None

    def training_step(self, batch):
        loss = self.layer(batch).pow(2).mean()
        if loss.isnan():
            raise FloatingPointError("nan loss")
        return {"loss": loss}


torch.manual_seed(0)
device = xla_compat.device()
module = Module().to(device)
module.optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
data = torch.randn(48, 16)
Trainer().fit(module, [data[i:i + 8] for i in range(0, 48, 8)], device)
"""


def test_a_hook_and_a_framework_that_reads_are_told_apart(tmp_path):
    # the framework lives outside the project root, as an installed package would
    project = tmp_path / "project"
    project.mkdir()
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "framework.py").write_text(FRAMEWORK)
    script = project / "train.py"
    script.write_text(HOOKS)
    out = tmp_path / "trace.json"
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=os.pathsep.join([str(REPO), str(vendor)]))
    done = subprocess.run([sys.executable, "-m", "xla_compat.trace", "--format", "json", "--output", str(out),
                           str(script)], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    vendor_file = os.path.relpath(vendor / "framework.py", project)
    assert rows(document) == [
        ("XLA304", "train.py", 14, "a truth test on a tensor read its value to the host on every step", "warning",
         "On 5 of 5 steps, 1 per step."),
        # the read is the framework's: reported at the project's line that called into it
        ("XLA310", "train.py", 24, ".item() inside framework read a device value to the host on every step",
         "warning", f"At {vendor_file}:18, on 5 of 5 steps, 1 per step."),
    ]


def test_a_blocking_wait_in_the_step_is_xla302(tmp_path):
    source = HEADER + textwrap.dedent("""\
        for start in range(0, 64, 8):
            model(dataset[start:start + 8].to(device)).sum().backward()
            optimizer.step()
            xla_compat.sync()
            xm.wait_device_ops()
        """)
    document, done = trace(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert rows(document) == [
        ("XLA302", "train.py", 14, "xm.wait_device_ops() blocked the host until the device finished on every step",
         "warning", "On 7 of 7 steps, 1 per step."),
    ]


ENDLESS = HEADER + """\
step = 0
while True:
    loss = model(dataset[:8].to(device)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    xla_compat.sync()
    step += 1
    print("step", step, flush=True)
"""


def test_steps_stops_the_program_at_a_boundary_and_the_report_follows(tmp_path):
    document, done = trace(tmp_path, ENDLESS, "--steps", "3", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    # warm-up 1 + 3 traced steps; the first iteration ran with the set-up, before the first boundary
    assert document["steps"] == 4 and document["step_boundaries"] == 5 and document["stopped_early"]
    assert done.stdout.split() == ["step", "1", "step", "2", "step", "3", "step", "4"]
    assert rows(document) == []


DETERMINISTIC = HEADER + """\
losses = []
for start in range(0, 64, 8):
    loss = model(dataset[start:start + 8].to(device)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if loss > 0:  # a read: the trace must not change what it reads
        losses.append(loss.item())
    xla_compat.sync()
print(" ".join(float(x).hex() for x in losses), flush=True)
"""


def test_tracing_never_changes_what_the_program_computes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(DETERMINISTIC)
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=str(REPO))
    plain = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    traced = subprocess.run([sys.executable, "-m", "xla_compat.trace", "--output", str(tmp_path / "t.txt"),
                             str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert len(plain.stdout.split()) == 8
    assert traced.stdout == plain.stdout  # bit for bit: the losses as hex floats


def test_fail_on_formats_and_the_program_status(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINING)
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=str(REPO))

    def run(*options):
        return subprocess.run([sys.executable, "-m", "xla_compat.trace", *options, str(script)], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)

    failing = run("--fail-on", "XLA303", "--format", "github")
    assert failing.returncode == 1
    assert ("::warning file=train.py,line=17,col=1,title=XLA303::XLA303 .item() read a device value to the host "
            "on every step") in failing.stdout.splitlines()
    assert "::notice file=train.py,line=22,col=1,title=XLA307::XLA307 float()" in failing.stdout
    passing = run("--fail-on", "XLA309", "--format", "sarif")
    assert passing.returncode == 0
    sarif = json.loads(passing.stdout[passing.stdout.index("{"):])
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("XLA304", "warning"), ("XLA303", "warning"), ("XLA301", "warning"), ("XLA303", "note"), ("XLA307", "note")]
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nprint('ran')\nsys.exit(3)\n")
    crashed = subprocess.run([sys.executable, "-m", "xla_compat.trace", str(crash)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert crashed.returncode == 3
    assert crashed.stdout.splitlines() == ["ran", "Traced 0 steps (2 warm-up; 0 step boundaries): 0 findings."]


def test_a_module_runs_with_dash_m_and_its_arguments(tmp_path):
    package = tmp_path / "job"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(HEADER + textwrap.dedent("""\
        import sys
        for start in range(0, 8 * int(sys.argv[1]), 8):
            loss = model(dataset[start:start + 8].to(device)).sum()
            loss.backward()
            print(loss.tolist())
            xla_compat.sync()
        """))
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    done = subprocess.run([sys.executable, "-m", "xla_compat.trace", "--format", "json", "-m", "job", "5"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout[done.stdout.index("{\n"):])
    assert rows(document) == [
        ("XLA303", os.path.join("job", "__main__.py"), 14, ".tolist() read a device value to the host on every step",
         "warning", "On 4 of 4 steps, 1 per step.")]


def test_the_context_manager_reports_in_process():
    import torch

    import xla_compat

    device = xla_compat.device()
    weight = torch.randn(97, 3).to(device)  # a width no other runtime test uses
    with xla_compat.trace(warmup=2) as t:  # 2.1 compiles once more than 2.9 here
        for _ in range(5):
            value = (weight * 2).sum()
            total = value.item()
            xla_compat.sync()
    line = test_the_context_manager_reports_in_process.__code__.co_firstlineno + 10
    assert [(f.code, os.path.basename(f.path), f.line, f.message, f.help) for f in t.findings] == [
        ("XLA307", "test_trace.py", line, ".item() read a device value to the host on every step",
         "On 4 of 4 steps, 1 per step.")]
    assert total == pytest.approx(float(weight.sum().item() * 2), rel=1e-5)


SPECIAL_SCALAR = HEADER + """\
for step in range(8):
    decay = 0.0 if step == 5 else 0.01  # 1 - decay is 1.0 once: a constant in the graph
    loss = model(dataset[:8].to(device)).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 - decay)
            p.sub_(p.grad * 0.1)
            p.grad = None
    xla_compat.sync()
"""


def test_a_recompile_from_a_python_number_becoming_1_names_its_line(tmp_path):
    document, done = trace(tmp_path, SPECIAL_SCALAR)
    assert done.returncode == 0, done.stderr
    assert rows(document) == [
        ("XLA309", "train.py", 16, "a new graph compiled after warm-up: a call of this line got other input shapes "
         "or a 0/1 scalar", "warning", "A call of this line got other input shapes, or a Python number it passes "
         "became or stopped being 0 or 1 (torch_xla compiles those two into the graph). 1 new graph, on 1 of 7 "
         "steps.")]


EVALUATION_WITHOUT_SYNC = HEADER + """\
for epoch in range(3):
    for start in range(0, 32, 8):
        loss = model(dataset[start:start + 8].to(device)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        xla_compat.sync()
    with torch.no_grad():  # no sync in the evaluation loop: it shares a step with the next training batch
        scores = [model(dataset[i:i + 8].to(device)).argmax(-1).cpu() for i in range(32, 64, 8)]
"""


def test_reads_under_no_grad_are_evaluation_even_in_a_step_that_trains(tmp_path):
    document, done = trace(tmp_path, EVALUATION_WITHOUT_SYNC)
    assert done.returncode == 0, done.stderr
    assert rows(document) == [
        ("XLA307", "train.py", 18, ".cpu() copied device data to the host on some steps", "warning",
         "On 2 of 11 steps, 4 per step.")]
