"""`flake8-xla server` driven over stdio by a real LSP client (see lsp_editor.py): diagnostics,
quick fixes, fix-all, `# noqa`, hover, notebooks, settings, broken buffers, internal errors, a
slow file, shutdown. Every expectation is the exact LSP payload the server sent."""
import json
import pathlib
import subprocess
import sys

import pytest
from lsprotocol import types as lsp

from cli_helpers import run as run_cli
from flake8_xla.engine import all_rules, lint_source
from flake8_xla.output.formats import docs_url
from lsp_editor import Editor, run, summary

RULES = {rule.code: rule for rule in all_rules()}
OLD_API = ("import torch_xla.core.xla_model as xm\n\n"
           "device = xm.xla_device()\n"
           "world = xm.xrt_world_size()\n"
           "for step in range(10):\n"
           "    xm.mark_step()\n")
XLA_DEVICE = ("XLA102", "Warning",
              "xm.xla_device() is deprecated since torch_xla 2.8; use torch_xla.device() (2.3+) (deprecated-api)")
WORLD_SIZE = ("XLA101", "Error",
              "xm.xrt_world_size() was removed in torch_xla 2.7; use torch_xla.runtime.world_size() (2.1+) "
              "(removed-api)")
MARK_STEP = ("XLA102", "Warning",
             "xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+) (deprecated-api)")
FIX_ALL = "source.fixAll.flake8-xla"


@pytest.fixture
def workspace(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / ".flake8").write_text("[flake8]\nxla-target-version = 2.9\n")
    return tmp_path


def titles(actions):
    return [(a.title, a.kind, a.is_preferred) for a in actions]


def test_diagnostics_quick_fix_fix_all_and_a_clean_file(workspace) -> None:
    async def scenario():
        async with Editor(workspace) as editor:
            capabilities = editor.initialize_result.capabilities
            assert list(capabilities.code_action_provider.code_action_kinds) == ["quickfix", FIX_ALL]
            assert capabilities.hover_provider is True
            uri = editor.open("train.py", OLD_API)
            diagnostics = await editor.diagnostics(uri, version=1)
            assert summary(diagnostics) == [(2, 9, 22, *XLA_DEVICE), (3, 8, 25, *WORLD_SIZE), (5, 4, 16, *MARK_STEP)]
            assert [(d.source, d.code_description.href) for d in diagnostics] == [
                ("flake8-xla", docs_url("XLA102")), ("flake8-xla", docs_url("XLA101")),
                ("flake8-xla", docs_url("XLA102"))]

            actions = await editor.code_actions(uri, 2, 12)
            assert titles(actions) == [
                ("XLA102: Replace with torch_xla.device", "quickfix", True),
                ("XLA102: add `# noqa: XLA102` to this line", "quickfix", None),
                ("Fix all safe flake8-xla issues in this file", FIX_ALL, None)]
            assert list(actions[0].diagnostics) == [diagnostics[0]]
            editor.apply(actions[0].edit)  # two edits: the import, and the call
            assert [e.new_text for e in actions[0].edit.changes[uri]] == [
                "import torch_xla\n", "device = torch_xla.device()\n"]
            after = await editor.diagnostics(uri, version=2)
            assert summary(after) == [(4, 8, 25, *WORLD_SIZE), (6, 4, 16, *MARK_STEP)]

            [fix_all] = await editor.code_actions(uri, 0, only=["source.fixAll"])
            assert fix_all.kind == FIX_ALL
            editor.apply(fix_all.edit)
            assert await editor.diagnostics(uri, version=3) == []
            assert editor.texts[uri] == ("import torch_xla\nimport torch_xla.runtime as xr\n\n"
                                         "device = torch_xla.device()\nworld = xr.world_size()\n"
                                         "for step in range(10):\n    torch_xla.sync()\n")
            assert await editor.code_actions(uri, 0, 0, 10) == []  # nothing left to offer

    run(scenario())


def test_an_unsafe_fix_is_labelled_and_noqa_silences_the_line(workspace) -> None:
    source = "import torch_xla.core.xla_model as xm\n\nxm.rendezvous('init')\n"
    message = "xm.rendezvous() is planned for removal; use xla_compat.rendezvous() (planned-api-removal)"

    async def scenario():
        async with Editor(workspace) as editor:
            uri = editor.open("sync.py", source)
            assert summary(await editor.diagnostics(uri, version=1)) == [(2, 0, 13, "XLA103", "Warning", message)]
            actions = await editor.code_actions(uri, 2, 3)
            assert titles(actions) == [
                ("XLA103: Replace with xla_compat.rendezvous (unsafe fix: review the change)", "quickfix", False),
                ("XLA103: add `# noqa: XLA103` to this line", "quickfix", None)]  # no safe fix: no fix-all
            assert await editor.code_actions(uri, 0, only=[FIX_ALL]) == [
                lsp.CodeAction("Fix all safe flake8-xla issues in this file", kind=FIX_ALL,
                               edit=lsp.WorkspaceEdit(changes={}))]
            editor.apply(actions[1].edit)
            assert editor.texts[uri] == \
                "import torch_xla.core.xla_model as xm\n\nxm.rendezvous('init')  # noqa: XLA103\n"
            assert await editor.diagnostics(uri, version=2) == []

    run(scenario())


def test_a_notebook_is_one_program_with_diagnostics_and_fixes_in_its_cells(workspace) -> None:
    async def scenario():
        async with Editor(workspace) as editor:
            cells = editor.open_notebook("train.ipynb", [
                ("code", "import torch_xla.core.xla_model as xm\n"), ("markdown", "# Training\n"),
                ("code", "for step in range(3):\n    xm.mark_step()\n")])
            assert [summary(await editor.diagnostics(cell)) for cell in cells] == [[], [], [(1, 4, 16, *MARK_STEP)]]
            actions = await editor.code_actions(cells[2], 1, 8)
            assert titles(actions) == [("XLA102: Replace with torch_xla.sync", "quickfix", True),
                                       ("XLA102: add `# noqa: XLA102` to this line", "quickfix", None),
                                       ("Fix all safe flake8-xla issues in this file", FIX_ALL, None)]
            # the import goes where the program's imports are, in the first cell; xm is then unused
            assert sorted(actions[0].edit.changes) == [cells[0], cells[2]]
            editor.apply(actions[0].edit)
            assert [editor.texts[cell] for cell in cells] == [
                "import torch_xla\n", "# Training\n", "for step in range(3):\n    torch_xla.sync()\n"]
            assert [await editor.diagnostics(cells[0]), await editor.diagnostics(cells[2])] == [[], []]
            assert [p.uri for p in editor.published].count(cells[1]) == 1  # the Markdown cell: unchanged

    run(scenario())


def test_a_notebook_edit_republishes_only_the_cells_it_changed(workspace) -> None:
    async def scenario():
        async with Editor(workspace) as editor:
            cells = editor.open_notebook("train.ipynb", [
                ("code", "import torch_xla.core.xla_model as xm\n"), ("code", "x = 1\n"),
                ("code", "xm.mark_step()\n")])
            assert [summary(await editor.diagnostics(cell)) for cell in cells] == [[], [], [(0, 0, 12, *MARK_STEP)]]

            def published():
                return [[p.uri for p in editor.published].count(cell) for cell in cells]

            editor.change(cells[2], "xm.mark_step()\nxm.mark_step()\n")  # the last cell: sent last
            assert summary(await editor.diagnostics(cells[2])) == [(0, 0, 12, *MARK_STEP), (1, 0, 12, *MARK_STEP)]
            assert published() == [1, 1, 2]
            editor.change(cells[1], "x = 2\n")
            assert await editor.diagnostics(cells[1]) == []
            # renaming the import changes the last cell's diagnostics (to none), not its text
            editor.change(cells[0], "import torch_xla.core.xla_model as xla\n")
            assert await editor.diagnostics(cells[2]) == []
            assert published() == [2, 2, 3]

    run(scenario())


def test_hover_explains_the_rule_on_a_flagged_range(workspace) -> None:
    rule = RULES["XLA102"]

    async def scenario():
        async with Editor(workspace) as editor:
            uri = editor.open("train.py", OLD_API)
            await editor.diagnostics(uri, version=1)
            hover = await editor.hover(uri, 5, 10)
            assert hover.range == lsp.Range(lsp.Position(5, 4), lsp.Position(5, 16))
            assert hover.contents.kind == lsp.MarkupKind.Markdown
            assert hover.contents.value == (
                f"**XLA102** `deprecated-api`: {rule.summary}.\n\n"
                "xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)\n\n"
                f"**Why:** {rule.why_bad}\n\n"
                "**Instead:**\n\n```python\nimport torch_xla\n\ntorch_xla.sync()\ndevice = torch_xla.device()\n```\n\n"
                f"[XLA102 documentation]({docs_url('XLA102')})")
            assert await editor.hover(uri, 4, 4) is None  # `for step ...`: nothing flagged there

    run(scenario())


# a note (the opt-in XLA903, with a help), a warning (XLA102) and an error (XLA101) on the target 2.9
LEVELS = ("import torch_xla.core.xla_model as xm\n"
          "xm.save(model.state_dict(), 'm.pt')\n"
          "xm.mark_step()\n"
          "n = xm.xrt_world_size()\n")
OPT_IN = {"flake8-xla": {"select": ["XLA1", "XLA9"]}}  # the client's settings select the XLA9xx heuristics


def test_the_severity_is_the_level_and_the_help_is_in_hover_and_related_information(workspace) -> None:
    found = {d.code: d for d in lint_source(LEVELS, "train.py", target="2.9")}
    note = found["XLA903"]
    assert note.help  # what this test needs: a note-level finding with a help

    def related(uri, diagnostic, help_text):
        return None if help_text is None else [
            lsp.DiagnosticRelatedInformation(lsp.Location(uri, diagnostic.range), help_text)]

    async def scenario():
        async with Editor(workspace, initialization_options=OPT_IN) as editor:
            uri = editor.open("train.py", LEVELS)
            diagnostics = await editor.diagnostics(uri, version=1)
            assert [(d.code, lsp.DiagnosticSeverity(d.severity).name) for d in diagnostics] == [
                ("XLA903", "Information"), ("XLA102", "Warning"), ("XLA101", "Error")]
            # the help under the message, pointing at the finding's own range
            assert [d.related_information and list(d.related_information) for d in diagnostics] == [
                related(uri, d, found[d.code].help) for d in diagnostics]
            hover = await editor.hover(uri, 1, 3)
            assert hover.range == diagnostics[0].range
            assert hover.contents.value.split("\n\n")[1:3] == [note.message, f"**Help:** {note.help}"]

    run(scenario())


def test_every_front_end_gives_a_finding_the_same_severity(workspace, monkeypatch, capsys) -> None:
    """JSON severity, SARIF level, GitHub command and editor severity, for each level."""
    monkeypatch.chdir(workspace)
    (workspace / "broken.py").write_text("import torch_xla\nx = (\n")  # E999: an error whatever is selected
    (workspace / "levels.py").write_text(LEVELS)

    def report(fmt: str) -> str:
        code, out, _ = run_cli(capsys, "check", "--no-cache", "--select", "XLA1,XLA9", "--format", fmt,
                               "broken.py", "levels.py")
        assert code == 1
        return out

    found = [(f["filename"], f["code"], f["severity"]) for f in json.loads(report("json"))]
    assert found == [("broken.py", "E999", "error"), ("levels.py", "XLA903", "note"),
                     ("levels.py", "XLA102", "warning"), ("levels.py", "XLA101", "error")]
    assert [(r["ruleId"], r["level"]) for r in json.loads(report("sarif"))["runs"][0]["results"]] == [
        (code, level) for _, code, level in found]
    commands = {"error": "error", "warning": "warning", "note": "notice"}
    assert [line.split(" ", 1)[0] for line in report("github").splitlines()] == [
        f"::{commands[level]}" for _, _, level in found]

    severities = {"error": "Error", "warning": "Warning", "note": "Information"}

    async def scenario():
        async with Editor(workspace, initialization_options=OPT_IN) as editor:
            shown = []
            for name in ("broken.py", "levels.py"):
                uri = editor.open(name, (workspace / name).read_text())
                shown += [(name, d.code, lsp.DiagnosticSeverity(d.severity).name)
                          for d in await editor.diagnostics(uri, version=1)]
            assert shown == [(name, code, severities[level]) for name, code, level in found]

    run(scenario())


def test_a_broken_buffer_reports_e999_and_leaves_other_files_alone(workspace) -> None:
    async def scenario():
        async with Editor(workspace) as editor:
            good = editor.open("good.py", OLD_API)
            assert len(await editor.diagnostics(good, version=1)) == 3
            broken = editor.open("broken.py", "import torch_xla.core.xla_model as xm\nxm.mark_step(\n")
            assert summary(await editor.diagnostics(broken, version=1)) == [
                (1, 12, 13, "E999", "Error", "SyntaxError: '(' was never closed")]
            editor.change(broken, "import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
            assert summary(await editor.diagnostics(broken, version=2)) == [(1, 0, 12, *MARK_STEP)]
            assert [p.uri for p in editor.published].count(good) == 1  # never republished
            assert len(editor.client.diagnostics[good]) == 3

    run(scenario())


def test_a_buffer_over_the_size_cap_is_reported_not_linted(workspace) -> None:
    async def scenario():
        async with Editor(workspace) as editor:
            uri = editor.open("generated.py", "import torch_xla.core.xla_model as xm\n" + "# padding\n" * 1100000)
            assert summary(await editor.diagnostics(uri)) == [
                (0, 0, 6, "E902", "Error", "larger than the 10 MiB size cap; not linted")]

    run(scenario())


def test_settings_from_the_client_and_reloading_the_project_configuration(workspace) -> None:
    source = "import torch_xla.core.xla_model as xm\nxm.mark_step()\nxm.rendezvous('init')\n"
    # planned, not deprecated: the same on 2.7 and 2.9
    rendezvous_29 = rendezvous_27 = ("XLA103", "Warning", "xm.rendezvous() is planned for removal; "
                                     "use xla_compat.rendezvous() (planned-api-removal)")

    async def scenario():
        async with Editor(workspace, initialization_options={"flake8-xla": {"ignore": ["XLA101"]}}) as editor:
            uri = editor.open("train.py", source + "xm.xrt_world_size()\n")
            # the project's target (2.9), the client's ignore
            assert summary(await editor.diagnostics(uri)) == [(1, 0, 12, *MARK_STEP), (2, 0, 13, *rendezvous_29)]
            # asked for once initialized, so before the first diagnostics
            registered = [(r.method, [w["globPattern"] for w in r.register_options["watchers"]])
                          for r in editor.registrations]
            assert registered == [("workspace/didChangeWatchedFiles", [
                "**/pyproject.toml", "**/setup.cfg", "**/tox.ini", "**/.flake8", "**/requirements*.txt"])]

            (workspace / ".flake8").write_text("[flake8]\nxla-target-version = 2.7\n")
            editor.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
                [lsp.FileEvent((workspace / ".flake8").as_uri(), lsp.FileChangeType.Changed)]))
            assert summary(await editor.diagnostics(uri)) == [(2, 0, 13, *rendezvous_27)]

            editor.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
                {"flake8-xla": {"target-version": "2.9", "select": ["XLA101"]}}))
            assert summary(await editor.diagnostics(uri)) == [(3, 0, 17, *WORLD_SIZE)]

            # a change that holds no flake8-xla settings (a pull-model client's null) keeps ours
            editor.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(None))
            assert summary(await editor.diagnostics(uri)) == [(3, 0, 17, *WORLD_SIZE)]

            editor.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
                {"flake8-xla": {"target-version": "two", "ignore": ["XLA999"]}}))
            diagnostics = await editor.diagnostics(uri)  # the malformed target is dropped, the project's counts
            assert editor.client.messages[0].message == (
                "flake8-xla: editor setting flake8-xla.target-version: not a torch_xla version: 'two' "
                "(expected MAJOR.MINOR, e.g. 2.8); ignored")
            assert editor.client.messages[1].message.startswith(
                "flake8-xla: ignore: unknown code or prefix 'XLA999'; `flake8-xla rules` lists the codes;"
                " using the default settings")
            assert summary(diagnostics) == [(1, 0, 12, *MARK_STEP), (2, 0, 13, *rendezvous_29),
                                            (3, 0, 17, *WORLD_SIZE)]

    run(scenario())


def test_saving_a_configuration_file_reloads_it_without_file_watchers(workspace) -> None:
    async def scenario():
        async with Editor(workspace, client="neovim") as editor:
            uri = editor.open("train.py", "import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
            assert summary(await editor.diagnostics(uri)) == [(1, 0, 12, *MARK_STEP)]
            config = workspace / ".flake8"
            config.write_text("[flake8]\nxla-target-version = 2.9\nextend-ignore = XLA102\n")
            config_uri = editor.open(".flake8", config.read_text(), language="ini")
            editor.save(config_uri)
            assert await editor.diagnostics(uri) == []
            assert config_uri not in editor.client.diagnostics  # not Python: never linted

    run(scenario())


INJECT = """\
import sys
from flake8_xla.engine import all_rules
rule = next(r for r in all_rules() if r.code == "XLA101")
check_fixable = type(rule).check_fixable
def failing(self, ctx):
    if any("boom" in line for line in ctx.lines):
        raise RuntimeError("boom")
    return check_fixable(self, ctx)
type(rule).check_fixable = failing
from flake8_xla.cli import main
sys.exit(main(["server"]))
"""


def test_a_rule_error_reports_xla000_and_the_server_goes_on(workspace) -> None:
    """The test starts the real server with one rule made to fail on files that say "boom"."""
    async def scenario():
        async with Editor(workspace, command=(sys.executable, "-c", INJECT)) as editor:
            bad = editor.open("bad.py", "import torch_xla.core.xla_model as xm  # boom\nxm.mark_step()\n")
            assert summary(await editor.diagnostics(bad)) == [
                (0, 0, 6, "XLA000", "Error", "flake8-xla internal error, please report: RuntimeError: boom")]
            good = editor.open("good.py", "import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
            assert summary(await editor.diagnostics(good)) == [(1, 0, 12, *MARK_STEP)]

    run(scenario())


def test_a_slow_file_does_not_hold_up_other_files_or_requests(workspace) -> None:
    """A file of 40,000 flagged lines takes seconds to lint; a small file opened after it, and a
    hover on that file, are answered before the large file's diagnostics arrive."""
    large = "import torch_xla.core.xla_model as xm\n" + "xm.mark_step()\n" * 40000

    async def scenario():
        async with Editor(workspace) as editor:
            big = editor.open("big.py", large)
            small = editor.open("small.py", "import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
            assert summary(await editor.diagnostics(small)) == [(1, 0, 12, *MARK_STEP)]
            assert (await editor.hover(small, 1, 3)).range.end.character == 12
            assert big not in [p.uri for p in editor.published]
            assert len(await editor.diagnostics(big)) == 40000

    run(scenario())


def test_edits_in_a_burst_are_linted_for_the_last_text(workspace) -> None:
    async def scenario():
        async with Editor(workspace) as editor:
            uri = editor.open("train.py", "import torch_xla.core.xla_model as xm\n")
            assert await editor.diagnostics(uri, version=1) == []
            text = "import torch_xla.core.xla_model as xm\n"
            for _ in range(5):  # typing: each change arrives before the pause ends
                text += "xm.mark_step()\n"
                editor.change(uri, text)
            diagnostics = await editor.diagnostics(uri, version=6)
            assert [d.range.start.line for d in diagnostics] == [1, 2, 3, 4, 5]
            assert [p.version for p in editor.published if p.uri == uri][-1] == 6

    run(scenario())


def test_positions_are_utf16_units(workspace) -> None:
    """The engine counts code points; VS Code counts UTF-16 units: an emoji is two."""
    async def scenario():
        async with Editor(workspace) as editor:
            uri = editor.open("train.py",
                              "import torch_xla.core.xla_model as xm\nlabel = '\U0001F680'; xm.mark_step()\n")
            [diagnostic] = await editor.diagnostics(uri)
            assert (diagnostic.range.start.character, diagnostic.range.end.character) == (14, 26)
            assert (await editor.hover(uri, 1, 15)).range == diagnostic.range

    run(scenario())


def test_shutdown_then_exit_ends_the_server_with_status_0_and_exit_alone_with_1(workspace) -> None:
    async def scenario():
        async with Editor(workspace) as editor:
            uri = editor.open("train.py", OLD_API)
            await editor.diagnostics(uri)
        assert editor.process.returncode == 0

        editor = Editor(workspace)
        await editor.__aenter__()
        editor.client.exit(None)
        assert await editor.process.wait() == 1  # exit without shutdown (LSP: status 1)
        await editor.client.stop()

    run(scenario())


def test_server_without_the_lsp_extra_says_how_to_install_it() -> None:
    probe = ("import sys\nsys.modules['pygls'] = None\nfrom flake8_xla.cli import main\n"
             "sys.exit(main(['server']))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("flake8-xla: error: the language server needs the lsp extra (cannot import pygls): "
                             "pip install 'flake8-xla[lsp]'\n")


def test_the_editor_setting_migrate_to(workspace) -> None:
    """``migrate-to`` from the client runs the TorchTPU migration rules alone; a bad value is named."""
    source = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"
    delete = ("XLA501", "Warning", "xm.mark_step() does nothing on TorchTPU; delete it (torchtpu-mechanical-rewrite)")

    async def scenario():
        async with Editor(workspace, initialization_options={"flake8-xla": {"migrate-to": "torchtpu"}}) as editor:
            uri = editor.open("train.py", source)
            assert summary(await editor.diagnostics(uri)) == [(1, 0, 12, *delete)]
            editor.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
                {"flake8-xla": {"migrate-to": "jax"}}))
            assert summary(await editor.diagnostics(uri)) == [(1, 0, 12, *MARK_STEP)]
            assert editor.client.messages[0].message == (
                "flake8-xla: editor setting flake8-xla.migrate-to must be one of torchtpu, not 'jax'; ignored")

    run(scenario())
