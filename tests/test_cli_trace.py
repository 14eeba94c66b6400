"""`flake8-xla check --trace`: static graph findings against a run's trace document."""
import json
import os

from cli_helpers import run

SOURCE = """\
import torch
import torch_xla

device = torch_xla.device()
for data, target in loader:
    loss = model(data.to(device)).sum()
    loss.backward()
    optimizer.step()
    print(loss.item())
    scaled = (loss * 2).item()
    torch_xla.sync()
"""


def write_trace(tmp_path, findings, lines_ran, **extra):
    script = str(tmp_path / "train.py")
    document = {"tool": "xla_compat.trace", "format": 1, "step_boundaries": 8, "warmup": 2,
                "findings": [dict({"path": script, "filename": "train.py", "column": 1}, **f) for f in findings],
                "lines_ran": {script: lines_ran}}
    document.update(extra)
    (tmp_path / "trace.json").write_text(json.dumps(document))


def test_confirmed_ran_without_a_sync_and_run_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    write_trace(tmp_path, [
        {"line": 9, "code": "XLA303", "message": ".item() read a device value to the host on 7 of 7 steps, 1 per step",
         "severity": "warning"},
        {"line": 6, "code": "XLA310", "message": ".item() inside lib/m.py:3 read a device value to the host on 7 of "
                                                 "7 steps, 1 per step", "severity": "warning"},
        {"line": 8, "code": "XLA303", "message": ".item() read a device value to the host on 2 of 7 steps, 1 per step",
         "severity": "note"},
    ], [6, 7, 8, 9, 10])
    code, out, err = run(capsys, "check", "--no-cache", "--select", "XLA3", "--trace", "trace.json", "train.py")
    assert code == 1
    lines = out.splitlines()
    assert [line.split(" ", 2)[:2] for line in lines] == [["train.py:6:1:", "XLA310"], ["train.py:9:11:", "XLA303"],
                                                          ["train.py:10:14:", "XLA303"]]
    assert lines[0].endswith("7 steps, 1 per step [seen only by the trace]")  # a trace from before "help"
    assert lines[1].endswith(" [confirmed by the trace]")
    assert lines[2].endswith(" [the trace ran this line and saw no sync: likely a false alarm]")
    assert "Trace: 1 confirmed, 1 on lines that ran without a sync, 1 seen only by the trace." in err


def test_a_line_the_run_never_reached_is_left_alone_and_selection_applies(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    write_trace(tmp_path, [{"line": 6, "code": "XLA310", "message": "m", "severity": "warning"}], [])
    code, out, err = run(capsys, "check", "--no-cache", "--select", "XLA303", "--format", "json", "--trace",
                         "trace.json", "train.py")
    records = json.loads(out)
    assert [(r["line"], r["code"], r["message"].endswith("]")) for r in records] == [(9, "XLA303", False),
                                                                                   (10, "XLA303", False)]


def test_a_file_that_is_not_a_trace_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    (tmp_path / "trace.json").write_text(json.dumps([{"filename": "train.py"}]))
    code, out, err = run(capsys, "check", "--no-cache", "--trace", "trace.json", "train.py")
    assert code == 2
    assert err.strip() == ("flake8-xla: error: --trace: trace.json is not a trace written by "
                                   "`python -m xla_compat.trace --format json`")
    (tmp_path / "trace.json").write_text("{")
    code, out, err = run(capsys, "check", "--no-cache", "--trace", "trace.json", "train.py")
    assert code == 2 and err.startswith("flake8-xla: error: --trace: trace.json is not JSON:")
    assert os.path.exists(tmp_path / "train.py")


def test_a_finding_at_a_call_is_confirmed_by_an_event_in_the_function_it_calls(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    helper = str(tmp_path / "helper.py")
    (tmp_path / "helper.py").write_text("def log(value):\n    return value.item()\n")
    write_trace(tmp_path, [
        {"line": 2, "code": "XLA303", "message": "m", "severity": "warning", "path": helper, "filename": "helper.py",
         "callers": [str(tmp_path / "train.py") + ":9"]},
    ], [6, 7, 8, 9, 10])
    code, out, err = run(capsys, "check", "--no-cache", "--select", "XLA303", "--trace", "trace.json", "train.py",
                         "helper.py")
    assert [line.rsplit("[", 1)[-1] for line in out.splitlines()] == [
        "confirmed by the trace]", "the trace ran this line and saw no sync: likely a false alarm]"]
    assert "Trace: 1 confirmed, 1 on lines that ran without a sync, 0 seen only by the trace." in err


def test_a_run_only_finding_keeps_the_traces_help(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    write_trace(tmp_path, [
        {"line": 6, "code": "XLA310", "message": ".item() inside lib read a device value to the host on every step",
         "help": "At lib/m.py:3, on 7 of 7 steps, 1 per step.", "severity": "warning"},
    ], [6, 7, 8, 9, 10])
    code, out, err = run(capsys, "check", "--no-cache", "--select", "XLA310", "--format", "json", "--trace",
                         "trace.json", "train.py")
    assert [(r["line"], r["message"], r["help"]) for r in json.loads(out)] == [
        (6, ".item() inside lib read a device value to the host on every step [seen only by the trace]",
         "At lib/m.py:3, on 7 of 7 steps, 1 per step.")]
    code, out, err = run(capsys, "check", "--no-cache", "--select", "XLA310", "--format", "full", "--trace",
                         "trace.json", "train.py")
    assert "  = help: At lib/m.py:3, on 7 of 7 steps, 1 per step.\n" in out
