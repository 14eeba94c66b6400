"""`# noqa` codes no rule has (a warning on stderr) and codes that suppress nothing (XLA001 unused-noqa),
as ruff reports them: only our codes, only for rules that ran and are selected, in the CLI only."""
import json
import subprocess
import sys

import pytest

from cli_helpers import run
from flake8_xla.engine import fix_one, fix_source, lint_source, unused_noqa
from flake8_xla.fixing.lines import split_lines
from flake8_xla.noqa import directives, unknown_codes
from flake8_xla.versions import Target, Version

HEADER = "import torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
TARGET = Target(Version(2, 9), "test")


def check(capsys, *argv):
    return run(capsys, "check", "--no-cache", *argv)


# --- the comments -------------------------------------------------------------------------------------

def test_directives_are_comments_with_their_codes_and_the_lines_they_cover() -> None:
    source = ('x = f(  # noqa: XLA102,E501\n    1)\ns = """\ntext\n"""  # noqa: XLA303\n'
              't = "# noqa: XLA102"  # NOQA:XLA303\n# a comment\ny = 1  # noqa\n')
    found = [(d.line, d.col, d.end_col, d.codes, d.covers, d.effective) for d in directives(split_lines(source))]
    assert found == [
        (1, 8, 27, ("XLA102", "E501"), (1, 1), True),  # flake8 does not join bracketed lines
        (5, 5, 19, ("XLA303",), (3, 5), True),  # after a string: it covers every line of the string
        (6, 22, 35, ("XLA303",), (6, 6), False),  # the `# noqa` in the string comes first: flake8 applies that one
        (8, 7, 13, (), (8, 8), True),
    ]


def test_unknown_codes_are_ours_that_no_rule_has_nor_starts() -> None:
    lines = split_lines("a = 1  # noqa: XLA999, E999, XLA1, XLA9, XLA000, XLA1010\nb = 2  # noqa: XLA102\n"
                        "c = '# noqa: XLA998'\n")
    assert unknown_codes(lines, ["XLA001", "XLA101", "XLA102", "XLA901"]) == [(1, ("XLA999", "XLA1010"))]


# --- the unknown-code warning -------------------------------------------------------------------------

def test_check_and_fix_warn_once_per_comment_with_the_unknown_codes(project, capsys) -> None:
    (project / "a.py").write_text(HEADER + "xm.mark_step()  # noqa: XLA102, XLA999, XLA9, F401\n"
                                  "y = 1  # noqa: XLA998\nz = 2  # noqa: XLA1, XLA000, E501\n")
    warnings = ("flake8-xla: warning: a.py:4: unknown code in `# noqa`: XLA999\n"
                "flake8-xla: warning: a.py:5: unknown code in `# noqa`: XLA998\n")
    code, out, err = check(capsys, "a.py")
    assert (code, out) == (0, "") and err.startswith(warnings)
    code, out, err = check(capsys, "--format", "json", "a.py")
    assert (code, json.loads(out), err) == (0, [], warnings)
    assert run(capsys, "fix", "a.py")[2].startswith(warnings)
    (project / "b.py").write_text("x = 1  # noqa: XLA999 (no torch_xla here)\n")  # warned for any file
    assert check(capsys, "b.py")[2].startswith("flake8-xla: warning: b.py:1: unknown code in `# noqa`: XLA999\n")


def test_the_warning_comes_from_the_cache_too_and_from_workers(project, capsys) -> None:
    for i in range(20):
        (project / f"m{i:02}.py").write_text(HEADER + f"x = {i}  # noqa: XLA999\n")
    expected = "".join(f"flake8-xla: warning: m{i:02}.py:4: unknown code in `# noqa`: XLA999\n" for i in range(20))
    for _ in range(2):  # the second run reads the cache
        code, _, err = run(capsys, "check", "-j", "2", ".")
        assert code == 0 and err.startswith(expected)


def test_flake8_owns_its_noqa_comments(tmp_path) -> None:
    (tmp_path / "a.py").write_text(HEADER + "torch_xla.sync()  # noqa: XLA102, XLA999\n")
    result = subprocess.run([sys.executable, "-m", "flake8", "--select=XLA", "--enable-extensions=XLA9", "a.py"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# --- XLA001 in the CLI --------------------------------------------------------------------------------

UNUSED = HEADER + "xm.mark_step()  # noqa: XLA102\ntorch_xla.sync()  # noqa: XLA102, E501\n"
UNUSED_LINE = "a.py:5:19: XLA001 [*] noqa code XLA102 suppresses nothing on this line; remove it\n"


@pytest.mark.parametrize("argv, reported", [
    ([], False),
    (["--select", "XLA"], False),  # the blanket selection leaves the opt-in rules out, as today
    (["--extend-select", "XLA9"], False),
    (["--extend-select", "XLA001"], True),
    (["--extend-select", "XLA0"], True),
    (["--select", "XLA001"], False),  # XLA102 is not selected: its noqa code is not judged
    (["--select", "XLA001,XLA102"], True),
    (["--extend-select", "XLA001", "--ignore", "XLA102"], False),
    (["--extend-select", "XLA001", "--per-file-ignores", "a.py:XLA1"], False),
    (["--extend-select", "XLA001", "--migrate-to", "torchtpu"], False),  # XLA102 does not run (XLA5xx do)
])
def test_xla001_is_opt_in_and_judges_only_the_codes_selected(project, capsys, argv, reported) -> None:
    (project / "a.py").write_text(UNUSED)
    out = check(capsys, *argv, "a.py")[1]
    assert [line + "\n" for line in out.splitlines() if "XLA001" in line] == ([UNUSED_LINE] if reported else [])


def test_xla001_from_the_configuration_and_from_the_cache(project, capsys) -> None:
    (project / "a.py").write_text(UNUSED)
    (project / "pyproject.toml").write_text('[tool.flake8-xla]\nextend-select = ["XLA001"]\n')
    for _ in range(2):  # the second run reads the cache
        assert run(capsys, "check", "a.py")[:2] == (1, UNUSED_LINE)


def test_xla001_keeps_a_code_that_fires_on_another_release(project, capsys) -> None:
    (project / "a.py").write_text(HEADER + "xm.mark_step()  # noqa: XLA102\nxm.mark_step()  # noqa: XLA101\n")
    code, out, _ = check(capsys, "--extend-select", "XLA001", "--target-version", "2.4", "a.py")
    assert (code, out) == (1, "a.py:5:17: XLA001 [*] noqa code XLA101 suppresses nothing on this line; remove it\n")


def test_xla001_is_silenced_by_its_own_code_and_is_never_added_by_add_noqa(project, capsys) -> None:
    (project / "a.py").write_text(HEADER + "torch_xla.sync()  # noqa: XLA102, XLA001\nxm.mark_step()\n")
    assert check(capsys, "--extend-select", "XLA001", "a.py")[:2] == (
        1, "a.py:5:1: XLA102 [*] xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)\n")
    (project / "b.py").write_text(HEADER + "torch_xla.sync()  # noqa: XLA102\nxm.mark_step()\n")
    assert run(capsys, "check", "--extend-select", "XLA001", "--add-noqa", "b.py")[0] == 1
    assert (project / "b.py").read_text() == (HEADER + "torch_xla.sync()  # noqa: XLA102\n"
                                              "xm.mark_step()  # noqa: XLA102\n")


def test_fix_removes_the_unused_codes_and_leaves_other_comments(project, capsys) -> None:
    (project / "a.py").write_text(
        HEADER + "xm.mark_step()  # noqa: XLA102\ntorch_xla.sync()  # noqa: XLA102, E501\n"
        "torch_xla.sync()  # noqa: XLA101,XLA303\n    # noqa: XLA303\nx = 1  # noqa\ny = 2  # noqa: XLA303  # why\n")
    code, _, err = run(capsys, "fix", "--extend-select", "XLA001", "a.py")
    assert code == 0 and "Fixed 4 issues in 1 file (XLA001 x4)." in err
    assert (project / "a.py").read_text() == (
        HEADER + "xm.mark_step()  # noqa: XLA102\ntorch_xla.sync()  # noqa: E501\ntorch_xla.sync()\n"
        "x = 1  # noqa\ny = 2  # why\n")
    (project / "b.py").write_text(UNUSED)
    assert run(capsys, "fix", "b.py")[0] == 0 and (project / "b.py").read_text() == UNUSED  # not selected


def test_the_json_and_sarif_findings_are_fixable(project, capsys) -> None:
    (project / "a.py").write_text(UNUSED)
    out = check(capsys, "--extend-select", "XLA001", "--format", "json", "a.py")[1]
    [finding] = json.loads(out)
    assert (finding["code"], finding["fixable"], finding["severity"]) == ("XLA001", True, "note")
    sarif = json.loads(check(capsys, "--extend-select", "XLA001", "--format", "sarif", "a.py")[1])
    [result] = sarif["runs"][0]["results"]
    assert result["fixes"][0]["artifactChanges"][0]["replacements"] == [  # `XLA102, ` goes
        {"deletedRegion": {"startLine": 5, "startColumn": 27, "endLine": 5, "endColumn": 35}}]


# --- the engine ---------------------------------------------------------------------------------------

def test_the_engine_fixes_unused_noqa_only_when_xla001_is_wanted_and_judges_only_the_selected() -> None:
    source = HEADER + "torch_xla.sync()  # noqa: XLA102, XLA303\n"
    assert fix_source(source, "a.py", TARGET, lambda code: code != "XLA001").source == source
    assert fix_source(source, "a.py", TARGET).source == HEADER + "torch_xla.sync()\n"
    only_303 = fix_source(source, "a.py", TARGET, selected=lambda code: code in ("XLA001", "XLA303"))
    assert only_303.source == HEADER + "torch_xla.sync()  # noqa: XLA102\n"


def test_an_editor_quick_fix_removes_the_codes() -> None:
    source = HEADER + "torch_xla.sync()  # noqa: XLA102, E501\n"
    [diagnostic] = [d for d in lint_source(source) if d.code == "XLA001"]
    assert fix_one(source, "a.py", TARGET, diagnostic).source == HEADER + "torch_xla.sync()  # noqa: E501\n"


def test_a_trace_only_rule_is_not_judged() -> None:  # XLA309 is reported by `python -m xla_compat.trace` only
    assert [d for d in lint_source(HEADER + "torch_xla.sync()  # noqa: XLA309\n") if d.code == "XLA001"] == []


def test_nothing_to_judge_without_our_codes() -> None:
    assert unused_noqa(HEADER + "x = 1  # noqa: E501\ny = 2  # noqa\n", "a.py", TARGET, []) == []
