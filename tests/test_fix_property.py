"""Property test of the fix layer (issue 12): over composed torch_xla programs with shebangs, coding
cookies, docstrings, form feeds, U+2028, NEL and CRLF/CR/mixed line endings, every applied fix leaves
a file that parses, keeps its first lines, changes nothing but API spellings, imports and `pass`, and
a second run changes nothing."""
from __future__ import annotations

import ast
from typing import List, Set

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flake8_xla.engine import fix_source
from flake8_xla.fixing.imports import ALIASES
from flake8_xla.lifecycle.table import api_table
from flake8_xla.versions import Target, Version
from test_property import PROGRAMS, SETTINGS, parse

pytestmark = [pytest.mark.filterwarnings("ignore::SyntaxWarning"), pytest.mark.slow]

# names through which the composed programs reach torch_xla APIs, and the ones fixes write
API_ROOTS = {"xm", "xr", "xmp", "xs", "torch_xla", "xla_compat", "xla_model", "mark_step", "get_ordinal",
             "xrt_world_size", "world_size", "global_ordinal"}
HEADS = ["", "#!/usr/bin/env python\n", "# -*- coding: latin-1 -*-\n",
         "#!/usr/bin/env python3\n# vim: set fileencoding=utf-8 :\n", '"""Module docstring."""\n',
         "#!/usr/bin/env python\n\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\n"]
ODD_COMMENTS = ["# form feed \x0c here", "# line separator \u2028 here", "# next line \x85 here",
                "\x0c", "# file separator \x1c here"]


def _allowed_spellings() -> Set[str]:
    """Every way a fix may spell an API it writes: the qualified names of replacements and
    companions, and the same with a conventional alias for their module."""
    out: Set[str] = set()
    for row in api_table().rows:
        for dotted in (row.replacement, row.companion):
            if not dotted:
                continue
            name = dotted.rstrip("()=")
            out.add(name)
            for module, alias in ALIASES.items():
                if name.startswith(module + "."):
                    out.add(alias + name[len(module):])
    return out


ALLOWED = _allowed_spellings()


def _dotted(node: ast.AST) -> str:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


class _Normalize(ast.NodeTransformer):
    """API spellings and calls become one placeholder; torch_xla/xla_compat imports and `pass` go."""

    def __init__(self) -> None:
        self.spellings: Set[str] = set()

    def _api(self, node: ast.AST) -> bool:
        dotted = _dotted(node)
        if dotted and dotted.split(".")[0] in API_ROOTS:
            self.spellings.add(dotted)
            return True
        return False

    def visit_Call(self, node: ast.Call):
        if self._api(node.func):
            return ast.Name("API", ast.Load())
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        return ast.Name("API", ast.Load()) if self._api(node) else self.generic_visit(node)

    def visit_Name(self, node: ast.Name):
        return ast.Name("API", ast.Load()) if self._api(node) else node

    def _drop(self, node: ast.stmt):
        if type(node) is ast.Pass:
            return None
        if type(node) is ast.Import and all(a.name.split(".")[0] in ("torch_xla", "xla_compat") for a in node.names):
            return None
        if type(node) is ast.ImportFrom and (node.module or "").split(".")[0] in ("torch_xla", "xla_compat"):
            return None
        return self.generic_visit(node)

    visit_Pass = visit_Import = visit_ImportFrom = _drop


def normalized(tree: ast.AST):
    normalize = _Normalize()
    return ast.dump(normalize.visit(tree)), normalize.spellings


def with_endings(source: str, endings: List[str], comments: List[str]) -> str:
    lines = source.split("\n")[:-1]
    out = []
    for index, line in enumerate(lines):
        out.append(line + endings[index % len(endings)])
        if comments and index % 3 == 0:
            out.append(comments[index % len(comments)] + endings[(index + 1) % len(endings)])
    return "".join(out)


SOURCES = st.builds(
    lambda head, program, endings, comments: head + with_endings(program, endings, comments),
    st.sampled_from(HEADS), PROGRAMS,
    st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=1, max_size=3),
    st.lists(st.sampled_from(ODD_COMMENTS), max_size=3),
)


@settings(max_examples=250, **SETTINGS)
@given(SOURCES, st.booleans())
def test_a_fix_changes_nothing_but_the_migration(source: str, unsafe: bool) -> None:
    before = parse(source)
    if before is None:
        return
    target = Target(Version(2, 9), "test")
    outcome = fix_source(source, "gen.py", target, unsafe=unsafe)
    after_source = outcome.source
    after = parse(after_source)
    assert after is not None, after_source
    if after_source == source:
        return
    head = next(h for h in sorted(HEADS, key=len, reverse=True) if source.startswith(h))
    assert after_source.startswith(head)  # shebang, cookie, docstring and __future__ stay first
    old_dump, _ = normalized(before)
    new_dump, written = normalized(after)
    _, had = normalized(parse(source))
    assert new_dump == old_dump, after_source
    assert written <= had | ALLOWED, written - had - ALLOWED
    if not unsafe:
        assert "xla_compat" not in after_source
    # every line keeps its own ending: no ending appears that the file did not have
    assert {e for e in ("\r\n", "\r", "\n") if e in after_source.replace("\r\n", "")} <= \
        {e for e in ("\r\n", "\r", "\n") if e in source.replace("\r\n", "")}
    again = fix_source(after_source, "gen.py", target, unsafe=unsafe)
    assert again.source == after_source
