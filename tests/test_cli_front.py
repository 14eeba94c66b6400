"""The CLI as a ruff/flake8 user drives it: patches git accepts, reports CI steps can upload even
when empty, an interrupt that says what it left behind, and the conveniences (-q, check --fix, -j auto,
rules --format json, explain for the non-rule codes)."""
import json
import os
import subprocess
import sys

import pytest

from cli_helpers import run

MARK_STEP = "import torch_xla.core.xla_model as xm\nxm.mark_step()"


def _git_apply(directory, patch: str) -> subprocess.CompletedProcess:
    subprocess.run(["git", "init", "-q", str(directory)], check=True)
    return subprocess.run(["git", "apply", "-"], cwd=directory, input=patch.encode(), capture_output=True)


@pytest.mark.parametrize("source, fixed", [
    (MARK_STEP, "import torch_xla\ntorch_xla.sync()"),  # the fixed line is the last, without an ending
    (MARK_STEP + "\nx = 1", "import torch_xla\ntorch_xla.sync()\nx = 1"),  # an unchanged last line
    (MARK_STEP + "\r\n", "import torch_xla\ntorch_xla.sync()\r\n"),
])
def test_fix_diff_without_final_newline_is_a_patch_git_applies(tmp_path, monkeypatch, capsys, source, fixed) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_bytes(source.encode())
    code, out, _ = run(capsys, "fix", "--diff", "--xla-target-version", "2.9", "a.py")
    assert code == 1
    applied = _git_apply(tmp_path, out)
    assert applied.returncode == 0, applied.stderr.decode()
    assert (tmp_path / "a.py").read_bytes() == fixed.encode()


def test_diff_marks_the_missing_newline_on_both_sides(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(MARK_STEP)
    _, out, _ = run(capsys, "fix", "--diff", "--xla-target-version", "2.9", "a.py")
    assert out == ("--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n-import torch_xla.core.xla_model as xm\n"
                   "-xm.mark_step()\n\\ No newline at end of file\n+import torch_xla\n+torch_xla.sync()\n"
                   "\\ No newline at end of file\n")


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_a_run_without_files_still_writes_its_report(tmp_path, monkeypatch, capsys, fmt) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    code, out, err = run(capsys, "check", "--format", fmt, "--output-file", "report", "docs")
    assert (code, out, err) == (0, "", "flake8-xla: warning: no Python files found in docs\n")
    report = json.loads((tmp_path / "report").read_text())
    if fmt == "json":
        assert report == []
    else:
        assert report["version"] == "2.1.0" and [run_["results"] for run_ in report["runs"]] == [[]]
    assert run(capsys, "check", "--format", "json", "docs")[1] == "[]\n"


def test_jobs_auto_is_one_worker_per_cpu(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(MARK_STEP + "\n")
    code, out, _ = run(capsys, "check", "-j", "auto", "--xla-target-version", "2.9", "a.py")
    assert code == 1 and out.startswith("a.py:2:1: XLA102 ")
    code, _, err = run(capsys, "check", "-j", "several", "a.py")
    assert (code, err) == (2, "flake8-xla: error: argument -j/--jobs: expected a whole number or auto, "
                              "not 'several'\n")


def test_force_exclude_of_every_named_file_says_why_not_no_files(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.flake8-xla]\nextend-exclude = ["gen_*.py"]\n')
    (tmp_path / "gen_a.py").write_text(MARK_STEP + "\n")
    code, out, err = run(capsys, "check", "--force-exclude", "gen_a.py")
    assert (code, out) == (0, "")
    assert err == ("flake8-xla: note: nothing to check: gen_a.py: excluded by 'gen_*.py' (extend-exclude); "
                   "--force-exclude applies the excludes to named paths too\n")


def test_a_bad_pin_is_reported_once_however_many_workers(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "requirements.txt").write_text("torch_xla==2.x\n")
    for i in range(20):
        (tmp_path / f"m{i}.py").write_text(MARK_STEP + "\n")
    done = subprocess.run([sys.executable, "-m", "flake8_xla", "check", "-j", "2", "--no-cache", "."],
                          capture_output=True, text=True)
    code, out, err = done.returncode, done.stdout, done.stderr
    assert code == 1 and len(out.splitlines()) == 20
    assert err.splitlines()[0] == (f"flake8-xla: warning: {tmp_path / 'requirements.txt'}:1: torch_xla==2.x: "
                                   "not used as the target: it is not a version specifier "
                                   "(e.g. torch_xla>=2.6 or torch_xla==2.8.*)")
    assert err.count("warning:") == 1
