"""What a run pays before it lints anything: no rule module is imported for files that fail the
pre-filter or hit the result cache, and the rule index comes from the rule files' names."""
import subprocess
import sys

from flake8_xla.engine import all_rules, rule_index

HEAVY = ("flake8_xla.analysis.tensors", "flake8_xla.analysis.flow", "flake8_xla.analysis.loops",
         "flake8_xla.analysis.fsdp", "flake8_xla.patterns", "ast_grep_py")
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
