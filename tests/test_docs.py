"""Generated documentation must be fresh: a rule or table change without regenerating fails here."""
import pathlib
import re

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
    (tmp_path / "README.md").write_text(f"x\n{docs.README_START}\n{docs.README_END}\n"
                                        f"{docs.TORCHTPU_START}\n{docs.TORCHTPU_END}\n")
    assert docs.main(["--root", str(tmp_path)]) == 0
    assert docs.main(["--check", "--root", str(tmp_path)]) == 0
    page = tmp_path / "docs" / "rules" / "XLA101.md"
    page.write_text(page.read_text() + "edited by hand\n")
    assert docs.main(["--check", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("stale:") == 1 and "XLA101.md" in err


def test_markdown_for_a_terminal() -> None:
    page = ("# XLA999: a-rule\n\n<!-- flake8-xla: separate-blocks -->\n\nSummary, see [the guide](../guide.md),\n"
            "[XLA101](XLA101.md) and [upstream](https://example.org/x) or <https://example.org/y>.\n\n"
            "## Example\n\n```python\nimport os  # <!-- not a comment here -->\n\nx = [a](b)\n```\n\n"
            "| API | use |\n|---|---|\n| `a`<br>`b` | `c` |\n<!-- a comment\nover lines -->\n")
    url = "https://host/p/blob/main/docs/rules/XLA999.md"
    assert docs.render_markdown_for_terminal(page, url) == (
        "XLA999: a-rule\n"
        "==============\n"
        "\n"
        "Summary, see the guide (https://host/p/blob/main/docs/guide.md),\n"
        "XLA101 (https://host/p/blob/main/docs/rules/XLA101.md) and upstream (https://example.org/x) or "
        "<https://example.org/y>.\n"
        "\n"
        "Example\n"
        "-------\n"
        "\n"
        "    import os  # <!-- not a comment here -->\n"
        "\n"
        "    x = [a](b)\n"
        "\n"
        "| API | use |\n"
        "|---|---|\n"
        "| `a`, `b` | `c` |\n")


def test_every_rule_page_reads_in_a_terminal() -> None:
    for rule in all_rules():
        text = docs.render_rule_for_terminal(rule)
        assert text.startswith(f"{rule.code}: {rule.name}\n{'=' * len(f'{rule.code}: {rule.name}')}\n\n"), rule.code
        url = f"https://github.com/flake8-xla/flake8-xla/blob/main/docs/rules/{rule.code}.md"
        assert text.endswith(f"\nOnline: {url}\n")
        for raw in ("<!--", "-->", "](", "```", "<br>", "\n#"):
            assert raw not in text, (rule.code, raw)
        assert "\nWhat it does\n------------\n" in text and "\nFix safety\n----------\n" in text


def test_lifecycle_rule_links_the_published_migration_guide() -> None:
    rule = next(r for r in all_rules() if r.code == "XLA101")
    assert ("see also the migration guide (https://github.com/flake8-xla/flake8-xla/blob/main/docs/"
            "api-lifecycle.md).\n") in docs.render_rule_for_terminal(rule)


def test_pre_commit_page_pins_a_tag_that_exists() -> None:
    """docs/pre-commit.md pins `rev: v<version>` and `flake8-xla==<version>` only once that release is
    tagged here (`git tag v0.1.0`; a CI clone needs `git fetch --tags`); until then a commit,
    through a placeholder that `pre-commit autoupdate` replaces (tests/test_precommit.py runs it)."""
    import re
    import subprocess

    from flake8_xla import __version__

    tags = subprocess.run(["git", "tag", "--list"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()
    page = (ROOT / "docs" / "pre-commit.md").read_text(encoding="utf-8")
    ours = re.findall(r"repo: https://github\.com/flake8-xla/flake8-xla\n\s+rev: (\S+)", page)
    pins = re.findall(r"additional_dependencies: \[(.+)\]", page)
    if f"v{__version__}" in tags:
        assert ours == [f"v{__version__}"] * 2
        assert pins == [f"flake8-xla=={__version__}"]
    else:
        assert ours == ["<commit-sha>"] * 2
        assert pins == ['"flake8-xla @ git+https://github.com/flake8-xla/flake8-xla@<commit-sha>"']
        assert f"No release is tagged yet: flake8-xla {__version__}, the version this page describes" in " ".join(
            page.split())
    assert all(rev in tags or rev == "<commit-sha>" for rev in ours), (ours, tags)
    assert "pre-commit autoupdate" in page


def test_the_runtime_page_names_each_replaced_api_once_per_companion() -> None:
    for line in (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `xla_compat."):
            replaced = line.rstrip(" |").rsplit(" | ", 1)[-1].split("<br>")
            assert len(replaced) == len(set(replaced)), line[:80]


def named_paths(text: str) -> list:
    """The repository paths a page names (``flake8_xla/rules/<family>/xlaNNN_kebab_name.py``), as globs."""
    found = re.findall(r"\b((?:flake8_xla|rules|tests|xla_compat|benchmarks|docs|tools|sweep)/[\w/<>.-]*)", text)
    return sorted({re.sub(r"<\w+>|NNN_kebab_name|NNN", "*", path).rstrip(".") for path in found})


def test_the_contributor_guide_names_only_paths_that_exist() -> None:
    paths = named_paths((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    assert len(paths) > 30
    assert [path for path in paths if not list(ROOT.glob(path))] == []
    assert named_paths("see `flake8_xla/rules/<family>/xlaNNN_kebab_name.py` and flake8_xla/gone.py.") == [
        "flake8_xla/gone.py", "flake8_xla/rules/*/xla*.py"]
