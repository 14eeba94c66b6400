"""Static reading of the Python sources inside a wheel (zipfile + ast; nothing is installed or imported).

Shared by tools/check_releases.py (the torch_xla release wheels) and tools/check_torchtpu.py (the
torch-tpu and torch wheels). ``WheelSource`` maps the modules of some top-level packages to their files
(``.py``, else ``.pyi``; a directory without ``__init__.py`` is a namespace package), lists the bindings
of a module's top level or of a class body (def, class, assignment, import, ``from`` import, star
imports, ``__all__``), and finds a name in a module (``lookup``: its own binding, else through the star
imports that export it, else its submodule) and a dotted name's longest module prefix (``split``).
How a binding is followed further (imports, re-exports, aliases, class members) is each tool's own.
"""
from __future__ import annotations

import ast
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple


@dataclass
class Binding:
    name: str
    kind: str  # def | class | assign | import | from | module
    node: Optional[ast.AST]
    module: str
    path: str
    source: Optional[str] = None  # import/from: the module named
    attr: Optional[str] = None  # from: the attribute imported
    nodes: List[ast.AST] = field(default_factory=list)  # every def of the name (a property's getter, setter)


def toplevel(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, including those nested in if/try/with/for blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With)):
            yield from toplevel(stmt.body)
            yield from toplevel(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try):
            yield from toplevel(stmt.body)
            for handler in stmt.handlers:
                yield from toplevel(handler.body)
            yield from toplevel(stmt.orelse)
            yield from toplevel(stmt.finalbody)


def dotted(node: ast.AST) -> Optional[List[str]]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def target_names(target: ast.AST) -> Iterator[ast.Name]:
    """The names an assignment target binds (``a``, ``a, *b``), not ``a.attr`` or ``a[i]``."""
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from target_names(elt)
    elif isinstance(target, ast.Starred):
        yield from target_names(target.value)


class WheelSource:
    """The Python modules of the packages ``tops`` inside a wheel, read with zipfile + ast."""

    # Which def of a name defined more than once is its binding's ``node`` (``nodes`` has them all):
    # 0 the first (an @overload's first signature, a property's getter), -1 the last (what Python binds).
    def_node = 0

    def __init__(self, wheel: Path, tops: Sequence[str]):
        self.zip = zipfile.ZipFile(wheel)
        self.modules: Dict[str, str] = {}
        for name in sorted(self.zip.namelist(), key=lambda n: n.endswith(".py")):  # .py wins over .pyi
            if not (name.endswith(".py") or name.endswith(".pyi")) or name.split("/")[0] not in tops:
                continue
            parts = name.rsplit(".", 1)[0].split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            self.modules[".".join(parts)] = name
        for module in list(self.modules):  # namespace packages (a directory without __init__.py)
            parts = module.split(".")
            for cut in range(1, len(parts)):
                self.modules.setdefault(".".join(parts[:cut]), "/".join(parts[:cut]) + "/")
        self._trees: Dict[str, ast.Module] = {}
        self._bindings: Dict[str, Tuple[Dict[str, Binding], List[str], Optional[List[str]]]] = {}

    def tree(self, path: str) -> ast.Module:
        if path not in self._trees:
            self._trees[path] = ast.Module(body=[], type_ignores=[]) if path.endswith("/") else ast.parse(
                self.zip.read(path), filename=path)
        return self._trees[path]

    @staticmethod
    def ev(path: str, node: Optional[ast.AST] = None) -> str:
        return f"{path}:{node.lineno}" if node is not None and hasattr(node, "lineno") else path

    def package_of(self, module: str) -> str:
        path = self.modules[module]
        return module if path.endswith("/") or path.rsplit("/", 1)[-1].startswith("__init__.") \
            else module.rpartition(".")[0]

    def bindings(self, module: str, body: Optional[Sequence[ast.stmt]] = None, scope: Optional[str] = None):
        """(names, star-import sources, __all__) of a module, or of a class ``body`` inside it."""
        key = module if scope is None else f"{module}:{scope}"
        if key in self._bindings:
            return self._bindings[key]
        path = self.modules[module]
        package = self.package_of(module)
        names: Dict[str, Binding] = {}
        stars: List[str] = []
        exported: Optional[List[str]] = None
        stmts = toplevel(self.tree(path).body) if body is None else iter(body)
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                prev = names.get(stmt.name)
                nodes = (prev.nodes if prev is not None and prev.kind == "def" else []) + [stmt]
                names[stmt.name] = Binding(stmt.name, "def", nodes[self.def_node], module, path, nodes=nodes)
            elif isinstance(stmt, ast.ClassDef):
                names[stmt.name] = Binding(stmt.name, "class", stmt, module, path)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    for node in target_names(target):
                        if node.id == "__all__" and isinstance(stmt.value, (ast.List, ast.Tuple)):
                            listed = [e.value for e in stmt.value.elts if isinstance(e, ast.Constant)]
                            exported = (exported or []) + listed if isinstance(stmt, ast.AugAssign) else listed
                        if not isinstance(stmt, ast.AugAssign) and stmt.value is not None:
                            names[node.id] = Binding(node.id, "assign", stmt, module, path)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    local = alias.asname or alias.name.split(".")[0]
                    names[local] = Binding(local, "import", stmt, module, path,
                                           source=alias.name if alias.asname else local)
            elif isinstance(stmt, ast.ImportFrom):
                if stmt.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (stmt.level - 1)]
                    base = ".".join(parts + ([stmt.module] if stmt.module else []))
                else:
                    base = stmt.module or ""
                for alias in stmt.names:
                    if alias.name == "*":
                        stars.append(base)
                    else:
                        local = alias.asname or alias.name
                        names[local] = Binding(local, "from", stmt, module, path, source=base, attr=alias.name)
        self._bindings[key] = (names, stars, exported)
        return self._bindings[key]

    def lookup(self, module: str, name: str, depth: int = 0) -> Optional[Binding]:
        """The binding of ``name`` at the top level of ``module`` (following star imports), or its submodule."""
        if module not in self.modules or depth > 8:
            return None
        names, stars, _ = self.bindings(module)
        if name in names:
            return names[name]
        for source in reversed(stars):
            if source in self.modules:
                exported = self.bindings(source)[2]
                if (name in exported) if exported is not None else not name.startswith("_"):
                    found = self.lookup(source, name, depth + 1)
                    if found is not None:
                        return found
        if f"{module}.{name}" in self.modules:
            return Binding(name, "module", None, module, self.modules[f"{module}.{name}"], source=f"{module}.{name}")
        return None

    def module_binding(self, module: str) -> Binding:
        return Binding(module.rpartition(".")[2], "module", None, module, self.modules[module], source=module)

    def split(self, qualname: str) -> Tuple[Optional[str], List[str]]:
        """The longest module prefix of ``qualname``, and the attributes after it."""
        parts = qualname.split(".")
        for cut in range(len(parts), 0, -1):
            if ".".join(parts[:cut]) in self.modules:
                return ".".join(parts[:cut]), parts[cut:]
        return None, parts
