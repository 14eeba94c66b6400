"""Generated documentation must be fresh: a rule or table change without regenerating fails here."""
import pathlib

from flake8_xla import docs
from flake8_xla.engine import all_rules

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_generated_docs_are_fresh() -> None:
    stale = docs.stale_files(ROOT)
    assert not stale, f"regenerate with `python -m flake8_xla.docs`: {[str(p) for p in stale]}"


def test_every_rule_has_a_page_and_a_readme_row() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for rule in all_rules():
        page = (ROOT / "docs" / "rules" / f"{rule.code}.md").read_text(encoding="utf-8")
        for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead",
                        "## Fix safety", "## Since"):
            assert section in page, (rule.code, section)
        assert f"[{rule.code}](docs/rules/{rule.code}.md)" in readme


def test_check_mode_reports_a_stale_page(tmp_path, capsys) -> None:
    (tmp_path / "README.md").write_text(f"x\n{docs.README_START}\n{docs.README_END}\n")
    assert docs.main(["--root", str(tmp_path)]) == 0
    assert docs.main(["--check", "--root", str(tmp_path)]) == 0
    page = tmp_path / "docs" / "rules" / "XLA101.md"
    page.write_text(page.read_text() + "edited by hand\n")
    assert docs.main(["--check", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("stale:") == 1 and "XLA101.md" in err
