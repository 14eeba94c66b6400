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
    ("rules/__init__.py", "flake8_xla.rules.patterns"): "ast-grep and the facts load with the first rule run",
    ("cli/commands.py", "..docs"): "only `explain` renders a rule page",
    ("cli/running.py", "..documents.programs"): "only notebooks, Markdown and rst files need the documents layer",
    ("cli/running.py", "..documents.reading"): "only notebooks, Markdown and rst files need the documents layer",
    ("cli/commands.py", "..lsp.server"): "only `server` needs the language server (and pygls, an optional extra)",
    ("cli/project.py", "..analysis.summaries"): "only a step that calls a helper of another module needs its summary",
    ("cli/running.py", "..engine"): "the engine loads when a file is linted, not for a cached or skipped one",
    ("cli/running.py", "..fixing"): "the fixpoint loop (and the semantic model) only when a fix is built",
    ("cli/running.py", ".project"): "the project index only when a file is linted, not for a cached one",
    ("cli/commands.py", "..engine"): "only `explain` and `rules` list the rules",
    ("cli/commands.py", "..migration"): "only `migrate-report` renders the migration report",
    ("output/formats.py", "..engine"): "only JSON, SARIF and GitHub output ask the rules for their levels",
    ("output/formats.py", "..fixing"): "only SARIF's suggested fixes run the fixpoint loop",
    ("fixing/__init__.py", "."): "a caller of fixing.lines alone does not load the fixpoint loop",
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
                  for p in PACKAGE.rglob("*.py") if p.name != "__main__.py"})


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_first(module: str) -> None:
    """Imported first in a fresh interpreter, every module loads: a cycle fails for some order."""
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _layer(module: str) -> str:
    """The folder (or top-level module) a flake8_xla module belongs to: its layer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_imports():
    """(importing layer, imported layer) for every module-level import between two layers."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("flake8_xla",) + path.relative_to(PACKAGE).with_suffix("").parts).replace(".__init__", "")
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                targets = [".".join(base + ([node.module] if node.module else []))]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue  # imports under `if TYPE_CHECKING:` are annotations, not dependencies
            for target in targets:
                if target.startswith("flake8_xla.") and _layer(target) != _layer(module):
                    yield _layer(module), _layer(target)


def test_layers_form_no_cycle() -> None:
    """analysis/, fixing/, lifecycle/, documents/, output/, cli/ and the top-level modules import
    each other in one direction: repeatedly peel off a layer that imports no remaining one."""
    edges = {}
    for importer, imported in layer_imports():
        edges.setdefault(importer, set()).add(imported)
    remaining = set(edges) | {layer for targets in edges.values() for layer in targets}
    while remaining:
        leaves = {layer for layer in remaining if not (edges.get(layer, set()) & remaining)}
        cycle = {k: sorted(v & remaining) for k, v in edges.items() if k in remaining}
        assert leaves, f"import cycle among layers: {cycle}"
        remaining -= leaves


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


RULES = PACKAGE / "rules"
# how a file is understood is a shared fact of flake8_xla/analysis/, reached through ctx.get(...):
# a rule file never walks the file itself nor keeps a fact of its own
TREE_WALKS = {"walk", "iter_child_nodes", "parents", "NodeVisitor", "NodeTransformer"}


def analysis_in_rule_files():
    """(rule file, line, what) for each tree walk, parent map or class besides the rule in a rule file.
    The shared ``walk`` on a node the rule is deciding about (a loop, a test) is allowed; on the
    whole file (``walk([ctx.tree])``) it is not."""
    for path in sorted(RULES.glob("*/xla*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            if not _rule_or_record(cls):
                yield path.name, cls.lineno, f"class {cls.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ast" \
                    and node.attr in TREE_WALKS:
                yield path.name, node.lineno, f"ast.{node.attr}"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TREE_WALKS:
                whole = any(isinstance(n, ast.Attribute) and n.attr == "tree" or isinstance(n, ast.Name)
                            and n.id == "tree" for n in ast.walk(node))
                if node.func.id != "walk" or whole:
                    yield path.name, node.lineno, f"{node.func.id}(...) of the whole file"


def _rule_or_record(cls: ast.ClassDef) -> bool:
    """The rule itself, or a NamedTuple: a finding's parts, not a fact computed from the file."""
    bases = {getattr(base, "id", getattr(base, "attr", None)) or "" for base in cls.bases}
    return any(name.endswith("Rule") for name in bases) or bases == {"NamedTuple"}


def test_rule_files_hold_no_analysis() -> None:
    assert list(analysis_in_rule_files()) == []


def test_the_check_for_analysis_in_rule_files_can_fail(tmp_path, monkeypatch) -> None:
    (tmp_path / "heuristics").mkdir()
    (tmp_path / "heuristics" / "xla999_example.py").write_text(
        "import ast\nfrom flake8_xla.analysis.syntax import walk\n\nclass Example(Rule):\n"
        "    def check(self, ctx):\n        nodes = walk([ctx.tree])\n        more = ast.walk(ctx.tree)\n"
        "        ok = walk([nodes[0]])\n\nclass _Fact:\n    pass\n\n"
        "class Found(NamedTuple):\n    node: ast.AST\n\nclass Renamed(LifecycleRule):\n    pass\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "RULES", tmp_path)
    assert list(analysis_in_rule_files()) == [
        ("xla999_example.py", 10, "class _Fact"), ("xla999_example.py", 6, "walk(...) of the whole file"),
        ("xla999_example.py", 7, "ast.walk")]


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
