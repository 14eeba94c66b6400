"""The standalone CLI: discovery, configuration, selection, noqa, formats, exit codes, bad input."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from cli_helpers import run
from flake8_xla.engine import lint_source

MARK_STEP = "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n"
# the engine's wording (its own tests pin it); these tests pin how the CLI reports it
MARK_STEP_LINE = f"a.py:3:1: XLA102 [*] {lint_source(MARK_STEP, target='2.9')[0].message}\n"
WORLD = "import torch_xla.core.xla_model as xm\n\nn = xm.xrt_world_size()\n"


def test_check_reports_and_exits_1(project, capsys) -> None:
    (project / "a.py").write_text(MARK_STEP)
    code, out, err = run(capsys, "check", "a.py")
    assert (code, out) == (1, MARK_STEP_LINE)
    assert err == ("Found 1 diagnostic; 1 fixable with `flake8-xla fix` (marked [*]).\n"
                   "target: torch_xla 2.9 (from requirements.txt:1: torch_xla==2.9.0; "
                   "set --target-version to choose)\n")


def test_clean_tree_exits_0_and_directories_are_walked_with_default_excludes(project, capsys) -> None:
    for d in ("pkg", ".venv/lib", "build", "__pycache__", "env_in_odd_place"):
        (project / d).mkdir(parents=True)
    (project / "env_in_odd_place" / "pyvenv.cfg").write_text("home = /usr\n")
    for d in (".venv/lib", "build", "__pycache__", "env_in_odd_place"):
        (project / d / "old.py").write_text(MARK_STEP)
    (project / "pkg" / "ok.py").write_text("import torch_xla\n")
    assert run(capsys, "check", "--xla-target-version", "2.9") == (0, "", "All checks passed (1 file).\n")
    (project / "pkg" / "a.py").write_text(MARK_STEP)
    code, out, _ = run(capsys, "check", ".")
    assert (code, out) == (1, MARK_STEP_LINE.replace("a.py", os.path.join("pkg", "a.py")))
    assert run(capsys, "check", "--exit-zero", ".")[0] == 0
    assert run(capsys, "check", "--extend-exclude", "pkg", ".")[:2] == (0, "")


def test_explicit_files_are_checked_even_when_excluded_unless_forced(project, capsys) -> None:
    (project / "build").mkdir()
    (project / "build" / "a.py").write_text(MARK_STEP)
    assert run(capsys, "check", "build/a.py")[0] == 1
    assert run(capsys, "check", "--force-exclude", "build/a.py")[:2] == (0, "")


def test_select_ignore_and_per_file_ignores(project, capsys) -> None:
    (project / "a.py").write_text(MARK_STEP + "n = xm.xrt_world_size()\n")
    (project / "tests").mkdir()
    (project / "tests" / "t.py").write_text(MARK_STEP)
    codes = lambda out: [line.split()[1] for line in out.splitlines()]  # noqa: E731
    assert codes(run(capsys, "check", ".")[1]) == ["XLA102", "XLA101", "XLA102"]
    assert codes(run(capsys, "check", "--select", "XLA101", ".")[1]) == ["XLA101"]
    assert codes(run(capsys, "check", "--ignore", "XLA10", "--extend-select", "XLA101", ".")[1]) == ["XLA101"]
    assert codes(run(capsys, "check", "--per-file-ignores", "tests/*:XLA102", ".")[1]) == ["XLA102", "XLA101"]


def test_pyproject_configuration(project, capsys) -> None:
    (project / "a.py").write_text(WORLD)
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.flake8-xla]
        target-version = "2.6"
        per-file-ignores = {"skip_*.py" = ["XLA"]}
        """))
    (project / "skip_me.py").write_text(WORLD)
    code, out, _ = run(capsys, "check", ".")
    assert out.startswith("a.py:3:5: XLA102 ") and "is deprecated since torch_xla 2.5 (removed in 2.7)" in out
    assert out.count("\n") == 1
    # the command line wins over the file
    assert run(capsys, "check", "--xla-target-version", "2.7", "a.py")[1].startswith("a.py:3:5: XLA101 ")


def test_setup_cfg_sections(project, capsys) -> None:
    (project / "a.py").write_text(WORLD)
    (project / "setup.cfg").write_text("[flake8]\nxla-target-version = 2.4\nmax-line-length = 100\n")
    assert run(capsys, "check", "a.py")[:2] == (0, "")  # 2.4: before the deprecation
    (project / "setup.cfg").write_text("[flake8-xla]\nignore = XLA101\n[flake8]\nxla-target-version = 2.4\n")
    assert run(capsys, "check", "a.py")[:2] == (0, "")  # [flake8-xla] wins; 2.9 from requirements; ignored
    (project / "setup.cfg").write_text("[flake8-xla]\nselct = XLA101\n")
    code, out, err = run(capsys, "check", "a.py")
    assert (code, out) == (2, "")
    assert err.startswith("flake8-xla: error: ") and "unknown option 'selct'" in err and err.count("\n") == 1


LOADER = "import torch_xla\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader(train_set, batch_size=64)\n"
LOADER_LINE = "a.py:4:10: XLA901 DataLoader(...) may end with a smaller batch, a new XLA graph; pass drop_last=True\n"


@pytest.mark.parametrize("argv, reported", [
    ([], False),
    (["--select", "XLA"], False),
    (["--extend-select", "XLA"], False),
    (["--extend-select", "XLA9"], True),
    (["--extend-select", "XLA901"], True),
    (["--select", "XLA90"], True),
    (["--ignore", "XLA9", "--extend-select", "XLA901"], True),  # the longest prefix wins
    (["--extend-select", "XLA9", "--ignore", "XLA901"], False),
    (["--extend-select", "XLA901", "--ignore", "XLA901"], False),  # a tie goes to ignore
    (["--extend-select", "XLA9", "--per-file-ignores", "a.py:XLA9"], False),
])
def test_off_by_default_rule_needs_a_select_prefix_longer_than_xla(project, capsys, argv, reported) -> None:
    (project / "a.py").write_text(LOADER)
    code, out, _ = run(capsys, "check", *argv, "a.py")
    assert (code, out) == ((1, LOADER_LINE) if reported else (0, ""))


def test_off_by_default_rule_from_pyproject(project, capsys) -> None:
    (project / "a.py").write_text(LOADER + "import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    mark_step = MARK_STEP_LINE.replace(":3:1:", ":6:1:")
    assert run(capsys, "check", "a.py")[:2] == (1, mark_step)
    (project / "pyproject.toml").write_text('[tool.flake8-xla]\nextend-select = ["XLA9"]\n')
    assert run(capsys, "check", "a.py")[:2] == (1, LOADER_LINE + mark_step)
    (project / "pyproject.toml").write_text('[tool.flake8-xla]\nextend-select = ["XLA9"]\nignore = ["XLA901"]\n')
    assert run(capsys, "check", "a.py")[:2] == (1, mark_step)
    (project / "pyproject.toml").write_text('[tool.flake8-xla]\nselect = ["XLA901"]\n')
    assert run(capsys, "check", "a.py")[:2] == (1, LOADER_LINE)


def test_off_by_default_rule_enabled_for_flake8_is_enabled_for_the_cli(project, capsys) -> None:
    (project / "a.py").write_text(LOADER)
    (project / "setup.cfg").write_text("[flake8]\nenable-extensions = XLA9, B9\nmax-line-length = 100\n")
    assert run(capsys, "check", "a.py")[:2] == (1, LOADER_LINE)


@pytest.mark.parametrize("argv, message", [
    (["check", "missing.py"], "flake8-xla: error: missing.py: no such file or directory\n"),
    (["check", "--select", "E501", "."], "flake8-xla: error: select: unknown code or prefix 'E501'; "
                                         "`flake8-xla rules` lists the codes\n"),
    (["check", "--xla-target-version", "latest", "."], None),
    (["explain", "XLA999"], "flake8-xla: error: unknown rule 'XLA999'; `flake8-xla rules` lists them "
                                    "(E902, E999, XLA000 are explained too)\n"),
])
def test_usage_errors_exit_2_with_one_line(project, capsys, argv, message) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("flake8-xla: error: ") and err.count("\n") == 1
    if message:
        assert err == message


def test_broken_pyproject_is_a_config_error(project, capsys) -> None:
    (project / "pyproject.toml").write_text("[tool.flake8-xla\n")
    code, _, err = run(capsys, "check", ".")
    assert code == 2 and err.startswith("flake8-xla: error: ") and "pyproject.toml: cannot read the TOML" in err


def test_no_python_files_is_a_warning(project, capsys) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "x.txt").write_text("torch_xla\n")
    assert run(capsys, "check", "docs") == (0, "", "flake8-xla: warning: no Python files found in docs\n")


def test_unreadable_binary_undecodable_and_invalid_files(project, capsys) -> None:
    (project / "bin.py").write_bytes(b"\x7fELF\x00\x01torch_xla")
    (project / "latin.py").write_bytes(b"# -*- coding: utf-8 -*-\nx = '\xff'  # torch_xla\n")
    (project / "syntax.py").write_text("import torch_xla\ndef f(:\n")
    (project / "plain_syntax.py").write_text("def f(:\n")  # never mentions torch_xla: not parsed at all
    code, out, _ = run(capsys, "check", ".")
    assert code == 1
    assert out.splitlines() == [
        "bin.py:1:1: E902 binary file (contains NUL bytes), not Python source",
        "latin.py:1:1: E902 cannot decode as utf-8: invalid start byte",
        "syntax.py:2:7: E999 SyntaxError: invalid syntax",
    ]


def test_noqa_matches_flake8_including_logical_lines(project, capsys) -> None:
    source = textwrap.dedent("""\
        import torch_xla.core.xla_model as xm

        xm.mark_step()  # noqa
        xm.mark_step()  # noqa: XLA101
        xm.mark_step()  # NOQA:XLA1
        n = xm.xrt_world_size(
        )  # noqa: XLA101 (flake8 does not join bracketed lines: line 6 stays reported)
        s = f\"\"\"{xm.xrt_world_size()}
        \"\"\"  # noqa: XLA101 (a multi-line string token is one logical line)
        """)
    (project / "a.py").write_text(source)
    _, out, _ = run(capsys, "check", "a.py")
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "XLA", "a.py"], capture_output=True,
                            text=True, cwd=project)
    expected = [["a.py:4:1:", "XLA102"], ["a.py:6:5:", "XLA101"]]
    assert [line.split(" ", 2)[:2] for line in out.splitlines()] == expected
    assert [line.split(" ", 2)[:2] for line in flake8.stdout.splitlines()] == expected


NOQA_COMMENTS = [
    "# noqa", "#noqa", "# NOQA", "# noqa:XLA101", "# noqa: XLA101,XLA102", "# noqa: XLA101 , XLA1 E501",
    "# noqa:  XLA101", "# noqa : XLA101", "# noqa: xla101", "# noqa:XLA", "# noqa: 101", "x = 1  # noqa: E501 why",
    "# noqa:XLA101,", "## noqa", "# noqa-ish", "# flake8: noqa", "# flake8=noqa", "  # flake8:  NOQA", "#flake8: noqa",
    "# flake8 noqa", "# flake8: noqa: XLA101", "# type: ignore  # noqa: XLA101\tE501",
]


@pytest.mark.parametrize("comment", NOQA_COMMENTS)
def test_noqa_comment_grammar_is_flake8_s(comment) -> None:
    # ours is written out so the CLI need not import flake8; it must read every comment the same way
    from flake8 import defaults
    from flake8_xla import noqa

    theirs, ours = defaults.NOQA_INLINE_REGEXP.search(comment), noqa.NOQA_INLINE_REGEXP.search(comment)
    assert (ours and (ours.span(), ours.group("codes"))) == (theirs and (theirs.span(), theirs.group("codes")))
    assert bool(noqa.NOQA_FILE.match(comment)) == bool(defaults.NOQA_FILE.match(comment))


@pytest.mark.parametrize("odd", ["\u2028", "\x0c", "\x85", "\x1c"])
def test_noqa_and_columns_after_characters_str_splitlines_breaks_at(project, capsys, odd) -> None:
    # Python and flake8 see one line where str.splitlines() sees two: the noqa stays on line 3
    (project / "a.py").write_text(f"import torch_xla.core.xla_model as xm\ns = '{odd}'\n"
                                  "xm.mark_step()  # noqa: XLA102\nx = 1; xm.mark_step()\n", encoding="utf-8")
    _, out, _ = run(capsys, "check", "--no-cache", "a.py")
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "XLA", "a.py"], capture_output=True,
                            text=True, cwd=project)
    assert [line.split(" ", 2)[:2] for line in out.splitlines()] == [["a.py:4:8:", "XLA102"]]
    assert [line.split(" ", 2)[:2] for line in flake8.stdout.splitlines()] == [["a.py:4:8:", "XLA102"]]


def test_same_diagnostics_as_flake8_on_the_fixtures(project, capsys) -> None:
    fixtures = os.path.join(os.path.dirname(__file__), "fixtures")
    _, out, _ = run(capsys, "check", "--isolated", "--xla-target-version", "2.9", fixtures)
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "XLA",
                             "--xla-target-version", "2.9", fixtures], capture_output=True, text=True, cwd=project)
    assert out.replace(" [*]", "").splitlines() == sorted(flake8.stdout.splitlines(), key=_location)
    assert out.count("\n") > 50


def _location(line: str):
    path, row, col, _ = line.split(":", 3)
    return path, int(row), int(col)


def test_parallel_run_equals_serial_run(project, capsys) -> None:
    for i in range(40):
        (project / f"m{i:02d}.py").write_text(MARK_STEP if i % 3 else WORLD)
    serial = run(capsys, "check", "-j", "1", ".")
    parallel = run(capsys, "check", "-j", "2", ".")
    assert serial == parallel and serial[1].count("\n") == 40


def test_statistics_and_json(project, capsys) -> None:
    (project / "a.py").write_text(MARK_STEP + "xm.mark_step()\n" + "n = xm.xrt_world_size()\n")
    code, out, _ = run(capsys, "check", "--statistics", "a.py")
    # the table alone, as ruff prints it (not every diagnostic and then the table)
    assert (code, out) == (1, "1     XLA101 removed-api\n2     XLA102 deprecated-api\n")
    code, out, _ = run(capsys, "check", "--statistics", "--format", "json", "a.py")
    assert (code, json.loads(out)) == (1, [{"code": "XLA101", "name": "removed-api", "count": 1, "fixable": 1},
                                           {"code": "XLA102", "name": "deprecated-api", "count": 2, "fixable": 2}])
    (project / "b.py").write_text(MARK_STEP + "xm.rendezvous('x')\n")
    code, out, _ = run(capsys, "check", "--fix", "--statistics", "b.py")  # the table of what the fix leaves
    assert (code, out) == (1, "1     XLA103 planned-api-removal\n")
    code, out, _ = run(capsys, "check", "--format", "json", "a.py")
    records = json.loads(out)
    assert [(r["code"], r["line"], r["column"], r["fixable"]) for r in records] == [
        ("XLA102", 3, 1, True), ("XLA102", 4, 1, True), ("XLA101", 5, 5, True)]


def test_stdin(project, capsys, monkeypatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MARK_STEP.encode())))
    code, out, _ = run(capsys, "check", "-")
    assert (code, out) == (1, MARK_STEP_LINE.replace("a.py", "stdin"))


def test_rules_and_explain(capsys) -> None:
    code, out, _ = run(capsys, "rules")
    assert code == 0
    assert out.splitlines()[0].split() == ["CODE", "NAME", "FIXABLE", "DEFAULT"]
    assert out.splitlines()[1].split() == ["XLA001", "unused-noqa", "some", "off"]
    assert out.splitlines()[2].split() == ["XLA101", "removed-api", "some", "on"]
    assert out.splitlines()[7].split() == ["XLA106", "deprecated-env-var", "no", "on"]
    code, out, _ = run(capsys, "explain", "XLA102")
    assert code == 0 and out.startswith("XLA102: deprecated-api\n=====") and "\nWhy is this bad?\n-----" in out
    assert "<!--" not in out and "](../" not in out  # a terminal page: no HTML comment, no relative link


def test_rules_lists_off_by_default_and_explain_says_how_to_enable(capsys) -> None:
    rows = {line.split()[0]: line.split() for line in run(capsys, "rules")[1].splitlines()[1:]}
    assert rows["XLA901"] == ["XLA901", "dataloader-without-drop-last", "no", "off"]
    assert rows["XLA306"] == ["XLA306", "device-before-launch", "no", "on"]
    assert rows["XLA308"] == ["XLA308", "host-tensor-moved-every-step", "some", "on"]
    assert rows["XLA501"] == ["XLA501", "torchtpu-mechanical-rewrite", "some", "migrate-to", "torchtpu"]
    assert rows["XLA502"] == ["XLA502", "torchtpu-manual-rewrite", "no", "migrate-to", "torchtpu"]
    code, out, _ = run(capsys, "explain", "XLA901")
    assert code == 0 and "`--enable-extensions=XLA9`" in out and "`--extend-select XLA901`" in out
    assert "Off by default" not in run(capsys, "explain", "XLA306")[1]


def test_module_entry_point(project) -> None:
    (project / "a.py").write_text(MARK_STEP)
    result = subprocess.run([sys.executable, "-m", "flake8_xla", "check", "a.py"], capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (1, MARK_STEP_LINE)


def test_result_cache_skips_unchanged_files_and_follows_changes(project, capsys, monkeypatch) -> None:
    from flake8_xla import engine  # the CLI asks the engine to lint only for files not served from the cache

    (project / "a.py").write_text(MARK_STEP)
    first = run(capsys, "check", "a.py")
    assert first[:2] == (1, MARK_STEP_LINE)
    assert sorted(os.listdir(project / ".flake8_xla_cache"))[0] == ".gitignore"

    def no_linting(*args, **kwargs):
        raise AssertionError("an unchanged file was linted again")

    monkeypatch.setattr(engine, "lint_fixable", no_linting)
    assert run(capsys, "check", "a.py") == first  # served from the cache
    assert run(capsys, "check", "--select", "XLA101", "a.py")[:2] == (0, "")  # selection applies to cached results
    (project / "a.py").write_text(MARK_STEP + "# edited\n")
    assert "XLA000 flake8-xla internal error, please report: AssertionError: an unchanged file was linted again" in \
        run(capsys, "check", "a.py")[1]  # the content changed: linted again
    (project / "a.py").write_text(MARK_STEP)
    (project / "requirements.txt").write_text("torch_xla==2.4.0\n")
    assert "XLA000 flake8-xla internal error, please report: AssertionError: an unchanged file was linted again" in \
        run(capsys, "check", "a.py")[1]  # the target changed: linted again


def test_no_cache_writes_nothing(project, capsys) -> None:
    (project / "a.py").write_text(MARK_STEP)
    assert run(capsys, "check", "--no-cache", "a.py")[0] == 1
    assert not (project / ".flake8_xla_cache").exists()


# --- assume-torch-xla: model code in modules that never import torch_xla ---------------------------

MODEL = textwrap.dedent("""\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 1)

        def forward(self, x):
            if x.sum() > 0:
                x = self.fc(x)
            return x
    """)
MODEL_MSG = "XLA304 `if x.sum() > 0` branches on a tensor on every forward pass; use torch.where"
MODEL_LINE = f"{os.path.join('models', 'net.py')}:11:12: {MODEL_MSG}\n"


@pytest.fixture
def model_project(project):
    (project / "models").mkdir()
    (project / "models" / "net.py").write_text(MODEL)
    (project / "other.py").write_text(MODEL)  # the same code outside models/
    return project


def test_model_code_without_torch_xla_is_skipped_unless_assumed(model_project) -> None:
    def check(*argv):
        result = subprocess.run([sys.executable, "-m", "flake8_xla", "check", "--no-cache", *argv],
                                capture_output=True, text=True, cwd=model_project)
        return result.returncode, result.stdout

    assert check("models") == (0, "")
    assert check("--assume-torch-xla", "models") == (1, MODEL_LINE)
    (model_project / "pyproject.toml").write_text("[tool.flake8-xla]\nassume-torch-xla = true\n")
    assert check("models") == (1, MODEL_LINE)
    assert check("--no-assume-torch-xla", "models") == (0, "")  # the command line wins over the file


@pytest.mark.parametrize("name, config", [
    ("pyproject.toml", '[tool.flake8-xla]\nassume-torch-xla = ["models/*"]\n'),
    ("pyproject.toml", '[tool.flake8-xla]\nassume-torch-xla = "models/*.py, tools/*"\n'),
    ("setup.cfg", "[flake8-xla]\nassume-torch-xla =\n    models/*\n    tools/*\n"),
    ("tox.ini", "[flake8-xla]\nassume-torch-xla = models/*\n"),
])
def test_assume_torch_xla_as_glob_patterns(model_project, capsys, name, config) -> None:
    (model_project / name).write_text(config)
    assert run(capsys, "check", "--no-cache", ".")[:2] == (1, MODEL_LINE)  # other.py: not named, not linted
    assert run(capsys, "check", "--no-cache", "--assume-torch-xla", ".")[1] == \
        f"other.py:11:12: {MODEL_MSG}\n" + MODEL_LINE


@pytest.mark.parametrize("config, reported", [
    ("[flake8-xla]\nassume-torch-xla = true\n", True),
    ("[flake8-xla]\nassume-torch-xla = false\n", False),
    ("[flake8]\nxla-assume-torch-xla = true\nmax-line-length = 100\n", True),  # the flake8 plugin's option
    ("[flake8]\nxla_assume_torch_xla = yes\n", True),
    ("[flake8]\nxla-assume-torch-xla = off\n", False),
])
def test_assume_torch_xla_in_ini_files(model_project, capsys, config, reported) -> None:
    (model_project / "setup.cfg").write_text(config)
    assert run(capsys, "check", "--no-cache", "models")[:2] == ((1, MODEL_LINE) if reported else (0, ""))


@pytest.mark.parametrize("name, config, message", [
    ("setup.cfg", "[flake8]\nxla-assume-torch-xla = models/*\n",
     "[flake8]: xla-assume-torch-xla must be true or false, not 'models/*' (flake8 reads it as a boolean; "
     "glob patterns go in [flake8-xla] or [tool.flake8-xla])"),
    ("pyproject.toml", "[tool.flake8-xla]\nassume-torch-xla = 1\n",
     "[tool.flake8-xla]: assume-torch-xla must be true, false or a list of glob patterns, not 1"),
])
def test_bad_assume_torch_xla_is_a_config_error(model_project, capsys, name, config, message) -> None:
    (model_project / name).write_text(config)
    code, out, err = run(capsys, "check", "models")
    assert (code, out) == (2, "")
    assert err.startswith("flake8-xla: error: ") and err.endswith(message + "\n") and err.count("\n") == 1


def test_result_cache_follows_the_assume_torch_xla_setting(model_project, capsys, monkeypatch) -> None:
    from flake8_xla import engine

    (model_project / "a.py").write_text(MARK_STEP)
    assert run(capsys, "check", "a.py", "models")[:2] == (1, MARK_STEP_LINE)
    # the setting is part of the key: what was judged without it is judged again with it
    assert run(capsys, "check", "--assume-torch-xla", "a.py", "models")[:2] == (1, MARK_STEP_LINE + MODEL_LINE)
    assert run(capsys, "check", "a.py", "models")[:2] == (1, MARK_STEP_LINE)  # and back

    def no_linting(*args, **kwargs):
        raise AssertionError("an unchanged file was linted again")

    assert run(capsys, "check", "--assume-torch-xla", "a.py", "models")[:2] == (1, MARK_STEP_LINE + MODEL_LINE)
    monkeypatch.setattr(engine, "lint_fixable", no_linting)
    assert run(capsys, "check", "--assume-torch-xla", "a.py", "models")[:2] == (1, MARK_STEP_LINE + MODEL_LINE)
    assert "XLA000 flake8-xla internal error, please report: AssertionError: an unchanged file was linted again" in \
        run(capsys, "check", "a.py")[1]  # the setting changed: linted again
    (model_project / "pyproject.toml").write_text("[tool.flake8-xla]\nassume-torch-xla = true\n")
    (model_project / "models" / "net.py").write_text(MODEL + "# edited\n")
    assert "XLA000 flake8-xla internal error, please report: AssertionError: an unchanged file was linted again" in \
        run(capsys, "check", "models")[1]  # the content changed: linted again (the setting from the file counts)


def test_sync_functions_option_and_config(tmp_path, monkeypatch, capsys) -> None:
    """A loop ending with the project's own sync wrapper is silent once the wrapper is declared, on
    the command line or in [tool.flake8-xla]; the result cache does not mix the two answers."""
    from test_flake8_plugin import SYNC_WRAPPER_LOOP

    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text(SYNC_WRAPPER_LOOP)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "check", "--isolated", "--xla-target-version", "2.9", "--output-format", "json", "a.py")
    assert code == 1 and [(d["line"], d["code"]) for d in json.loads(out)] == [(7, "XLA305")]
    code, out, _ = run(capsys, "check", "--isolated", "--xla-target-version", "2.9", "--sync-functions", "mylib.sync",
                       "a.py")
    assert code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.flake8-xla]\nsync-functions = ["mylib.sync"]\n')
    code, out, _ = run(capsys, "check", "--xla-target-version", "2.9", "a.py")
    assert code == 0
    code, _, err = run(capsys, "check", "--sync-functions", "sync", "a.py")
    assert code == 2 and "--sync-functions: 'sync' is not a qualified function name (e.g. mylib.sync)" in err
