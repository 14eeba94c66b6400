"""The CLI's usage errors, what it says it decided (-v, --show-settings), and its conveniences:
--show-source, --color, clean, --stdin-filename, `fix -`, --add-noqa."""
import io
import subprocess
import sys
import textwrap

import pytest

from cli_helpers import run
from flake8_xla.engine import lint_source
from flake8_xla.output.terminal import wants_color

MARK_STEP = "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n"
FIXED = "import torch_xla\n\ntorch_xla.sync()\n"
# the engine's wording (its own tests pin it); these tests pin how the CLI reports it
MESSAGE = f"XLA102 [*] {lint_source(MARK_STEP, target='2.9')[0].message}"
WORLD_MESSAGE = "XLA101 [*] " + lint_source("import torch_xla.core.xla_model as xm\nxm.xrt_world_size()\n",
                                            target="2.9")[0].message


@pytest.fixture
def project(project, monkeypatch):
    (project / "a.py").write_text(MARK_STEP)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return project


def feed_stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


# --- 14: usage errors are one line and exit 2 --------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["check", "--per-file-ignores", "a.py", "."],
     "--per-file-ignores: 'a.py' is not GLOB:CODES (e.g. \"tests/*.py:XLA101\")"),
    (["check", "--per-file-ignores", "a.py:", "."],
     "--per-file-ignores: 'a.py:' is not GLOB:CODES (e.g. \"tests/*.py:XLA101\")"),
    (["check", "--output-file", "missing/report.txt", "."],
     "--output-file: missing/report.txt: no such directory: missing"),
    (["check", "--output-file", ".", "."], "--output-file: . is a directory"),
    (["check", "-j", "0", "."], "argument -j/--jobs: must be at least 1, not 0"),
    (["fix", "-j", "-3", "."], "argument -j/--jobs: must be at least 1, not -3"),
    (["check", "-j", "many", "."], "argument -j/--jobs: expected a whole number or auto, not 'many'"),
    (["check", "--max-file-size", "0", "."],
     "argument --max-file-size: not a size: '0' (expected a positive number of bytes, or e.g. 512K, 10M, 1G)"),
    (["check", "--color", "sometimes", "."],
     "argument --color: invalid choice: 'sometimes' (choose from 'auto', 'always', 'never')"),
    (["check", "--no-such-option", "."], "unrecognized arguments: --no-such-option"),
    (["check", "--stdin-filename", "x.py", "a.py"],
     "--stdin-filename names what `-` (stdin) stands for; pass `-` as the path"),
    (["check", "--add-noqa", "-"], "--add-noqa works on files, not stdin"),
    (["fix", "-", "a.py"], "`fix -` fixes stdin alone; name no other paths with it"),
])
def test_usage_errors_are_one_line_and_exit_2(project, capsys, argv, message) -> None:
    assert run(capsys, *argv) == (2, "", f"flake8-xla: error: {message}\n")
    assert (project / "a.py").read_text() == MARK_STEP


def test_usage_errors_from_the_console_script_have_no_traceback(project) -> None:
    for argv in (["--per-file-ignores", "a.py"], ["-j", "0"], ["--output-file", "missing/report.txt"]):
        result = subprocess.run([sys.executable, "-m", "flake8_xla", "check", *argv, "a.py"], capture_output=True,
                                text=True)
        assert (result.returncode, result.stdout, result.stderr.count("\n")) == (2, "", 1)
        assert result.stderr.startswith("flake8-xla: error: ")


# --- 19: what was decided ---------------------------------------------------------------------------------

def test_show_settings_prints_what_was_decided_and_exits_0(project, capsys) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "b.py").write_text(MARK_STEP)
    (project / "other").mkdir()
    (project / "other" / "setup.cfg").write_text("[options]\ninstall_requires =\n    torch_xla>=2.5\n")
    (project / "other" / "c.py").write_text(MARK_STEP)
    (project / "pyproject.toml").write_text('[tool.flake8-xla]\nextend-exclude = ["gen"]\nignore = ["XLA106"]\n')
    code, out, err = run(capsys, "check", "--show-settings", ".")
    root = str(project)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"config file: {root}/pyproject.toml [tool.flake8-xla]",
        "project root (excludes and per-file-ignores are relative to it): .",
        "target for .: torch_xla 2.9, from requirements.txt:1: torch_xla==2.9.0 (2 files)",
        "target for other: torch_xla 2.5, from other/setup.cfg:3: torch_xla>=2.5 (1 file)",
        "select: XLA (default)",
        "extend-select: (none)",
        "ignore: XLA106",
        "per-file-ignores: (none)",
        "exclude: default: .git, .hg, .svn, .tox, .nox, .venv, .eggs, *.egg-info, __pycache__, node_modules, "
        ".mypy_cache, .pytest_cache, .ruff_cache, site-packages (at any depth); build, dist, venv (at the project "
        "root only)",
        "extend-exclude: gen",
        "respect-gitignore: true",
        "assume-torch-xla: false",
        "sync-functions: (none)",
        "max-file-size: 10 MiB",
        "files: 3",
    ]
    assert not (project / ".flake8_xla_cache").exists()  # nothing was linted
    out = run(capsys, "check", "--show-settings", "--xla-target-version", "2.7", "--no-respect-gitignore", "a.py")[1]
    assert "target for .: torch_xla 2.7, from --xla-target-version 2.7 (1 file)\n" in out
    assert "respect-gitignore: false\n" in out
    out = run(capsys, "check", "--show-settings", "--sync-functions", "mylib.sync,b.step", "a.py")[1]
    assert "sync-functions: b.step, mylib.sync\n" in out


def test_verbose_prints_the_settings_on_stderr(project, capsys) -> None:
    code, out, err = run(capsys, "check", "-v", "--no-cache", "a.py")
    assert (code, out) == (1, f"a.py:3:1: {MESSAGE}\n")
    assert err.splitlines()[:3] == [
        "flake8-xla: config file: (none: defaults)",
        "flake8-xla: project root (excludes and per-file-ignores are relative to it): .",
        "flake8-xla: target for .: torch_xla 2.9, from requirements.txt:1: torch_xla==2.9.0 (1 file)"]


# --- 21: conveniences ----------------------------------------------------------------------------------------

SOURCE = "import torch_xla.core.xla_model as xm\n\nif True:\n\txm.mark_step()\nn = xm.xrt_world_size()\n"


def test_show_source_prints_the_line_and_a_caret(project, capsys) -> None:
    (project / "b.py").write_text(SOURCE)
    code, out, _ = run(capsys, "check", "--no-cache", "--show-source", "b.py")
    assert (code, out) == (1, f"b.py:4:2: {MESSAGE}\n\txm.mark_step()\n\t^\n"
                              f"b.py:5:5: {WORLD_MESSAGE}\nn = xm.xrt_world_size()\n    ^\n")
    # from the cache too, and for what fix leaves
    assert run(capsys, "check", "--show-source", "b.py")[1] == run(capsys, "check", "--show-source", "b.py")[1] == out
    (project / "c.py").write_text("import torch_xla.core.xla_model as xm\nxm.rendezvous('init')\n")
    code, out, _ = run(capsys, "fix", "--show-source", "c.py")
    assert code == 1 and "\nxm.rendezvous('init')\n^\n  = help: " in out


def test_show_source_in_a_markdown_guide(project, capsys) -> None:
    (project / "guide.md").write_text("Intro\n\n```python\n" + MARK_STEP + "```\n")
    code, out, _ = run(capsys, "check", "--show-source", "guide.md")
    assert (code, out) == (1, f"guide.md:6:1: {MESSAGE}\nxm.mark_step()\n^\n")


def test_color(project, capsys, monkeypatch) -> None:
    plain = f"a.py:3:1: {MESSAGE}\n"
    assert run(capsys, "check", "--no-cache", "a.py")[1] == plain  # not a terminal
    colored = run(capsys, "check", "--no-cache", "--color", "always", "a.py")[1]
    assert colored.startswith("\x1b[1ma.py\x1b[0m\x1b[36m:\x1b[0m3\x1b[36m:\x1b[0m1\x1b[36m:\x1b[0m "
                              "\x1b[1m\x1b[31mXLA102")
    monkeypatch.setenv("NO_COLOR", "1")
    assert run(capsys, "check", "--no-cache", "--color", "always", "a.py")[1] == colored  # the option wins
    assert run(capsys, "check", "--no-cache", "--color", "always", "--format", "json", "a.py")[1].startswith("[")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not wants_color("auto", Terminal())  # NO_COLOR
    monkeypatch.delenv("NO_COLOR")
    assert wants_color("auto", Terminal()) and not wants_color("never", Terminal())
    assert not wants_color("auto", io.StringIO())


def test_clean_removes_the_result_cache(project, capsys) -> None:
    assert run(capsys, "check", "a.py")[0] == 1
    assert (project / ".flake8_xla_cache").is_dir()
    assert run(capsys, "clean") == (0, "", "flake8-xla: removed the result cache .flake8_xla_cache\n")
    assert not (project / ".flake8_xla_cache").exists()
    assert run(capsys, "clean") == (0, "", "flake8-xla: no result cache at .flake8_xla_cache\n")


def test_clean_never_removes_a_directory_that_is_not_a_cache(project, capsys) -> None:
    (project / "src").mkdir()
    (project / "src" / "keep.py").write_text("x = 1\n")
    assert run(capsys, "clean", "--cache-dir", "src") == (
        2, "", "flake8-xla: error: src holds files that are not flake8-xla's result cache; not removed\n")
    assert (project / "src" / "keep.py").exists()


def test_stdin_filename_names_stdin_for_report_and_per_file_ignores(project, capsys, monkeypatch) -> None:
    feed_stdin(monkeypatch, MARK_STEP)
    assert run(capsys, "check", "--stdin-filename", "pkg/mod.py", "-")[:2] == (1, f"pkg/mod.py:3:1: {MESSAGE}\n")
    feed_stdin(monkeypatch, MARK_STEP)
    assert run(capsys, "check", "--stdin-filename", "tests/t.py", "--per-file-ignores", "tests/*:XLA102", "-")[:2] \
        == (0, "")
    feed_stdin(monkeypatch, "Intro\n\n```python\n" + MARK_STEP + "```\n")
    assert run(capsys, "check", "--stdin-filename", "guide.md", "-")[:2] == (1, f"guide.md:6:1: {MESSAGE}\n")


def test_fix_stdin_prints_the_fixed_source(project, capsys, monkeypatch) -> None:
    feed_stdin(monkeypatch, MARK_STEP + "xm.rendezvous('init')\n")
    code, out, err = run(capsys, "fix", "--stdin-filename", "pkg/mod.py", "-")
    assert (code, out) == (1, "import torch_xla\nimport torch_xla.core.xla_model as xm\n\ntorch_xla.sync()\n"
                              "xm.rendezvous('init')\n")
    # stdout holds the code, stderr the diagnostic left (rendezvous: an unsafe fix only)
    assert err.startswith("pkg/mod.py:5:1: XLA103 xm.rendezvous() is planned for removal")
    assert "Fixed 1 issue in 1 file (XLA102 x1)" in err
    feed_stdin(monkeypatch, "x = 1\r\n")
    unchanged = run(capsys, "fix", "--xla-target-version", "2.9", "-")
    assert unchanged == (0, "x = 1\r\n", "Fixed 0 issues in 0 files.\n")  # unchanged, byte for byte
    feed_stdin(monkeypatch, MARK_STEP)
    code, out, _ = run(capsys, "fix", "--diff", "-")
    assert code == 1 and out.startswith("--- a/stdin\n+++ b/stdin\n")  # as for a file: nothing was written
    assert (project / "a.py").read_text() == MARK_STEP


ANNOTATED = [
    ("xm.mark_step()\n", "xm.mark_step()  # noqa: XLA102\n"),
    ("n = xm.xrt_world_size()  # noqa: XLA102\n", "n = xm.xrt_world_size()  # noqa: XLA102, XLA101\n"),
    ("n = xm.xrt_world_size()  # why: legacy\n", "n = xm.xrt_world_size()  # why: legacy  # noqa: XLA101\n"),
    ('s = f"""{xm.xrt_world_size()}\n"""\n', 's = f"""{xm.xrt_world_size()}\n"""  # noqa: XLA101\n'),
    ("m = xm.xrt_world_size() + \\\n    1\n", "m = xm.xrt_world_size() + \\\n    1  # noqa: XLA101\n"),
    ("k = (xm.xrt_world_size(),\n     2)\n", "k = (xm.xrt_world_size(),  # noqa: XLA101\n     2)\n"),
    ("xm.mark_step(); n = xm.xrt_world_size()\r\n",
     "xm.mark_step(); n = xm.xrt_world_size()  # noqa: XLA101, XLA102\r\n"),
]


@pytest.mark.parametrize("line, annotated", ANNOTATED)
def test_add_noqa(project, capsys, line, annotated) -> None:
    header = "import torch_xla.core.xla_model as xm\n"
    (project / "b.py").write_text(header + line, newline="")
    code, out, err = run(capsys, "check", "--no-cache", "--add-noqa", "b.py")
    assert (code, out) == (0, "")
    assert err.startswith("Added ") and err.endswith(" in 1 file.\n")
    assert (project / "b.py").read_bytes().decode() == header + annotated
    assert run(capsys, "check", "--no-cache", "b.py")[:2] == (0, "")
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "XLA", "b.py"], capture_output=True, text=True)
    assert (flake8.returncode, flake8.stdout) == (0, "")  # flake8 reads the comments the same way
    assert run(capsys, "check", "--no-cache", "--add-noqa", "b.py") == (0, "", "Added 0 noqa comments in 0 files.\n")


def test_add_noqa_leaves_what_it_cannot_annotate(project, capsys) -> None:
    (project / "bad.py").write_text("import torch_xla\ndef f(:\n")
    (project / "guide.md").write_text("```python\n" + MARK_STEP + "```\n")
    code, out, err = run(capsys, "check", "--no-cache", "--add-noqa", "-v", "bad.py", "guide.md")
    assert (code, out) == (1, f"bad.py:2:7: E999 SyntaxError: invalid syntax\nguide.md:4:1: {MESSAGE}\n")
    assert "flake8-xla: note: guide.md: --add-noqa leaves notebooks and documents alone\n" in err
    assert err.endswith("Added 0 noqa comments in 0 files.\n")
    assert (project / "bad.py").read_text() == "import torch_xla\ndef f(:\n"


def test_fix_summary_says_what_a_companion_fix_changes(project, capsys) -> None:
    (project / "b.py").write_text(textwrap.dedent("""\
        import torch_xla.core.xla_model as xm

        xm.rendezvous("ready")
        """))
    (project / "guide.md").write_text("```python\n" + (project / "b.py").read_text() + "```\n")
    code, _, err = run(capsys, "fix", "--unsafe-fixes", "b.py", "guide.md")
    for name in ("b.py", "guide.md"):
        assert f"flake8-xla: {name}: note: xla_compat.rendezvous() needs no process group: without one the " \
               "workers meet in torch_xla's rendezvous, as before; with one it is a gloo barrier, without " \
               "torch_xla's graph syncs\n" in err


def test_a_target_option_outside_the_known_releases_warns_once(project, capsys) -> None:
    code, out, err = run(capsys, "check", "--no-cache", "--xla-target-version", "2.12", "a.py")
    assert (code, out) == (1, f"a.py:3:1: {MESSAGE}\n")
    assert err.splitlines()[0] == ("flake8-xla: warning: --xla-target-version: torch_xla 2.12 is newer than the "
                                   "last release flake8-xla knows (2.9); its rule data may not describe that "
                                   "release")
    assert err.count("warning") == 1


@pytest.mark.parametrize("body", ["y = a" + ".b" * 400 + ".item()",  # parses; deeper than our walks
                                  "x = a" + ".b" * 30000])  # deeper than Python's own parser
def test_nesting_past_what_we_can_analyse_is_e999_not_an_internal_error(project, capsys, body) -> None:
    (project / "deep.py").write_text("import torch_xla.core.xla_model as xm\nfor b in loader:\n"
                                     f"  loss.backward()\n  {body}\n")
    code, out, _ = run(capsys, "check", "--no-cache", "deep.py")
    assert (code, out) == (1, "deep.py:1:1: E999 RecursionError: too deeply nested to analyse\n")


def test_show_settings_names_the_directory_the_target_came_from(tmp_path, monkeypatch, capsys) -> None:
    """A folder with only a tox.ini (no torch_xla requirement) is not where the target is read:
    the report names the project root above it, whose pyproject.toml declares the floor."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = ["torch_xla>=2.6"]\n')
    sub = tmp_path / "tools"
    sub.mkdir()
    (sub / "tox.ini").write_text("[tox]\n")
    (sub / "b.py").write_text(MARK_STEP)
    monkeypatch.chdir(tmp_path)
    out = run(capsys, "check", "--isolated", "--show-settings", "tools/b.py")[1]
    assert "target for .: torch_xla 2.6, from pyproject.toml:3: torch_xla>=2.6 (1 file)\n" in out


def test_help_of_the_program_and_of_a_command(project, capsys) -> None:
    # a command's options are built only when the arguments name it: --help must still show them all
    code, out, _ = run(capsys, "--help")
    assert code == 0 and all(name in out for name in ("check", "fix", "explain", "rules", "clean"))
    code, out, _ = run(capsys, "check", "--help")
    assert code == 0 and "--no-cache" in out and "--statistics" in out and "--target-version" in out
    code, out, _ = run(capsys, "fix", "--help")
    assert code == 0 and "--diff" in out and "--statistics" not in out
    code, _, err = run(capsys, "chekc", "a.py")
    assert code == 2 and "invalid choice: 'chekc'" in err
