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
    assert err.splitlines()[0] == ("flake8-xla: warning: requirements.txt:1: torch_xla==2.x: "
                                   "not used as the target: it is not a version specifier "
                                   "(e.g. torch_xla>=2.6 or torch_xla==2.8.*)")
    assert err.count("warning:") == 1


NEEDS_A_HUMAN = [
    # a row the table leaves to a human, with its own reason
    ("xm.xla_real_devices(['xla:0'])", "XLA103",
     "torch_xla.real_devices() takes no argument and returns every local device, not those of the one passed"),
    # a manual row with a replacement and a caveat: the reason is derived from them
    ("xm.unlazy([t])", "XLA103",
     "torch_xla.sync(wait=True) is no drop-in replacement: it syncs every live tensor, not only the ones passed"),
    # a renamable row whose arguments do not map
    ("xm.xla_device(0, 'TPU')", "XLA102", "torch_xla.device() has no counterpart of its `devkind` argument"),
    ("xm.xla_device(*args)", "XLA102", "a *args or **kwargs argument: which parameters it fills cannot be read"),
    # a rule without fixes: its fix safety says why
    ("import torch_xla\nfor x, y in loader:\n    loss = model(x)\n    print(loss.item())\n    torch_xla.sync()",
     "XLA303", "where the value should be read is a choice."),
]


@pytest.mark.parametrize("source, code, reason", NEEDS_A_HUMAN)
def test_fix_says_under_each_remaining_diagnostic_why_it_needs_a_human(tmp_path, monkeypatch, capsys, source,
                                                                        code, reason) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\n" + source + "\n")
    code_, out, err = run(capsys, "fix", "--xla-target-version", "2.9", "a.py")
    lines = out.splitlines()
    assert code_ == 1 and len(lines) == 2 and f" {code} " in lines[0], out
    assert lines[1] == f"    needs a human: {reason}"
    assert "1 needs a human (listed above)" in err


# Runs flake8-xla in a subprocess whose writes send Ctrl-C (SIGINT) to the main process after the
# second file a process rewrote: in a worker (-j 2) or in the main process itself (-j 1).
INTERRUPTING = """
import os, signal, sys, faulthandler
faulthandler.dump_traceback_later(60, exit=True)
signal.signal(signal.SIGINT, signal.default_int_handler)  # a suite run with SIGINT ignored (nohup) passes it on
import flake8_xla.session.running as running
from flake8_xla.cli import main
main_pid, written, original = os.getpid(), [], running.write_preserving
def write_then_interrupt(*args):
    original(*args)
    written.append(args[0])
    if len(written) == 2:
        os.kill(main_pid, signal.SIGINT)
running.write_preserving = write_then_interrupt
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_interrupted_fix_names_every_file_it_rewrote(tmp_path, jobs) -> None:
    for i in range(40):
        (tmp_path / f"m{i:02}.py").write_text(MARK_STEP + "\n")
    done = subprocess.run([sys.executable, "-c", INTERRUPTING, "fix", "-j", jobs, "--xla-target-version", "2.9", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    changed = sorted(p.name for p in tmp_path.glob("*.py") if "torch_xla.sync()" in p.read_text())
    assert done.returncode == 130, done.stderr
    assert 2 <= len(changed) < 40
    head, *listed = done.stderr.splitlines()
    assert head == f"flake8-xla: interrupted; {len(changed)} files were rewritten before it (the others are as " \
                   "they were):"
    assert sorted(line.strip() for line in listed) == changed
    assert all(p.read_text() in (MARK_STEP + "\n", "import torch_xla\ntorch_xla.sync()\n") for p in tmp_path.glob("*.py"))


def test_an_interrupted_check_says_so(tmp_path) -> None:
    (tmp_path / "a.py").write_text(MARK_STEP + "\n")
    script = ("import signal, sys\nimport flake8_xla.session.running as running\nfrom flake8_xla.cli import main\n"
              "def interrupt(*a, **k):\n    raise KeyboardInterrupt\nrunning.run_file = interrupt\n"
              "sys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", script, "check", "a.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (
        130, "", "flake8-xla: interrupted; 0 of 1 file done; nothing was written\n")


def test_a_clean_check_says_so_in_one_line_unless_quiet(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    assert run(capsys, "check", "--xla-target-version", "2.9", ".") == (0, "", "All checks passed (2 files).\n")
    assert run(capsys, "check", "-q", ".") == (0, "", "")
    assert run(capsys, "check", "--format", "json", ".") == (0, "[]\n", "")


@pytest.fixture
def installed_2_8(tmp_path, monkeypatch):
    """A torch_xla 2.8.1 wheel's metadata first on sys.path: what an inferred target falls back to."""
    from flake8_xla import versions

    info = tmp_path / "site" / "torch_xla-2.8.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_xla\nVersion: 2.8.1\n\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), *sys.path])
    versions.installed_version.cache_clear()
    yield
    versions.installed_version.cache_clear()


def test_check_and_fix_say_the_target_they_inferred_and_where_from(tmp_path, monkeypatch, capsys,
                                                                    installed_2_8) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    monkeypatch.chdir(project)
    (project / "a.py").write_text(MARK_STEP + "\n")
    said = "target: torch_xla 2.8 (from the installed torch_xla 2.8; set --target-version to choose)\n"
    assert run(capsys, "check", "a.py")[::2] == (1, "Found 1 diagnostic; 1 fixable with `flake8-xla fix` "
                                                    "(marked [*]).\n" + said)
    assert run(capsys, "fix", "--diff", "a.py")[::2] == (1, "Would fix 1 issue in 1 file (XLA102 x1).\n" + said)
    # quiet runs and the machine formats say nothing on stderr; their stdout is the report alone
    assert run(capsys, "check", "-q", "a.py")[2] == ""
    for fmt in ("json", "sarif", "github"):
        code, out, err = run(capsys, "check", "--format", fmt, "a.py")
        assert (code, err) == (1, "") and "set --target-version" not in out
    # a target the user chose is not repeated
    assert "target" not in run(capsys, "check", "--xla-target-version", "2.8", "a.py")[2]
    (project / "pyproject.toml").write_text('[tool.flake8-xla]\ntarget-version = "2.8"\n')
    assert "target" not in run(capsys, "check", "a.py")[2]
    (project / "pyproject.toml").unlink()
    # moving to TorchTPU: the rules judge the code for the platform the user named
    assert "set --target-version" not in run(capsys, "check", "--migrate-to", "torchtpu", "a.py")[2]
    assert run(capsys, "fix", "a.py")[::2] == (0, "Fixed 1 issue in 1 file (XLA102 x1).\n" + said)


def test_each_project_root_says_its_own_inferred_target(tmp_path, monkeypatch, capsys, installed_2_8) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("pinned", "unpinned"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text(MARK_STEP + "\n")
    (tmp_path / "pinned" / "requirements.txt").write_text("torch_xla>=2.6\n")
    (tmp_path / "unpinned" / "pyproject.toml").write_text("")
    code, out, err = run(capsys, "check", "pinned", "unpinned")
    assert (code, out.splitlines()[0].split(": ")[0]) == (1, os.path.join("unpinned", "m.py") + ":2:1")
    assert err.splitlines()[1:] == [
        f"target for pinned: torch_xla 2.6 (from {os.path.join('pinned', 'requirements.txt')}:1: torch_xla>=2.6; "
        "set --target-version to choose)",
        "target for unpinned: torch_xla 2.8 (from the installed torch_xla 2.8; set --target-version to choose)"]


def test_a_pin_and_the_option_name_the_same_target_alike(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "requirements.txt").write_text("torch_xla==2.12\n")
    # a release guard past the rule data: both judge it on 2.12 (the old branch does not run there)
    (tmp_path / "g.py").write_text("import torch_xla\nimport torch_xla.core.xla_model as xm\n"
                                   "if torch_xla.__version__ >= '2.10':\n    torch_xla.sync()\n"
                                   "else:\n    xm.mark_step()\n")

    def target_line(*options):
        out = run(capsys, "check", "--show-settings", *options, "g.py")[1]
        return next(line for line in out.splitlines() if line.startswith("target for"))

    assert target_line() == "target for .: torch_xla 2.12, from requirements.txt:1: torch_xla==2.12 (1 file)"
    assert target_line("--target-version", "2.12") == \
        "target for .: torch_xla 2.12, from --xla-target-version 2.12 (1 file)"
    said = "torch_xla 2.12 is newer than the last release flake8-xla knows (2.9); its rule data may not describe " \
           "that release"
    assert run(capsys, "check", "--no-cache", "g.py")[:3] == (
        0, "", f"flake8-xla: warning: requirements.txt:1: torch_xla==2.12: {said}\nAll checks passed (1 file).\n"
               "target: torch_xla 2.12 (from requirements.txt:1: torch_xla==2.12; set --target-version to choose)\n")
    assert run(capsys, "check", "--no-cache", "--target-version", "2.12", "g.py") == (
        0, "", f"flake8-xla: warning: --xla-target-version: {said}\nAll checks passed (1 file).\n")


def test_quiet_prints_the_diagnostics_and_nothing_else(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(MARK_STEP + "\n")
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, "check", "-q", "--xla-target-version", "2.9", "a.py")
    assert (code, err) == (1, "") and out.startswith("a.py:2:1: XLA102 ") and out.count("\n") == 1
    assert run(capsys, "check", "-q", "empty") == (0, "", "")
    code, out, err = run(capsys, "fix", "--quiet", "--xla-target-version", "2.9", "a.py")
    assert (code, out, err) == (0, "", "")
    assert (tmp_path / "a.py").read_text() == "import torch_xla\ntorch_xla.sync()\n"


def test_check_fix_is_fix_and_reports_what_remains_in_checks_format(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(MARK_STEP + "\nd = xm.xla_device(0, 'TPU')\n")
    code, out, err = run(capsys, "check", "--diff", "--xla-target-version", "2.9", "a.py")
    assert code == 1 and out.startswith("--- a/a.py\n+++ b/a.py\n") and err.startswith("Would fix 1 issue in 1 file")
    assert (tmp_path / "a.py").read_text() == MARK_STEP + "\nd = xm.xla_device(0, 'TPU')\n"
    code, out, err = run(capsys, "check", "--fix", "--format", "json", "--xla-target-version", "2.9", "a.py")
    assert code == 1 and err == "Fixed 1 issue in 1 file (XLA102 x1); 1 needs a human (listed above).\n"
    assert [(r["line"], r["code"]) for r in json.loads(out)] == [(4, "XLA102")]
    assert (tmp_path / "a.py").read_text() == ("import torch_xla\nimport torch_xla.core.xla_model as xm\n"
                                               "torch_xla.sync()\nd = xm.xla_device(0, 'TPU')\n")
    assert run(capsys, "check", "--fix", "--exit-zero", "a.py")[0] == 0
    code, _, err = run(capsys, "check", "--fix", "--add-noqa", "a.py")
    assert (code, err) == (2, "flake8-xla: error: --add-noqa and --fix/--diff each rewrite the files; run them one "
                              "after the other\n")


def test_show_fixes_lists_each_fixed_finding_with_its_message(tmp_path, monkeypatch, capsys) -> None:
    """pre-commit's fix hook runs `fix --show-fixes`: the user sees what was wrong, not only that a
    file changed; a notebook's finding is placed in its cell; --diff says what it would fix."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(MARK_STEP + "\nn = xm.xrt_world_size()\nd = xm.xla_device(0, 'TPU')\n")
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["import torch_xla.core.xla_model as xm\n", "xm.mark_step()\n"]}
    (tmp_path / "n.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                  "nbformat_minor": 5}))
    mark_step = "XLA102 xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)"
    world_size = ("XLA101 xm.xrt_world_size() was removed in torch_xla 2.7; use torch_xla.runtime.world_size() "
                  "(2.1+)")
    code, _, err = run(capsys, "fix", "--show-fixes", "--diff", "--target-version", "2.9", "a.py", "n.ipynb")
    assert code == 1 and err.splitlines()[:4] == [
        "Would fix:", f"a.py:2:1: {mark_step}", f"a.py:3:5: {world_size}", f"n.ipynb:cell 1:2:1: {mark_step}"]
    code, _, err = run(capsys, "fix", "--show-fixes", "--target-version", "2.9", "a.py")
    assert code == 1 and err.splitlines()[:3] == ["Fixed:", f"a.py:2:1: {mark_step}", f"a.py:3:5: {world_size}"]
    assert err.splitlines()[3].startswith("Fixed 2 issues in 1 file (XLA101 x1, XLA102 x1)")
    # without the option, and with --quiet, only the counts
    (tmp_path / "b.py").write_text(MARK_STEP + "\n")
    assert run(capsys, "fix", "--target-version", "2.9", "b.py")[2] == "Fixed 1 issue in 1 file (XLA102 x1).\n"
    (tmp_path / "c.py").write_text(MARK_STEP + "\n")
    assert run(capsys, "fix", "--show-fixes", "-q", "--target-version", "2.9", "c.py")[2] == ""


def test_rules_as_json(capsys) -> None:
    code, out, _ = run(capsys, "rules", "--format", "json")
    records = {r["code"]: r for r in json.loads(out)}
    assert code == 0 and records["XLA102"] == {
        "code": "XLA102", "name": "deprecated-api", "summary": records["XLA102"]["summary"], "fixable": "some",
        "default": "on", "level": "warning",
        "url": "https://github.com/flake8-xla/flake8-xla/blob/main/docs/rules/XLA102.md"}
    assert records["XLA901"]["default"] == "off" and records["XLA501"]["default"] == "migrate-to torchtpu"
    table = run(capsys, "rules")[1].splitlines()
    assert len(table) == len(records) + 1


@pytest.mark.parametrize("code, first", [
    ("E902", "E902: the file could not be read"),
    ("e999", "E999: the file does not parse"),
    ("XLA000", "XLA000: an internal error of flake8-xla"),
])
def test_explain_knows_the_codes_that_are_not_rules(capsys, code, first) -> None:
    status, out, err = run(capsys, "explain", code)
    assert (status, err) == (0, "") and out.splitlines()[0] == first and "What to do: " in out


def test_check_sarif_carries_fixes_and_full_shows_source(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(MARK_STEP + "\n")
    code, out, _ = run(capsys, "check", "--format", "sarif", "--xla-target-version", "2.9", "a.py")
    result, = json.loads(out)["runs"][0]["results"]
    assert code == 1 and result["ruleId"] == "XLA102" and len(result["fixes"]) == 1
    code, out, _ = run(capsys, "check", "--format", "full", "--xla-target-version", "2.9", "a.py")
    assert out.splitlines()[1:] == ["xm.mark_step()", "^"]
    code, out, _ = run(capsys, "check", "--format", "concise", "--show-source", "--xla-target-version", "2.9", "a.py")
    assert len(out.splitlines()) == 1
