"""`python -m xla_compat.trace`'s command line, before any program runs (no torch_xla needed)."""
import subprocess
import sys

import pytest

from xla_compat.trace import _split


@pytest.mark.parametrize("argv, options, program", [
    (["train.py", "--lr", "1"], [], ["train.py", "--lr", "1"]),
    (["--steps", "3", "--format", "json", "train.py", "--steps", "9"], ["--steps", "3", "--format", "json"],
     ["train.py", "--steps", "9"]),
    (["--warmup", "1", "-m", "pkg.train", "-x"], ["--warmup", "1"], ["-m", "pkg.train", "-x"]),
    (["--fail-on", "XLA303", "--", "-weird.py"], ["--fail-on", "XLA303"], ["-weird.py"]),
    (["--steps", "3"], ["--steps", "3"], []),
])
def test_options_end_where_the_program_begins(argv, options, program):
    assert _split(argv) == (options, program)


@pytest.mark.parametrize("argv, message", [
    ([], "a SCRIPT or -m MODULE to run is required"),
    (["-m"], "a SCRIPT or -m MODULE to run is required"),
    (["--steps", "0", "train.py"], "--steps must be at least 1"),
    (["--warmup", "-1", "train.py"], "--warmup must be at least 0"),
    (["no_such_script.py"], "no such script: no_such_script.py"),
    (["--format", "xml", "train.py"], "argument --format: invalid choice: 'xml'"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, argv, message):
    done = subprocess.run([sys.executable, "-m", "xla_compat.trace", *argv], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("python -m xla_compat.trace: error: " + message)
    assert "torch" not in done.stderr.lower().replace("xla_compat.trace", "")


def test_importing_the_trace_imports_no_torch():
    done = subprocess.run([sys.executable, "-c", "import sys, xla_compat; xla_compat.trace; "
                                                 "print('torch' in sys.modules, callable(xla_compat.trace))"],
                          capture_output=True, text=True)
    assert done.stdout.split() == ["False", "True"]


def test_the_text_report_shows_each_help_and_concise_and_annotations_the_first_line_only():
    import json
    from types import SimpleNamespace

    from xla_compat.trace import render
    from xla_compat.tracing.findings import TraceFinding

    read = TraceFinding("XLA310", "train.py", 24, ".item() inside transformers read a device value to the host on "
                        "every step", "warning", "read", 5, 5, 37, 185, "transformers/generation/utils.py:2345",
                        "/abs/train.py", help="At transformers/generation/utils.py:2345, on 5 of 5 steps, 37 per step.")
    trace = SimpleNamespace(findings=[read], stopped_early=False, steps_traced=7, warmup=2, boundaries=8)
    assert render(trace, "text").splitlines() == [
        "train.py:24:1: XLA310 .item() inside transformers read a device value to the host on every step",
        "  = help: At transformers/generation/utils.py:2345, on 5 of 5 steps, 37 per step.",
        "Traced 7 steps (2 warm-up; 8 step boundaries): 1 finding."]
    assert render(trace, "concise").splitlines()[0] == (
        "train.py:24:1: XLA310 .item() inside transformers read a device value to the host on every step")
    assert len(render(trace, "concise").splitlines()) == 2
    assert render(trace, "github") == ("::warning file=train.py,line=24,col=1,title=XLA310::XLA310 .item() inside "
                                       "transformers read a device value to the host on every step\n")
    result = json.loads(render(trace, "sarif"))["runs"][0]["results"][0]
    assert result["properties"]["help"] == read.help
    assert read.as_json()["help"] == read.help
