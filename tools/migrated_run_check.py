#!/usr/bin/env python3
"""Can a tree migrated to TorchTPU still be imported? (issue 35, item 6)

For every real tree under --trees: copy it, run ``flake8_xla fix --migrate-to torchtpu`` on the copy,
import every .py file the fix changed in a virtualenv that has TorchTPU and no torch_xla (one
subprocess per module), and run a static pass that needs no venv (names bound only where torch_xla
imports, imports the fix added inside a torch_xla guard, torch.device("tpu") probes it rewrote).

    python tools/migrated_run_check.py [--trees DIR] [--only A,B] [--venv DIR] [--json] [--static-only]

A measurement, not a gate: the exit status is 0 unless the script itself fails. See tools/README.md.
"""
from __future__ import annotations

import argparse
import ast
import collections
import concurrent.futures
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XLA = "torch_xla"
CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)  # code that runs elsewhere
TRY = (ast.Try, getattr(ast, "TryStar", ast.Try))
OUTCOMES = ("ok", "torch_xla", "missing-dependency", "name-error", "other")

# What the venv gets; tools/README.md records the same list. torch 2.13.0 is the CPU build that
# pip finds on this machine's configured sources (torch-tpu 0.2.0 needs 2.11-2.15); without libtpu,
# `import torch` aborts once torch_tpu is installed ("TPU_LIBRARY_PATH is not set").
VENV_STEPS = (
    ["torch==2.13.0"],
    ["--no-deps", "torch-tpu==0.2.0"],
    ["libtpu==0.0.52", "numpy", "absl-py", "immutabledict", "frozendict", "portpicker", "pyzmq"],
)


# ---------------------------------------------------------------------------------------------
# static model: every torch_xla import raises ImportError

def is_xla_module(name: str | None) -> bool:
    return bool(name) and (name == XLA or name.startswith(XLA + "."))


def is_xla_import(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(is_xla_module(a.name) for a in node.names)
    return isinstance(node, ast.ImportFrom) and node.level == 0 and is_xla_module(node.module)


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)) in CATCHES_IMPORT_ERROR
               for t in types)


def import_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return [a.asname or a.name for a in node.names if a.name != "*"]


class Scope:
    def __init__(self, kind: str, name: str, parent: Scope | None):
        self.kind, self.parent = kind, parent
        self.qualname = name if parent is None or parent.parent is None else f"{parent.qualname}.{name}"
        self.live: set[str] = set()   # names with a binding that runs without torch_xla
        self.dead: set[str] = set()   # names with a binding only reached where torch_xla imports
        self.values: dict[str, list] = collections.defaultdict(list)  # live assigned values (flags)
        self.declared: dict[str, str] = {}  # name -> "global" / "nonlocal"
        self.star = False             # a live `from x import *` could bind anything
        self.uses: list[tuple[str, int]] = []


class DeadNames:
    """Walks a module once. ``dead=True`` means: this code does not run when torch_xla is absent
    (after a torch_xla import in the same block, in a try's else, in an `if FLAG:` whose flag is
    falsy without torch_xla, or inside a def that is never defined). Bindings there go to
    Scope.dead, uses there are not recorded."""

    def __init__(self, flags: dict[str, bool]):
        self.flags = flags  # module-level names -> their truth value without torch_xla
        self.scopes: list[Scope] = []
        self.future_annotations = False

    def new_scope(self, kind, name, parent):
        self.scopes.append(Scope(kind, name, parent))
        return self.scopes[-1]

    def bind(self, scope: Scope, name: str, dead: bool, value=None):
        if scope.declared.get(name) == "global":
            scope = self.scopes[0]
        elif scope.declared.get(name) == "nonlocal":
            while scope.parent is not None and (scope.kind != "function" or name not in scope.live | scope.dead):
                scope = scope.parent  # nearest enclosing function that binds it (bound earlier)
        (scope.dead if dead else scope.live).add(name)
        if not dead:
            scope.values[name].append(value)

    # -- statements: each returns True when the code after it does not run (an ImportError from
    # torch_xla, or a raise in the handler that catches it, propagates out of it)
    def block(self, stmts, scope, dead) -> bool:
        for s in stmts:
            dead = self.stmt(s, scope, dead) or dead
        return dead

    def stmt(self, s, scope, dead) -> bool:
        if is_xla_import(s):
            for name in import_names(s):
                self.bind(scope, name, True)
            return True
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            if isinstance(s, ast.ImportFrom) and s.module == "__future__":
                self.future_annotations |= any(a.name == "annotations" for a in s.names)
            if any(a.name == "*" for a in s.names) and not dead:
                scope.star = True
            for name in import_names(s):
                self.bind(scope, name, dead)
            return dead
        if isinstance(s, TRY):
            entry = dead
            body_raises = self.block(s.body, scope, entry) and not entry
            cont = True if body_raises else None  # True until a handler catches the ImportError
            for h in s.handlers:
                self.expr(h.type, scope, entry)
                if h.name:
                    self.bind(scope, h.name, entry)
                h_end = self.block(h.body, scope, entry) or any(isinstance(x, ast.Raise) for x in h.body)
                if body_raises and catches_import_error(h):
                    cont, body_raises = h_end, False  # the first handler that catches it runs
            else_end = self.block(s.orelse, scope, entry or cont is not None)
            cont = else_end if cont is None else cont
            return self.block(s.finalbody, scope, entry) or cont
        if isinstance(s, ast.If):
            self.expr(s.test, scope, dead)
            truth = None if dead else self.truth(s.test)
            body_end = self.block(s.body, scope, dead or truth is False)
            else_end = self.block(s.orelse, scope, dead or truth is True)
            return dead or {True: body_end, False: else_end}.get(truth, body_end and else_end)
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            self.expr(getattr(s, "iter", None) or s.test, scope, dead)
            if not isinstance(s, ast.While):
                self.expr(s.target, scope, dead)
            self.block(s.body, scope, dead)
            self.block(s.orelse, scope, dead)
            return dead  # the loop may run zero times
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.expr(item.context_expr, scope, dead)
                self.expr(item.optional_vars, scope, dead)
            return self.block(s.body, scope, dead)
        if isinstance(s, ast.Match):
            self.expr(s.subject, scope, dead)
            for case in s.cases:
                self.expr(case.pattern, scope, dead)
                self.expr(case.guard, scope, dead)
                self.block(case.body, scope, dead)
            return dead
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in s.decorator_list:
                self.expr(d, scope, dead)
            if isinstance(s, ast.ClassDef):
                for b in s.bases + [k.value for k in s.keywords]:
                    self.expr(b, scope, dead)
                inner = self.new_scope("class", s.name, scope)
                self.block(s.body, inner, dead)
            else:
                inner = self.function(s, scope, dead)
                self.block(s.body, inner, dead)  # never defined -> never runs
            self.bind(scope, s.name, dead)
            return dead
        if isinstance(s, (ast.Global, ast.Nonlocal)):
            for name in s.names:
                scope.declared[name] = "global" if isinstance(s, ast.Global) else "nonlocal"
            return dead
        if isinstance(s, ast.AnnAssign):
            if scope.kind != "function" and not self.future_annotations:
                self.expr(s.annotation, scope, dead)  # evaluated only outside functions
            self.expr(s.value, scope, dead)
            if s.value is not None or not isinstance(s.target, ast.Name):
                self.expr(s.target, scope, dead, s.value)
            return dead
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and not dead:
            scope.uses.append((s.target.id, s.lineno))
        if isinstance(s, ast.Assign):
            self.expr(s.value, scope, dead)
            for t in s.targets:
                self.expr(t, scope, dead, s.value)
            return dead
        for child in ast.iter_child_nodes(s):
            self.expr(child, scope, dead)
        return dead

    def function(self, node, scope, dead) -> Scope:
        a = node.args
        for d in a.defaults + [d for d in a.kw_defaults if d is not None]:
            self.expr(d, scope, dead)
        args = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
        if not self.future_annotations and not isinstance(node, ast.Lambda):
            for x in args:
                self.expr(x.annotation, scope, dead)
            self.expr(node.returns, scope, dead)
        inner = self.new_scope("function", getattr(node, "name", "<lambda>"), scope)
        for x in args:
            self.bind(inner, x.arg, dead)
        return inner

    def expr(self, node, scope, dead, value=None):
        if node is None:
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                self.bind(scope, node.id, dead, value)
            elif not dead:
                scope.uses.append((node.id, node.lineno))
            return
        if isinstance(node, ast.Lambda):
            self.expr(node.body, self.function(node, scope, dead), dead)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            self.expr(node.generators[0].iter, scope, dead)  # evaluated in the enclosing scope
            inner = self.new_scope("function", "<comprehension>", scope)
            for i, g in enumerate(node.generators):
                if i:
                    self.expr(g.iter, inner, dead)
                self.expr(g.target, inner, dead)
                for cond in g.ifs:
                    self.expr(cond, inner, dead)
            for part in (getattr(node, "elt", None), getattr(node, "key", None), getattr(node, "value", None)):
                self.expr(part, inner, dead)
            return
        if isinstance(node, ast.NamedExpr):
            while scope.qualname.endswith("<comprehension>") and scope.parent:
                scope = scope.parent  # the walrus binds in the enclosing function
            self.expr(node.value, scope, dead)
            self.bind(scope, node.target.id, dead, node.value)
            return
        if isinstance(node, ast.BoolOp):  # `HAS_XLA and xm.is_master_ordinal()`: short-circuit
            for v in node.values:
                self.expr(v, scope, dead)
                dead = dead or self.truth(v) is isinstance(node.op, ast.Or)
            return
        if isinstance(node, ast.IfExp):
            truth = self.truth(node.test)
            self.expr(node.test, scope, dead)
            self.expr(node.body, scope, dead or truth is False)
            self.expr(node.orelse, scope, dead or truth is True)
            return
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            self.bind(scope, node.name, dead)
        if isinstance(node, ast.MatchMapping) and node.rest:
            self.bind(scope, node.rest, dead)
        for child in ast.iter_child_nodes(node):
            self.expr(child, scope, dead)

    def truth(self, test) -> bool | None:
        """The value of an `if` test without torch_xla, from the module's flags; None if unknown."""
        if isinstance(test, ast.Name):
            return self.flags.get(test.id)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            t = self.truth(test.operand)
            return None if t is None else not t
        if isinstance(test, ast.BoolOp):
            values = [self.truth(v) for v in test.values]
            stop = isinstance(test.op, ast.Or)  # Or: any True decides; And: any False decides
            if stop in values:
                return stop
            return (not stop) if all(v is (not stop) for v in values) else None
        return None


def module_flags(tree: ast.Module) -> dict[str, bool]:
    """Module-level names that some torch_xla-only code binds and whose every other binding is a
    constant: their truth value on TorchTPU (`HAS_XLA = True` after the import, False in except)."""
    walker = DeadNames({})
    walker.block(tree.body, walker.new_scope("module", "", None), False)
    mod = walker.scopes[0]
    flags = {}
    for name in mod.dead:
        values = mod.values.get(name, [])
        if name not in mod.declared and all(isinstance(v, ast.Constant) for v in values):
            truths = {bool(v.value) for v in values}
            if len(truths) <= 1:  # no live binding at all: the name is unbound, the test raises
                flags[name] = truths.pop() if truths else False
    return flags


def dead_name_uses(source: str) -> list[tuple[int, str, str]]:
    """(line, name, scope) for each scope's first use of a name whose every binding in the scope
    that the use resolves to runs only where torch_xla imports."""
    tree = ast.parse(source)
    walker = DeadNames(module_flags(tree))
    walker.block(tree.body, walker.new_scope("module", "", None), False)
    found = {}
    for scope in walker.scopes:
        qual = scope.qualname.replace(".<comprehension>", "").replace("<comprehension>", "")
        for name, line in scope.uses:
            owner = resolve(scope, name)
            if (owner is not None and name in owner.dead and name not in owner.live and not owner.star
                    and (qual, name) not in found):
                found[(qual, name)] = line
    return sorted((line, name, qual or "<module>") for (qual, name), line in found.items())


def resolve(scope: Scope, name: str) -> Scope | None:
    """The scope whose binding a use refers to (Python's LEGB, class bodies skipped from inside)."""
    if scope.declared.get(name) == "global":
        while scope.parent is not None:
            scope = scope.parent
    first = True
    while scope is not None:
        if (first or scope.kind != "class") and name in scope.live | scope.dead:
            return scope
        if scope.parent is None and scope.star:
            return None  # could come from the star import
        first, scope = False, scope.parent
    return None


# ---------------------------------------------------------------------------------------------
# before/after comparison: imports the fix added inside a guard, probes it rewrote

def parents_of(tree) -> dict:
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def scope_path(node, parents) -> str:
    names = []
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
    return ".".join(reversed(names))


def walk_no_defs(nodes):
    """Nodes under these statements, not entering def/class/lambda (their code runs elsewhere)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, DEFS):
            stack.extend(ast.iter_child_nodes(node))


def xla_bound_names(tree) -> set[str]:
    return {n for node in ast.walk(tree) if is_xla_import(node) for n in import_names(node)}


def calls_xla(nodes, names) -> bool:
    for node in walk_no_defs(nodes):
        if isinstance(node, ast.Call):
            root = node.func
            while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
                root = root.value if not isinstance(root, ast.Call) else root.func
            if isinstance(root, ast.Name) and root.id in names:
                return True
    return False


def is_tpu_device_call(node) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == "device" and isinstance(f.value, ast.Name)
            and f.value.id == "torch" and bool(node.args) and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str) and node.args[0].value.startswith("tpu"))


def compare(before: str, after: str) -> dict:
    """Added imports inside a torch_xla guard and rewritten probes in one file the fix changed."""
    old, new = ast.parse(before), ast.parse(after)
    old_lines, new_lines = before.splitlines(), after.splitlines()
    to_old, added = {}, set()  # new line -> old line (unchanged lines); new lines the fix wrote
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            to_old.update({j + 1: i + 1 for i, j in zip(range(i1, i2), range(j1, j2))})
        else:
            added.update(range(j1 + 1, j2 + 1))
    old_parents, new_parents = parents_of(old), parents_of(new)
    old_tries = {n.lineno: n for n in ast.walk(old) if isinstance(n, TRY)}
    old_xla_names = xla_bound_names(old)

    def guard_try(t) -> bool:  # its body imports torch_xla, now or before the fix
        before_try = old_tries.get(to_old.get(t.lineno))
        return any(is_xla_import(n) for n in walk_no_defs(t.body)) or (
            before_try is not None and any(is_xla_import(n) for n in walk_no_defs(before_try.body)))

    guards = [n for n in ast.walk(new) if isinstance(n, TRY) and guard_try(n)]
    guards += [n for n in ast.walk(old) if isinstance(n, TRY)
               and any(is_xla_import(x) for x in walk_no_defs(n.body))]
    flags = {t.id for g in guards for part in [g.body] + [h.body for h in g.handlers]
             for n in walk_no_defs(part) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
             for tgt in (n.targets if isinstance(n, ast.Assign) else [n.target])
             for t in ast.walk(tgt) if isinstance(t, ast.Name)}

    def in_guard(node) -> bool:
        while node in new_parents:
            node = new_parents[node]
            if isinstance(node, TRY) and guard_try(node):
                return True
            if isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id in flags for n in ast.walk(node.test)):
                return True
        return False

    def keys(tree, parents):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                where = scope_path(node, parents)
                for a in node.names:
                    yield node, (where, getattr(node, "module", None), getattr(node, "level", 0), a.name, a.asname)

    extra = (collections.Counter(k for _, k in keys(new, new_parents))
             - collections.Counter(k for _, k in keys(old, old_parents)))
    guard_imports = []
    for node, key in keys(new, new_parents):
        if extra[key] > 0 and node.lineno in added:
            extra[key] -= 1
            if in_guard(node):
                guard_imports.append((node.lineno, new_lines[node.lineno - 1].strip()))

    probes = []
    for node in ast.walk(new):
        if not (is_tpu_device_call(node) and node.lineno in added):
            continue
        child, parent = node, new_parents.get(node)
        while parent is not None and not isinstance(parent, DEFS):
            if isinstance(parent, TRY) and child in parent.body:
                before_try = old_tries.get(to_old.get(parent.lineno))
                if before_try is not None and calls_xla(before_try.body, old_xla_names):
                    probes.append((node.lineno, new_lines[node.lineno - 1].strip()))
                    break
            child, parent = parent, new_parents.get(parent)
    return {"guard_imports": sorted(set(guard_imports)), "probes": sorted(set(probes))}


# ---------------------------------------------------------------------------------------------
# the TorchTPU venv and the imports

def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def venv_works(venv: Path) -> str | None:
    """None when torch + torch_tpu import and torch_xla does not; else what is wrong."""
    py = venv_python(venv)
    if not py.exists():
        return f"{py} does not exist"
    r = subprocess.run([str(py), "-c", "import torch, torch_tpu; print(torch.__version__)"],
                       capture_output=True, text=True, env=import_env(), timeout=300)
    if r.returncode:
        return "import torch, torch_tpu failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    if subprocess.run([str(py), "-c", "import torch_xla"], capture_output=True, env=import_env(),
                      timeout=300).returncode == 0:
        return "torch_xla is importable in the venv"
    return None


def build_venv(venv: Path, log) -> str | None:
    problem = venv_works(venv)
    if problem is None:
        return None
    log(f"building {venv} ({problem})")
    base = getattr(sys, "_base_executable", sys.executable)
    try:
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        for step in VENV_STEPS:
            subprocess.run([str(venv_python(venv)), "-m", "pip", "install", "-q", *step], check=True)
    except subprocess.CalledProcessError as exc:
        return f"venv build failed: {exc}"
    return venv_works(venv)


def import_env() -> dict:
    env = dict(os.environ)
    for name in ("TORCH_DEVICE_BACKEND_AUTOLOAD", "PYTHONPATH", "PYTHONSTARTUP"):
        env.pop(name, None)  # the autoload stays at its default; nothing of the dev venv leaks in
    env.update(PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


# Runs inside the TorchTPU venv. argv: mode (module/path), name, file, separator, sys.path front,
# separator, sys.path end.
# Prints one JSON line; catches BaseException so that a SystemExit from top-level argparse counts too.
IMPORTER = r"""
import importlib, importlib.util, json, sys, traceback
mode, name, path, sep, *paths = sys.argv[1:]
sys.path[:0] = paths[:paths.index(sep)]
sys.path += paths[paths.index(sep) + 1:]
sys.argv = [path]
try:
    if mode == "module":
        importlib.import_module(name)
    else:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    out = {"type": None}
except BaseException as exc:
    out = {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
           "name": getattr(exc, "name", None),
           "last": traceback.format_exception_only(type(exc), exc)[-1].strip()}
print("\n@@RESULT@@" + json.dumps(out), flush=True)
"""


def import_target(copy: Path, rel: str) -> tuple[str, str, list[str], list[str]]:
    """(mode, name, sys.path front, sys.path end): a dotted import when the file is inside packages.

    A package module's own directory is not put on sys.path (Python does not either): its siblings
    (accelerate's logging.py, clipa's profile.py, tez's model/tez.py) would shadow the stdlib or the
    package itself, even from the end, since a module anywhere beats a namespace package.
    Directories without __init__.py count as namespace packages as far as the file's relative
    imports need (the extracted trees lack some __init__.py files)."""
    file = copy / rel
    try:
        need = max([n.level for n in ast.walk(ast.parse(file.read_text(errors="replace")))
                    if isinstance(n, ast.ImportFrom)], default=0)
    except SyntaxError:
        need = 0
    package: list[str] = []
    top = file.parent
    while top not in (copy, copy / "src") and top.name.isidentifier() and (
            (top / "__init__.py").exists() or len(package) < need):
        package.insert(0, top.name)
        top = top.parent
    roots = [copy, copy / "src"]
    if package:
        front = [str(p) for p in dict.fromkeys([top, *roots]) if p.is_dir()]
        dotted = ".".join(package + ([] if file.name == "__init__.py" else [file.stem]))
        return "module", dotted, front, []
    name = file.stem  # as a script would be imported, unless that clashes with the stdlib
    if not name.isidentifier() or name in sys.stdlib_module_names:
        name = "_mrc_" + "".join(c if c.isalnum() else "_" for c in rel)
    return "path", name, [str(p) for p in dict.fromkeys([file.parent, *roots]) if p.is_dir()], []


def classify(out: dict | None, stderr: str, timeout: bool) -> tuple[str, str]:
    if timeout:
        return "other", "timeout"
    if out is None:
        return "other", "crashed: " + (stderr.strip().splitlines() or ["no output"])[-1][:300]
    if out["type"] is None:
        return "ok", ""
    if "ImportError" in out["mro"] and (is_xla_module(out["name"]) or "torch_xla" in out["last"]):
        return "torch_xla", out["last"]
    if out["type"] == "ModuleNotFoundError":
        return "missing-dependency", out["name"] or out["last"]
    if "NameError" in out["mro"]:
        return "name-error", out["last"]
    return "other", out["last"]


def import_one(py: Path, copy: Path, rel: str, timeout: float) -> tuple[str, str]:
    if Path(rel).name == "__main__.py":
        return "skipped", "__main__.py: its top-level code is the program"
    mode, name, front, end = import_target(copy, rel)
    try:
        r = subprocess.run([str(py), "-c", IMPORTER, mode, name, str(copy / rel), "::", *front, "::", *end],
                           cwd=copy, capture_output=True, text=True, env=import_env(), timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return classify(None, "", True)
    marker = r.stdout.rfind("@@RESULT@@")
    out = json.loads(r.stdout[marker + 10:].splitlines()[0]) if marker >= 0 else None
    return classify(out, r.stderr, False)


# ---------------------------------------------------------------------------------------------
# one tree

def py_files(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = p.read_text(encoding="utf-8", errors="surrogateescape")
    return out


def check_tree(tree: Path, args, py: Path | None, log) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"mrc-{tree.name}-"))
    copy = tmp / tree.name
    try:
        shutil.copytree(tree, copy, symlinks=True)
        before = py_files(copy)
        fix = subprocess.run([args.engine_python, "-m", "flake8_xla", "fix", "--migrate-to", "torchtpu",
                              "--no-cache", "--isolated", "."], cwd=copy, capture_output=True, text=True)
        after = py_files(copy)
        changed = [rel for rel in after if before.get(rel) != after[rel]]
        report = {"tree": tree.name, "fix_status": fix.returncode, "changed": changed, "imports": {},
                  "static": [], "guard_imports": [], "probes": [], "errors": []}
        if fix.returncode not in (0, 1):
            report["errors"].append("fix exited %d: %s" % (fix.returncode, fix.stderr.strip()[-300:]))
        for rel in changed:
            try:
                old_findings = {(n, s) for _, n, s in dead_name_uses(before.get(rel, ""))}
                for line, name, scope in dead_name_uses(after[rel]):
                    report["static"].append({"file": rel, "line": line, "name": name, "scope": scope,
                                             "before_fix_too": (name, scope) in old_findings})
                if rel in before:
                    c = compare(before[rel], after[rel])
                    report["guard_imports"] += [{"file": rel, "line": ln, "text": t} for ln, t in c["guard_imports"]]
                    report["probes"] += [{"file": rel, "line": ln, "text": t} for ln, t in c["probes"]]
            except SyntaxError as exc:
                report["errors"].append(f"{rel}: does not parse: {exc}")
        if py is not None:
            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                results = pool.map(lambda rel: import_one(py, copy, rel, args.timeout), changed)
                for rel, (outcome, detail) in zip(changed, results):
                    report["imports"][rel] = {"outcome": outcome, "detail": detail}
        return report
    finally:
        if args.keep:
            log(f"kept {copy}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def counts(report: dict) -> dict:
    c = {"trees": 1, "files changed": len(report["changed"])}
    outcomes = collections.Counter(v["outcome"] for v in report["imports"].values())
    c.update({o: outcomes[o] for o in OUTCOMES + ("skipped",)})
    c.update({"static": len(report["static"]),
              "static new": sum(not f["before_fix_too"] for f in report["static"]),
              "guard imports": len(report["guard_imports"]),
              "probes": len(report["probes"])})
    return c


def print_report(reports: list[dict], venv_problem: str | None) -> None:
    cols = ["files changed", *OUTCOMES, "skipped", "static", "static new", "guard imports", "probes"]
    print(f"{'tree':24}" + "".join(f"{c:>10}" for c in ["changed", "ok", "xla", "missing", "name-err",
                                                        "other", "skipped", "static", "stat-new",
                                                        "guard-imp", "probes"]))
    total = collections.Counter()
    for r in reports:
        c = counts(r)
        total.update(c)
        print(f"{r['tree']:24}" + "".join(f"{c[k]:>10}" for k in cols))
    print(f"{'TOTAL (%d trees)' % total['trees']:24}" + "".join(f"{total[k]:>10}" for k in cols))
    if venv_problem:
        print(f"\nimports not run: {venv_problem}")
    missing = collections.Counter(v["detail"].split(".")[0] for r in reports for v in r["imports"].values()
                                  if v["outcome"] == "missing-dependency")
    if missing:
        print("\nmissing dependencies (modules): " + ", ".join(f"{n} {c}" for n, c in missing.most_common()))
    for r in reports:
        lines = [f"  {rel}: {v['outcome']}: {v['detail']}" for rel, v in r["imports"].items()
                 if v["outcome"] in ("name-error", "other")]
        lines += [f"  {s['file']}:{s['line']}: name {s['name']!r} is bound only where torch_xla imports"
                  + (" (before the fix too)" if s["before_fix_too"] else "") for s in r["static"]]
        lines += [f"  {g['file']}:{g['line']}: added import inside a torch_xla guard: {g['text']}"
                  for g in r["guard_imports"]]
        lines += [f"  {p['file']}:{p['line']}: rewritten probe: {p['text']}" for p in r["probes"]]
        lines += [f"  error: {e}" for e in r["errors"]]
        if lines:
            print(f"\n{r['tree']}:")
            print("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", type=Path, default=Path("/work/realcode-trees"))
    ap.add_argument("--only", default="", help="comma-separated tree names")
    ap.add_argument("--venv", type=Path, default=Path("/work/venv-torchtpu"))
    ap.add_argument("--engine-python", default=str(ROOT / ".venv" / "bin" / "python"),
                    help="the python whose flake8_xla runs the fix")
    ap.add_argument("--static-only", action="store_true", help="no venv, no imports")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per module import")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="imports run at once")
    ap.add_argument("--keep", action="store_true", help="keep the migrated copies")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    only = {n for n in args.only.split(",") if n}
    trees = [p for p in sorted(args.trees.iterdir()) if p.is_dir() and (not only or p.name in only)]
    if only - {p.name for p in trees}:
        ap.error("no such tree: " + ", ".join(sorted(only - {p.name for p in trees})))
    venv_problem = "--static-only" if args.static_only else build_venv(args.venv, log)
    py = None if venv_problem else venv_python(args.venv)
    reports = []
    for tree in trees:
        log(f"{tree.name} ...")
        reports.append(check_tree(tree, args, py, log))
    if args.json:
        print(json.dumps({"venv": str(args.venv), "venv_problem": venv_problem, "trees": reports,
                          "totals": dict(sum(map(collections.Counter, map(counts, reports)), collections.Counter()))},
                         indent=1))
    else:
        print_report(reports, venv_problem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
