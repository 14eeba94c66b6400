"""What a run pays before it lints anything: no rule module is imported for files that fail the
pre-filter or hit the result cache, and the rule index comes from the rule files' names."""
import os
import subprocess
import sys

import pytest

from flake8_xla import tomlcache
from flake8_xla.engine import all_rules, rule_index

HEAVY = ("flake8_xla.analysis.tensors", "flake8_xla.analysis.control", "flake8_xla.analysis.loops",
         "flake8_xla.analysis.fsdp", "flake8_xla.rules.patterns", "ast_grep_py")
PROBE = ("import sys\nfrom flake8_xla.cli import main\ncode = main(sys.argv[1:])\n"
         "print(sorted(m for m in {heavy!r} if m in sys.modules), code)\n")


def test_the_rule_index_from_file_names_matches_the_rules() -> None:
    assert rule_index() == tuple((r.code, r.name, r.off_by_default) for r in all_rules())


def run_probe(cwd, *argv) -> str:
    result = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], cwd=cwd,
                            capture_output=True, text=True)
    return result.stdout.splitlines()[-1]


def test_files_that_cannot_concern_torch_xla_import_no_rule(tmp_path) -> None:
    (tmp_path / "plain.py").write_text("import os\nprint(os.getcwd())\n")
    assert run_probe(tmp_path, "check", "--no-cache", "--isolated", "plain.py") == "[] 0"


def test_a_cache_hit_imports_no_rule(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    first = run_probe(tmp_path, "check", "--isolated", "--xla-target-version", "2.9", "a.py")
    assert first.endswith(" 1") and first != "[] 1"  # linted: the rules were loaded
    assert run_probe(tmp_path, "check", "--isolated", "--xla-target-version", "2.9", "a.py") == "[] 1"


def test_a_cache_hit_loads_neither_the_engine_nor_a_rule_nor_their_parsers(tmp_path) -> None:
    """What a re-run over unchanged files (pre-commit, an editor's save) needs is the cached findings:
    the engine, the rule modules, the analysis and fix layers, ast-grep, the YAML parser and even the ast
    module (~4 ms to import) stay unloaded."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    probe = ("import sys\nfrom flake8_xla.cli import main\ncode = main(sys.argv[1:])\n"
             "print(sorted(m for m in sys.modules if m in {heavy!r} or m.startswith('flake8_xla.rules.')), code)\n")
    heavy = ("flake8_xla.engine", "flake8_xla.analysis.semantic", "flake8_xla.analysis.syntax",
             "flake8_xla.fixing.fixpoint", "flake8_xla.fixing.edits", "flake8_xla.migration.report",
             "flake8_xla.lifecycle.matching", "ast_grep_py", "yaml", "ast")
    argv = ["check", "--isolated", "--xla-target-version", "2.9", "a.py"]
    runs = [subprocess.run([sys.executable, "-c", probe.format(heavy=heavy), *argv], cwd=tmp_path, capture_output=True,
                           text=True).stdout.splitlines()[-1] for _ in range(2)]
    assert runs[0] != "[] 1" and runs[0].endswith(" 1")  # the first run linted: the engine was loaded
    assert runs[1] == "[] 1"


def test_python_files_never_load_the_documents_layer_or_the_yaml_parser(tmp_path) -> None:
    """Notebooks and Markdown need flake8_xla.documents; rule data comes from its marshal copy after
    the first run, so the second run of a torch_xla file imports no YAML parser."""
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    probe = PROBE.replace("{heavy!r}", repr(("flake8_xla.documents.reading", "flake8_xla.documents.programs", "yaml")))
    argv = ["check", "--no-cache", "--isolated", "--xla-target-version", "2.9", "a.py"]
    subprocess.run([sys.executable, "-c", probe, *argv], cwd=tmp_path, capture_output=True, check=False)
    result = subprocess.run([sys.executable, "-c", probe, *argv], cwd=tmp_path, capture_output=True, text=True)
    assert result.stdout.splitlines()[-1] == "[] 1"


def test_checking_a_python_file_imports_none_of_the_slow_standard_modules(tmp_path) -> None:
    """Each of these cost 3-15 ms of a start and is needed only by other commands or formats
    (dataclasses and inspect: ~1 ms per class; flake8: logging; pathlib: urllib, ipaddress)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    slow = ("dataclasses", "inspect", "pathlib", "flake8", "logging", "_hashlib", "tempfile", "signal", "yaml")
    # what the interpreter loaded before our code (an editable install's finder imports pathlib) is not ours
    probe = "import sys\nbefore = set(sys.modules)\n" + PROBE.replace(
        "if m in sys.modules", "if m in sys.modules and m not in before").replace("{heavy!r}", repr(slow))
    argv = ["check", "--isolated", "--xla-target-version", "2.9", "a.py"]
    for _ in range(2):  # the first run also saves its result cache and the rule data's marshal copies
        result = subprocess.run([sys.executable, "-c", probe, *argv], cwd=tmp_path, capture_output=True, text=True)
        assert result.stdout.splitlines()[-1] == "[] 1"


# --- project TOML: read through a checked copy, so a cached run imports no TOML parser -------------


@pytest.fixture
def pyproject(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(tomlcache, "_LOADED", {})
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "p"\ndependencies = ["torch_xla>=2.6"]\n[tool.flake8-xla]\nselect = ["XLA1"]\n')
    return path


def _toml(path) -> dict:
    import tomllib

    with open(path, "rb") as handle:
        return tomllib.load(handle)


def test_toml_read_is_tomllib_s_and_read_back_unparsed(pyproject, monkeypatch) -> None:
    assert tomlcache.load(str(pyproject)) == _toml(pyproject)
    monkeypatch.setattr(tomlcache, "_LOADED", {})  # another run
    monkeypatch.setattr(tomlcache, "_parse", lambda raw: pytest.fail("parsed again"))
    first = tomlcache.load(str(pyproject))
    assert first == _toml(pyproject)
    first["tool"].clear()  # a caller's tables are its own
    assert tomlcache.load(str(pyproject)) == _toml(pyproject)


def test_changed_or_damaged_toml_copies_are_not_used(pyproject, monkeypatch) -> None:
    tomlcache.load(str(pyproject))
    pyproject.write_text(pyproject.read_text().replace("2.6", "2.7"))
    assert tomlcache.load(str(pyproject))["project"]["dependencies"] == ["torch_xla>=2.7"]
    kept = pyproject.parent / "xdg" / "flake8-xla" / "startup"
    [copy] = [p for p in kept.iterdir() if p.name.startswith("toml-")]  # the old text's copy is gone
    copy.write_bytes(copy.read_bytes()[:-4] + b"\x00\x00\x00\x00")
    monkeypatch.setattr(tomlcache, "_LOADED", {})
    assert tomlcache.load(str(pyproject)) == _toml(pyproject)


def test_toml_that_does_not_parse_raises_every_time(pyproject, monkeypatch) -> None:
    import tomllib

    pyproject.write_text("[project\n")
    for _ in range(2):
        monkeypatch.setattr(tomlcache, "_LOADED", {})
        with pytest.raises(tomllib.TOMLDecodeError):
            tomlcache.load(str(pyproject))


def test_a_cached_run_in_a_project_with_a_pyproject_imports_no_toml_parser(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.flake8-xla]\nselect = ["XLA"]\n')
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    probe = PROBE.replace("{heavy!r}", repr(("tomllib", "tomli")))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    argv = ["check", "--xla-target-version", "2.9", "a.py"]
    runs = [subprocess.run([sys.executable, "-c", probe, *argv], cwd=tmp_path, capture_output=True, text=True,
                           env=env).stdout.splitlines()[-1] for _ in range(2)]
    assert runs == ["['tomllib'] 1", "[] 1"]
