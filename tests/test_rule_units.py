"""A Python rule unit holds its check's decision and its wording; the facts it decides on come from the
analysis layer through ``ctx.get(...)``. So a rule file walks no tree, climbs no parent chain, builds no
parent map and defines no class but its rule: each of those is a fact that other rules would compute again."""
import ast
import importlib
import pathlib
from typing import List

import pytest

import flake8_xla.rules
from flake8_xla.rule import Rule

UNITS = sorted(pathlib.Path(flake8_xla.rules.__file__).parent.glob("*/xla[0-9]*.py"))
# the ast module's walkers: a rule that needs nodes asks NodeIndex, Parents or a domain fact
WALKERS = {"walk", "iter_child_nodes", "iter_fields", "NodeVisitor", "NodeTransformer"}
# the analysis layer's own walkers: a subtree's nodes come from NodeIndex.below, the file's walk sliced
WALKING = {"parents": "the parent-map builder", "walk": "the tree walker"}
# Parents' raw map and its chain climb the tree; its questions (of, conditionals, function_of, ...) answer
CLIMBERS = {"map", "chain"}


def _module_name(path: pathlib.Path) -> str:
    relative = path.relative_to(pathlib.Path(flake8_xla.rules.__file__).parent).with_suffix("")
    return ".".join(("flake8_xla.rules",) + relative.parts)


def problems(path: pathlib.Path) -> List[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = importlib.import_module(_module_name(path))
    found = []
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ast" \
                and node.attr in WALKERS:
            found.append(f"{where}: ast.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "ast":
            found.extend(f"{where}: from ast import {a.name}" for a in node.names if a.name in WALKERS)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flake8_xla"):
            found.extend(f"{where}: imports {a.name}, {WALKING[a.name]}" for a in node.names if a.name in WALKING)
        elif isinstance(node, ast.Attribute) and node.attr in CLIMBERS:
            found.append(f"{where}: .{node.attr} climbs the parent chain")
        elif isinstance(node, ast.ClassDef):
            defined = getattr(module, node.name, None) if id(node) in top_level else None
            if not (isinstance(defined, type) and issubclass(defined, Rule)):
                found.append(f"{where}: class {node.name} is no Rule")
    return sorted(found, key=lambda problem: int(problem.split()[1].rstrip(":")))  # by line


def test_every_rule_unit_is_found() -> None:
    assert sorted(p.stem for p in UNITS) == [stem for _, stem in flake8_xla.rules.python_units()]


@pytest.mark.parametrize("path", UNITS, ids=[p.stem for p in UNITS])
def test_rule_unit_decides_and_words_only(path: pathlib.Path) -> None:
    assert problems(path) == []


def test_the_check_finds_each_kind(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each forbidden shape is reported (a test that cannot fail guards nothing)."""
    source = ("import ast\nfrom typing import NamedTuple\nfrom flake8_xla.analysis.syntax import parents\n"
              "from flake8_xla.analysis.syntax import walk\nfrom flake8_xla.rule import Rule\n\n\n"
              "class Fact(NamedTuple):\n    node: object\n\n\n"
              "class Check(Rule):\n    def check(self, ctx):\n        for node in ast.walk(ctx.tree):\n"
              "            yield ctx.get(Parents).chain(node)\n        nodes = walk([ctx.tree])\n")
    monkeypatch.setattr(flake8_xla.rules, "__file__", str(tmp_path / "__init__.py"))
    (tmp_path / "xla999_fake.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(importlib, "import_module", lambda name: type("M", (), {"Check": type("Check", (Rule,), {})}))
    assert problems(tmp_path / "xla999_fake.py") == [
        "line 3: imports parents, the parent-map builder", "line 4: imports walk, the tree walker",
        "line 8: class Fact is no Rule", "line 14: ast.walk", "line 15: .chain climbs the parent chain"]
