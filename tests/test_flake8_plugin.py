"""The flake8 front-end, driven through the real flake8 command line."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARK_STEP = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"
MARK_STEP_MSG = "XLA102 xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)"
LOADER = "import torch_xla\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader(train_set, batch_size=64)\n"
LOADER_MSG = "XLA901 DataLoader(...) may end with a smaller batch, a new XLA graph; pass drop_last=True"


def flake8(*args: str, cwd=None, stdin: str = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", "--select=XLA,E999", *args], cwd=cwd,
                          input=stdin, capture_output=True, text=True)


def test_bundled_example_output_is_exact() -> None:
    result = flake8("--xla-target-version=2.9", "examples/train_old_api.py", cwd=ROOT)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 17
    assert lines[0] == ("examples/train_old_api.py:12:8: XLA104 torch_xla.experimental.xla_sharding moved to "
                        "torch_xla.distributed.spmd (2.2+)")
    assert ("examples/train_old_api.py:22:18: XLA101 xm.xrt_world_size() was removed in torch_xla 2.7; "
            "use torch_xla.runtime.world_size() (2.1+)") in lines
    codes = sorted(line.split(": ", 1)[1].split()[0] for line in lines)
    # xm.save, xm.optimizer_step, ... have no upstream replacement: XLA903, off by default
    # xm.rendezvous is planned (it warns only through xla_device()): XLA103
    assert codes == (["XLA101"] * 2 + ["XLA102"] * 2 + ["XLA103"] * 4 + ["XLA104"] * 2 + ["XLA105"] * 3
                     + ["XLA106"] * 2 + ["XLA202", "XLA205"])  # FSDP: optimizer_step reduces twice, rank-0-only save


def test_stdin_with_display_name(tmp_path) -> None:
    result = flake8("--xla-target-version=2.9", "--stdin-display-name=train.py", "-", cwd=tmp_path,
                    stdin=MARK_STEP)
    assert result.stdout == f"train.py:2:1: {MARK_STEP_MSG}\n"


def test_jobs_gives_the_same_result(tmp_path) -> None:
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text("\n" * i + MARK_STEP)
    serial = flake8("--xla-target-version=2.9", "-j1", ".", cwd=tmp_path)
    parallel = flake8("--xla-target-version=2.9", "-j2", ".", cwd=tmp_path)
    assert parallel.returncode == serial.returncode == 1
    assert sorted(parallel.stdout.splitlines()) == sorted(serial.stdout.splitlines())
    assert len(serial.stdout.splitlines()) == 6


def test_noqa_on_the_reported_line(tmp_path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch_xla.core.xla_model as xm\n"
        "xm.mark_step()  # noqa: XLA102\n"
        "xm.mark_step()  # noqa: XLA101\n"
        "xm.mark_step(\n"
        ")  # noqa: XLA102 -- wrong line: the diagnostic is on the call's first line\n")
    result = flake8("--xla-target-version=2.9", "a.py", cwd=tmp_path)
    assert result.stdout.splitlines() == [f"a.py:3:1: {MARK_STEP_MSG}", f"a.py:4:1: {MARK_STEP_MSG}"]


def test_columns_count_characters_on_non_ascii_lines(tmp_path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch_xla.core.xla_model as xm\nétiquette = 'äöü'; xm.mark_step()\n", encoding="utf-8")
    result = flake8("--xla-target-version=2.9", "a.py", cwd=tmp_path)
    assert result.stdout == f"a.py:2:20: {MARK_STEP_MSG}\n"


def test_syntax_error_gets_only_e999(tmp_path) -> None:
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step(\n")
    result = flake8("a.py", cwd=tmp_path)
    assert [line.split()[1] for line in result.stdout.splitlines()] == ["E999"]


def test_target_from_flake8_config(tmp_path) -> None:
    (tmp_path / "setup.cfg").write_text("[flake8]\nxla-target-version = 2.4\n")
    (tmp_path / "a.py").write_text(MARK_STEP + "xm.get_ordinal()\n")
    result = flake8("a.py", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == ""


def test_target_inferred_from_requirements(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torch_xla[tpu]>=2.6\n")
    (tmp_path / "a.py").write_text(MARK_STEP + "xm.get_ordinal()\n")
    result = flake8("a.py", cwd=tmp_path)
    assert result.stdout == ("a.py:3:1: XLA102 xm.get_ordinal() is deprecated since torch_xla 2.5 (removed in 2.7); "
                             "use torch_xla.runtime.global_ordinal() (2.1+)\n")


def test_bad_target_version_is_a_usage_error(tmp_path) -> None:
    (tmp_path / "a.py").write_text(MARK_STEP)
    result = flake8("--xla-target-version=latest", "a.py", cwd=tmp_path)
    assert result.returncode != 0
    assert "not a torch_xla version: 'latest'" in result.stderr


def test_vscode_flake8_format(tmp_path) -> None:
    """The command line the VS Code flake8 extension runs (severity comes from the code's first letter)."""
    result = flake8("--xla-target-version=2.9", "--format=%(row)d,%(col)d,%(code).1s,%(code)s:%(text)s", "-",
                    "--stdin-display-name", str(tmp_path / "a.py"), cwd=tmp_path, stdin=MARK_STEP)
    assert result.stdout == "2,1,X,XLA102:" + MARK_STEP_MSG.split(" ", 1)[1] + "\n"


def test_opt_in_rules_run_only_with_enable_extensions(tmp_path) -> None:
    (tmp_path / "a.py").write_text(LOADER + "import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    default = flake8("--xla-target-version=2.9", "a.py", cwd=tmp_path)
    assert default.stdout == f"a.py:6:1: {MARK_STEP_MSG}\n", default.stderr
    # selecting the code does not load the opt-in checker (flake8's off_by_default)
    assert flake8("--xla-target-version=2.9", "--extend-select=XLA901", "a.py", cwd=tmp_path).stdout == default.stdout
    enabled = flake8("--xla-target-version=2.9", "--enable-extensions=XLA9", "a.py", cwd=tmp_path)
    assert enabled.returncode == 1, enabled.stderr
    # each code comes from one checker only: no duplicates
    assert enabled.stdout.splitlines() == [f"a.py:4:10: {LOADER_MSG}", f"a.py:6:1: {MARK_STEP_MSG}"]
    ignored = flake8("--xla-target-version=2.9", "--enable-extensions=XLA9", "--extend-ignore=XLA901", "a.py",
                     cwd=tmp_path)
    assert ignored.stdout == default.stdout


def test_opt_in_rules_enabled_in_flake8_config(tmp_path) -> None:
    (tmp_path / "setup.cfg").write_text("[flake8]\nenable-extensions = XLA9\nxla-target-version = 2.9\n")
    (tmp_path / "a.py").write_text(LOADER)
    result = subprocess.run([sys.executable, "-m", "flake8", "a.py"], cwd=tmp_path, capture_output=True, text=True)
    assert [line for line in result.stdout.splitlines() if ": XLA" in line] == [f"a.py:4:10: {LOADER_MSG}"], \
        result.stdout + result.stderr


def test_plugin_is_registered() -> None:
    result = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True)
    assert "flake8-xla: 0.1.0" in result.stdout


@pytest.mark.parametrize("content", [
    b"\x00\x01import torch_xla\n",
    b"# -*- coding: utf-8 -*-\nx = '\xff\xfe torch_xla'\n",
])
def test_binary_garbage_does_not_crash(tmp_path, content: bytes) -> None:
    (tmp_path / "a.py").write_bytes(content)
    result = flake8("a.py", cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert "XLA" not in result.stdout
    assert result.returncode in (0, 1)


def test_internal_error_is_reported_not_raised(monkeypatch) -> None:
    import ast

    from flake8_xla.plugin import checker as plugin_checker

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(plugin_checker, "lint", explode)
    checker = plugin_checker.XlaChecker(ast.parse(MARK_STEP), MARK_STEP.splitlines(True), "a.py")
    assert list(checker.run()) == [
        (1, 0, "XLA000 flake8-xla internal error, please report: RuntimeError: boom", plugin_checker.XlaChecker)]


def test_readme_demo_infers_the_target_from_the_example_requirements() -> None:
    """The README's command passes no target: examples/requirements.txt pins torch_xla 2.9."""
    result = flake8("examples/train_old_api.py", cwd=ROOT)
    assert len(result.stdout.splitlines()) == 17, result.stdout


def test_a_changed_requirement_counts_in_a_long_lived_process(tmp_path, monkeypatch, capsys) -> None:
    """Editors run flake8 in-process on every save (VS Code's flake8 server); the target must
    follow the project's requirement as it is now, not as it was on the first run."""
    from flake8.main.cli import main as flake8_main

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text(MARK_STEP)
    (tmp_path / "requirements.txt").write_text("torch_xla==2.6.0\n")
    assert flake8_main(["--select", "XLA", "a.py"]) == 0
    (tmp_path / "requirements.txt").write_text("torch_xla==2.9.0\n")
    assert flake8_main(["--select", "XLA", "a.py"]) == 1
    assert capsys.readouterr().out.splitlines() == ["a.py:2:1: " + MARK_STEP_MSG]


def test_an_unsaved_new_file_belongs_to_its_directory_s_project(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torch_xla==2.9.0\n")
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "requirements.txt").write_text("torch_xla==2.6.0\n")
    result = subprocess.run([sys.executable, "-m", "flake8", "--select", "XLA", "--stdin-display-name",
                             "trainer/new.py", "-"], input=MARK_STEP, capture_output=True, text=True, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")  # 2.6: mark_step is fine there


MODEL = ("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
         "        super().__init__()\n        self.fc = nn.Linear(8, 1)\n\n    def forward(self, x):\n"
         "        if x.sum() > 0:\n            x = self.fc(x)\n        return x\n")
MODEL_MSG = "XLA304 `if x.sum() > 0` branches on a tensor on every forward pass; use torch.where"


def test_model_code_without_torch_xla_is_linted_with_xla_assume_torch_xla(tmp_path) -> None:
    (tmp_path / "net.py").write_text(MODEL)
    assert flake8("net.py", cwd=tmp_path).stdout == ""
    result = flake8("--xla-assume-torch-xla", "net.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, f"net.py:11:12: {MODEL_MSG}\n"), result.stderr
    # the opt-in checker honours it too (and reports each code once)
    assert flake8("--xla-assume-torch-xla", "--enable-extensions=XLA9", "net.py", cwd=tmp_path).stdout == \
        result.stdout


@pytest.mark.parametrize("config, reported", [
    ("[flake8]\nxla-assume-torch-xla = true\n", True),
    ("[flake8]\nxla-assume-torch-xla = false\n", False),
])
def test_xla_assume_torch_xla_from_flake8_config(tmp_path, config, reported) -> None:
    (tmp_path / "setup.cfg").write_text(config)
    (tmp_path / "net.py").write_text(MODEL)
    result = flake8("net.py", cwd=tmp_path)
    assert result.stdout == (f"net.py:11:12: {MODEL_MSG}\n" if reported else ""), result.stderr


# --- input nested deeper than Python (or our walks) can go ---------------------------------------

TOO_DEEP = "E999 RecursionError: too deeply nested to analyse"


def test_nesting_past_our_walks_is_an_e999_not_an_internal_error(tmp_path) -> None:
    """flake8 parses `a.b.b....item()` 400 attributes deep (and pyflakes walks it), but the value
    analysis recurses deeper than Python's default limit: one E999, also with the opt-in checker."""
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nfor b in loader:\n  loss.backward()\n"
                                   "  y = a" + ".b" * 400 + ".item()\n")
    for extra in ((), ("--enable-extensions=XLA9",)):
        result = flake8(*extra, "a.py", cwd=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (1, f"a.py:1:1: {TOO_DEEP}\n", "")


@pytest.mark.parametrize("nested", ["(" * 300 + "1" + ")" * 300, "[" * 100_000 + "]" * 100_000])
def test_nesting_past_the_parser_limit_is_flake8_s_own_e999(tmp_path, nested) -> None:
    """CPython refuses the file; flake8 reports that itself and never runs the plugin: one E999."""
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nx = " + nested + "\n")
    result = flake8("a.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "a.py:2:206: E999 SyntaxError: too many nested parentheses\n")


@pytest.mark.parametrize("error", [RecursionError("maximum recursion depth exceeded"), MemoryError()])
def test_exhausted_recursion_or_memory_is_reported_once_per_file(monkeypatch, error) -> None:
    import ast

    from flake8_xla.plugin import checker as plugin_checker

    def explode(*args, **kwargs):
        raise error

    monkeypatch.setattr(plugin_checker, "lint", explode)
    tree = ast.parse(MARK_STEP)
    found = [list(checker(tree, MARK_STEP.splitlines(True), "a.py").run())
             for checker in (plugin_checker.XlaChecker, plugin_checker.XlaOptInChecker)]
    message = f"E999 {type(error).__name__}: too deeply nested to analyse"
    assert found == [[(1, 0, message, plugin_checker.XlaChecker)], []]  # the second checker sees the same tree
    # a new file (a new tree) gets its own
    assert list(plugin_checker.XlaOptInChecker(ast.parse(MARK_STEP), [MARK_STEP], "b.py").run()) == [
        (1, 0, message, plugin_checker.XlaOptInChecker)]


def test_a_target_outside_the_known_releases_warns(tmp_path) -> None:
    (tmp_path / "a.py").write_text(MARK_STEP)
    result = flake8("--xla-target-version=2.12", "a.py", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout.startswith("a.py:2:1: XLA102 ")
    assert result.stderr == ("flake8-xla: warning: --xla-target-version: torch_xla 2.12 is newer than the last "
                             "release flake8-xla knows (2.9); its rule data may not describe that release\n")


SYNC_WRAPPER_LOOP = ("import torch\nimport torch_xla\nimport mylib\n"
                     "model = torch.nn.Linear(2, 2).to(torch_xla.device())\n"
                     "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                     "loader = torch.utils.data.DataLoader(range(8), batch_size=2)\n"
                     "for batch in loader:\n"
                     "    model(batch).sum().backward()\n"
                     "    optimizer.step()\n"
                     "    mylib.sync()\n")


def test_sync_functions_from_the_flake8_config_and_the_command_line(tmp_path) -> None:
    (tmp_path / "a.py").write_text(SYNC_WRAPPER_LOOP)
    plain = flake8("--xla-target-version=2.9", "a.py", cwd=tmp_path)
    assert [line.split(" ")[:2] for line in plain.stdout.splitlines()] == [["a.py:7:1:", "XLA305"]]
    assert flake8("--xla-target-version=2.9", "--xla-sync-functions=mylib.sync", "a.py", cwd=tmp_path).stdout == ""
    (tmp_path / "setup.cfg").write_text("[flake8]\nxla-sync-functions = mylib.sync\n")
    assert flake8("--xla-target-version=2.9", "a.py", cwd=tmp_path).stdout == ""
    bad = flake8("--xla-sync-functions=sync", "a.py", cwd=tmp_path)
    assert bad.returncode != 0
    assert "--xla-sync-functions: 'sync' is not a qualified function name (e.g. mylib.sync)" in bad.stderr


def test_the_fix_mark_carries_the_applicability_across_flake8() -> None:
    from flake8_xla.plugin.fix_mark import marked, unmarked

    assert [marked("m", applicability) for applicability in ("safe", "unsafe", None)] == ["[*] m", "[~] m", "m"]
    assert [unmarked("XLA102", marked("m", a)) for a in ("safe", "unsafe", None)] == [
        ("m", "safe"), ("m", "unsafe"), ("m", None)]
    assert unmarked("E501", "[*] another plugin's text") == ("[*] another plugin's text", None)
