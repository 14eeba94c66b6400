"""Fixtures with inline expectations: `# expect: XLA101@9 XLA105@30` names every diagnostic of
that line (code @ flake8's 1-based column). Lines without the comment must stay silent. The
rendered output of each fixture is also compared with its snapshot (`<fixture>.txt`); run
`pytest --update-snapshots` to rewrite snapshots after an intended change, then review the diff."""
import pathlib
import re

import pytest

from flake8_xla.engine import lint_source

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
_EXPECT = re.compile(r"#\s*expect:\s*(.*)$")
_TARGET = re.compile(r"^#\s*xla-target:\s*(\S+)", re.MULTILINE)


def _expectations(source: str):
    expected = []
    for number, line in enumerate(source.splitlines(), 1):
        match = _EXPECT.search(line)
        if match:
            for item in match.group(1).split():
                code, col = item.split("@")
                expected.append((number, int(col), code))
    return sorted(expected)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.stem)
def test_fixture(path: pathlib.Path, request: pytest.FixtureRequest) -> None:
    source = path.read_text(encoding="utf-8")
    target = _TARGET.search(source).group(1)
    diagnostics = lint_source(source, str(path), target=target)
    assert sorted((d.line, d.col + 1, d.code) for d in diagnostics) == _expectations(source)

    rendered = "".join(d.render(path.name) + "\n" + (f"  = help: {d.help}\n" if d.help else "") for d in diagnostics)
    snapshot = path.with_suffix(".txt")
    if request.config.getoption("--update-snapshots"):
        snapshot.write_text(rendered, encoding="utf-8")
    assert snapshot.read_text(encoding="utf-8") == rendered
