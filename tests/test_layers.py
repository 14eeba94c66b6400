"""The layers import each other in one direction: no module of flake8_xla imports another inside a
function to dodge an import cycle. The only function-level imports load something late for speed,
and are listed here with why."""
import ast
import pathlib
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "flake8_xla"
LATE_FOR_SPEED = {
    ("engine.py", "flake8_xla.rules"): "rule modules load on the first file that needs linting",
    ("cli/commands.py", "..docs"): "only `explain` renders a rule page",
}


def function_level_imports():
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for scope in ast.walk(tree):
            if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(scope):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("flake8_xla")):
                    yield path.relative_to(PACKAGE).as_posix(), "." * node.level + (node.module or "")
                elif isinstance(node, ast.Import):
                    yield from ((path.relative_to(PACKAGE).as_posix(), a.name) for a in node.names
                                if a.name.startswith("flake8_xla"))


def test_no_function_level_import_dodges_a_cycle() -> None:
    assert sorted(set(function_level_imports()) - set(LATE_FOR_SPEED)) == []


MODULES = sorted({".".join(("flake8_xla",) + p.relative_to(PACKAGE).with_suffix("").parts).replace(".__init__", "")
                  for p in PACKAGE.rglob("*.py") if p.name != "__main__.py"}
                 | {f"flake8_xla.rules.{p.stem}" for p in (PACKAGE.parent / "rules").glob("xla*.py")})


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_first(module: str) -> None:
    """Imported first in a fresh interpreter, every module loads: a cycle fails for some order."""
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
