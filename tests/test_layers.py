"""The layers import each other in one direction: no module of flake8_xla imports another inside a
function to dodge an import cycle. The only function-level imports load something late for speed,
and are listed here with why; they count in the layer graph like any import, so each still points
down. The front-ends (the CLI, the language server, the flake8 plugin) share the session layer below
them and never import each other."""
import ast
import pathlib
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "flake8_xla"
LATE_FOR_SPEED = {
    ("engine.py", "flake8_xla.rules.registry"): "rule modules load on the first file that needs linting",
    ("cli/commands.py", "..docs"): "only `explain` renders a rule page",
    ("session/running.py", "..documents.programs"): "only notebooks, Markdown and rst files need the documents layer",
    ("session/running.py", "..documents.reading"): "only notebooks, Markdown and rst files need the documents layer",
    ("cli/commands.py", "..lsp.server"): "only `server` needs the language server (and pygls, an optional extra)",
    ("session/project_index.py", "..analysis.summaries"):
        "only a step that calls a helper of another module needs its summary",
    ("session/running.py", "..engine"): "the engine loads when a file is linted, not for a cached or skipped one",
    ("session/running.py", "..fixing"): "the fixpoint loop (and the semantic model) only when a fix is built",
    ("session/running.py", ".project_index"): "the project index only when a file is linted, not for a cached one",
    ("cli/commands.py", "..engine"): "only `explain` and `rules` list the rules",
    ("cli/commands.py", "..migration"): "only `migrate-report` renders the migration report",
    ("output/formats.py", "..engine"): "only JSON, SARIF and GitHub output ask the rules for their levels",
    ("output/formats.py", "..fixing"): "only SARIF's suggested fixes run the fixpoint loop",
    ("fixing/__init__.py", "."): "a caller of fixing.lines alone does not load the fixpoint loop",
}
FRONT_ENDS = {"cli", "lsp", "plugin"}
# what the front-ends share: it imports none of them
BELOW_THE_FRONT_ENDS = {"session", "output"}
# the one front-end that starts another: `flake8-xla server` runs the language server (lsp.server.serve)
LAUNCHES = {("cli", "lsp"): "`flake8-xla server` is the language server's command line"}


def _file_of(module: str, path: pathlib.Path) -> str:
    """Where a module sits inside flake8_xla: ``cli/commands.py``, ``rules/__init__.py``."""
    parts = module.split(".")[1:]
    return "/".join(parts + ["__init__.py"]) if path.name == "__init__.py" else "/".join(parts) + ".py"


def function_level_imports():
    for module, path in module_files().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for scope in ast.walk(tree):
            if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(scope):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("flake8_xla")):
                    yield _file_of(module, path), "." * node.level + (node.module or "")
                elif isinstance(node, ast.Import):
                    yield from ((_file_of(module, path), a.name) for a in node.names
                                if a.name.startswith("flake8_xla"))


def test_no_function_level_import_dodges_a_cycle() -> None:
    assert sorted(set(function_level_imports()) - set(LATE_FOR_SPEED)) == []


def _module_name(path: pathlib.Path, root: pathlib.Path, package: str) -> str:
    return ".".join((package,) + path.relative_to(root).with_suffix("").parts).replace(".__init__", "")


def module_files():
    """flake8_xla's modules by name."""
    return {_module_name(p, PACKAGE, "flake8_xla"): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = sorted(name for name, path in module_files().items() if path.name != "__main__.py")


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_first(module: str) -> None:
    """Imported first in a fresh interpreter, every module loads: a cycle fails for some order."""
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _layer(module: str) -> str:
    """The folder (or top-level module) a flake8_xla module belongs to: its layer. The rule modules
    are one above the tables and matchers they use; the rules package itself, the index of their
    names (``rule_index``), is a layer below them that the front-ends read without loading a rule."""
    parts = module.split(".")
    if parts[1:2] == ["rules"] and len(parts) > 2:
        return "rule modules"
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(tree: ast.AST):
    """Every import of a module, at module level or inside a function; not those under
    ``if TYPE_CHECKING:``, which are annotations, not dependencies."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for branch in node.orelse for n in _imports(ast.Module([branch], [])))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        else:
            yield from _imports(node)


def layer_imports(modules=None):
    """(importing layer, imported layer) for every import between two layers, wherever it is written."""
    modules = module_files() if modules is None else modules
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
                named = ".".join(filter(None, (base, node.module)))
                # `from . import stash` imports a module; `from .. import __version__` a name of the package
                targets = [f"{named}.{a.name}" if f"{named}.{a.name}" in modules else named for a in node.names]
            else:
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target.startswith("flake8_xla.") and _layer(target) != _layer(module):
                    yield _layer(module), _layer(target)


def layer_cycle(imports) -> dict:
    """The layers left in a cycle (each with the remaining layers it imports) once every layer that
    imports no remaining one is peeled off, repeatedly; empty when the layers form no cycle."""
    edges = {}
    for importer, imported in imports:
        edges.setdefault(importer, set()).add(imported)
    remaining = set(edges) | {layer for targets in edges.values() for layer in targets}
    while remaining:
        leaves = {layer for layer in remaining if not (edges.get(layer, set()) & remaining)}
        if not leaves:
            return {k: sorted(v & remaining) for k, v in edges.items() if k in remaining}
        remaining -= leaves
    return {}


def test_layers_form_no_cycle() -> None:
    """analysis/, fixing/, lifecycle/, documents/, rules/, session/, output/, the front-ends and the
    top-level modules import each other in one direction, late imports included."""
    assert layer_cycle(layer_imports()) == {}


def test_the_layer_graph_counts_imports_inside_functions_and_rules(tmp_path) -> None:
    """A late import that points up closes a cycle; an import under TYPE_CHECKING does not."""
    (tmp_path / "low.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                     "    from .high import X\n\ndef f():\n    from .rules import y\n")
    (tmp_path / "high.py").write_text("from . import low\n")
    (tmp_path / "rule.py").write_text("from flake8_xla.high import X\n")
    modules = {"flake8_xla.low": tmp_path / "low.py", "flake8_xla.high": tmp_path / "high.py",
               "flake8_xla.rules.xla999_example": tmp_path / "rule.py"}
    assert sorted(layer_imports(modules)) == [("high", "low"), ("low", "rules"), ("rule modules", "high")]
    assert layer_cycle(layer_imports(modules)) == {}
    (tmp_path / "low.py").write_text("def f():\n    from .rules.xla999_example import y\n")
    assert layer_cycle(layer_imports(modules)) == {"high": ["low"], "low": ["rule modules"], "rule modules": ["high"]}


def test_no_front_end_imports_another() -> None:
    """The CLI, the language server and the flake8 plugin import the session layer and output/; the
    layers they share import none of them."""
    imports = set(layer_imports())
    assert sorted((a, b) for a, b in imports if a in FRONT_ENDS and b in FRONT_ENDS and (a, b) not in LAUNCHES) == []
    assert sorted((a, b) for a, b in imports if a in BELOW_THE_FRONT_ENDS and b in FRONT_ENDS) == []
    assert set(LAUNCHES) <= imports  # each exception is still needed


def test_facts_sit_below_the_rules_and_the_engine() -> None:
    """The analysis layer reads syntax and the target only: no rule, table, fix or front-end."""
    assert {imported for importer, imported in layer_imports() if importer == "analysis"} <= {"versions", "rule"}


COMPANION = PACKAGE.parent / "xla_compat"


def companion_imports():
    """(importing module, imported module, whether at module level) for every import between
    two xla_compat modules, wherever it is written."""
    for path in sorted(COMPANION.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module] if node.module else [a.name for a in node.names]
                yield from ((path.stem, name.split(".")[0], id(node) in top) for name in names)


def test_companion_modules_import_each_other_at_module_level_without_a_cycle() -> None:
    """xla_compat's launcher sits above the checkpoints, collectives and runtime it uses; none of
    them reaches back up through an import written inside a function."""
    imports = list(companion_imports())
    assert [(a, b) for a, b, top in imports if not top] == []
    edges = {}
    for importer, imported, _ in imports:
        edges.setdefault(importer, set()).add(imported)
    remaining = set(edges) | {m for targets in edges.values() for m in targets}
    while remaining:
        leaves = {m for m in remaining if not (edges.get(m, set()) & remaining)}
        assert leaves, f"import cycle in xla_compat: { {k: sorted(v & remaining) for k, v in edges.items() if k in remaining} }"
        remaining -= leaves
    assert {"runtime", "resume", "checkpoint", "collectives"} & edges.get("supervisor", set())
    assert "supervisor" not in set().union(*(edges.get(m, set()) for m in ("runtime", "resume", "collectives")))


def test_no_file_context_outlives_its_lint() -> None:
    """A fact cached outside the context that holds the context (a weak-keyed map whose value keeps its
    key) keeps every file's tree alive: a cold run over a project grew 30% slower from one."""
    import gc

    from flake8_xla.engine import lint_source
    from flake8_xla.rule import FileContext

    source = ("import torch_xla.core.xla_model as xm\n"
              "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\n\n"
              "def save(net):\n    model = FSDP(net)\n    xm.save(model.state_dict(), '/tmp/m.pt')\n")
    gc.collect()
    before = {id(o) for o in gc.get_objects() if isinstance(o, FileContext)}  # other tests' may live on
    assert lint_source(source, "train.py")
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, FileContext) and id(o) not in before]
