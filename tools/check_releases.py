#!/usr/bin/env python3
"""Check rules/api_lifecycle.yaml against the torch_xla release wheels, statically.

For every release 2.1 ... 2.9 the torch_xla wheel is fetched with ``pip download`` (never
installed) into a cache directory, and its Python sources are read straight from the zip and
parsed with ``ast``; the compiled ``_XLAC*.so`` is scanned for the strings that name the
table's environment variables. Each table row is then checked, per release, against the state
the table implies (removed from ``removed_in``, deprecated from ``deprecated_in``, warning
through a deprecated call it makes from ``warns_in``, present before), and its torch_xla
replacement against ``replacement_since``.

Every disagreement is printed as ``row-id release: expected X, found Y (evidence file:line)``;
every row or aspect that cannot be checked statically is listed as skipped with the reason.

    python tools/check_releases.py [--cache DIR] [--releases 2.1.0,...] [--json] [--no-so]

Exit status: 0 when the table agrees with the wheels, 1 on disagreements, 2 on errors.
The default cache is $XLA_WHEEL_CACHE, else ~/.cache/flake8-xla/wheels.
Dependencies: PyYAML, this checkout's flake8_xla (the table is read through its typed loader) and
tools/wheel_source.py (the static reader of the wheel's Python sources).
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's flake8_xla
from flake8_xla.lifecycle.table import ApiRow, build_table  # noqa: E402
from flake8_xla.versions import Version, parse_version  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/wheel_source.py, when loaded by path
from wheel_source import Binding, WheelSource, dotted, toplevel  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "rules" / "api_lifecycle.yaml"
RELEASES = ("2.1.0", "2.2.0", "2.3.0", "2.4.0", "2.5.1", "2.6.0", "2.7.0", "2.8.1", "2.9.0")
PLATFORM = ("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64")

PRESENT, DEPRECATED, REMOVED = "present", "deprecated", "removed"
# not deprecated itself, but every use reaches a deprecated torch_xla function (the table's warns_in)
INDIRECT = "warns through a deprecated call"

# Callables whose use marks a definition as deprecated: torch_xla.experimental.deprecation's
# deprecated()/mark_deprecated()/register_deprecated() (2.1-2.7) and typing_extensions.deprecated (2.8+).
DEPRECATION_HELPERS = {"deprecated", "mark_deprecated", "register_deprecated"}
WARNING_CATEGORIES = {"DeprecationWarning", "UserWarning", "FutureWarning", "PendingDeprecationWarning"}
DEPRECAT = re.compile(r"deprecat", re.I)
# How an argument warning says the argument no longer counts (2.1-2.5 nprocs: "Unsupported nprocs, ignoring").
ARG_WARNING = re.compile(r"deprecat|unsupported|ignor", re.I)
ENV_ACCESSORS = {"get", "getenv", "getenv_as", "check_env_flag", "pop", "setdefault"}

# An environment variable that only configures one backend follows that backend's lifecycle, whose
# deprecation/removal text lives in _XLAC.so (e.g. "The XLA:CUDA device is deprecated in release 2.8.").
ENV_BACKEND = {"GPU_NUM_DEVICES": "CUDA", "PJRT_DEVICE=CUDA": "CUDA", "PJRT_DEVICE=GPU": "CUDA"}
BACKEND_DEPRECATED = r"XLA:{b}\b[^.]*\bdeprecated"
BACKEND_REMOVED = r"XLA:{b}\b[^.]*\bnot supported"


# --------------------------------------------------------------------------------------------
# The table, through the same typed loader the linter uses.

def implied_state(row: ApiRow, v: Version) -> str:
    """The state the table implies on release ``v`` (planned rows are simply present, or warn through
    a deprecated call from ``warns_in``; a keyword or value before its ``added_in`` fails there, as a
    removed one does)."""
    state = row.state(v) or ""
    if state in ("planned", "warns") and row.warns_on(v):
        return INDIRECT
    return {"removed": REMOVED, "deprecated": DEPRECATED, "unavailable": REMOVED}.get(state, PRESENT)


def load_table(path: Path = TABLE) -> List[ApiRow]:
    return list(build_table(yaml.safe_load(path.read_text(encoding="utf-8"))).rows)


# --------------------------------------------------------------------------------------------
# Fetching the wheels.

def default_cache() -> Path:
    env = os.environ.get("XLA_WHEEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "flake8-xla" / "wheels"


def cached_wheel(release: str, cache: Path) -> Optional[Path]:
    found = sorted(cache.glob(f"torch_xla-{release}-*.whl"))
    return found[0] if found else None


def fetch_wheel(release: str, cache: Path) -> Path:
    """The cached wheel of ``release``, downloaded first (without dependencies) if missing."""
    wheel = cached_wheel(release, cache)
    if wheel is not None:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *PLATFORM,
           f"torch_xla=={release}", "-d", str(cache)]
    print(f"downloading torch_xla {release} into {cache} ...", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheel = cached_wheel(release, cache)
    if proc.returncode != 0 or wheel is None:
        raise RuntimeError(f"pip download torch_xla=={release} failed:\n{proc.stderr.strip()}")
    return wheel


# --------------------------------------------------------------------------------------------
# Compiled library strings.

def scan_so(wheel: str, tokens: Sequence[str]) -> List[str]:
    """The NUL-delimited strings of the wheel's .so files that contain one of ``tokens``."""
    pattern = re.compile(b"|".join(re.escape(t.encode()) for t in tokens))
    found: Set[bytes] = set()
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not (info.filename.endswith(".so") or ".so." in info.filename):
                continue
            with zf.open(info) as fh:
                tail = b""
                while True:
                    chunk = fh.read(1 << 24)
                    if not chunk:
                        break
                    buf = tail + chunk
                    for match in pattern.finditer(buf):
                        start = buf.rfind(b"\0", max(0, match.start() - 2048), match.start()) + 1
                        end = buf.find(b"\0", match.end(), match.end() + 2048)
                        if start > 0 and end >= 0:  # a complete string (else it is seen again with the tail)
                            found.add(buf[start:end])
                    tail = buf[-4096:]
    return sorted(s.decode("ascii", "replace") for s in found)


# --------------------------------------------------------------------------------------------
# Static reading of one wheel.

@dataclass
class Finding:
    state: str  # present | deprecated | removed
    evidence: str  # file:line or a description of what is missing
    effect: Optional[str] = None  # removals: what a use does (AttributeError, ImportError, TypeError, ValueError)


def _callee(node: ast.AST) -> Optional[str]:
    while isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter nested function or class bodies."""
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        for child in ast.iter_child_nodes(cur):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def _is_warning(call: ast.Call) -> bool:
    func = call.func
    return ((isinstance(func, ast.Attribute) and func.attr in ("warn", "warning"))
            or (isinstance(func, ast.Name) and func.id == "warn"))


def _text(node: Optional[ast.AST]) -> str:
    if node is None:
        return ""
    return "".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _message(call: ast.Call) -> str:
    node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("message", "msg")), None)
    return _text(node)


def _says(text: str, word: str, pattern: re.Pattern) -> bool:
    """Some sentence of ``text`` names ``word`` and matches ``pattern``."""
    word_re = re.compile(r"(?<![\w])" + re.escape(word) + r"(?![\w])")
    return any(word_re.search(s) and pattern.search(s) for s in re.split(r"(?<=[.!?])\s+", text))


def _params(func: ast.AST, method: bool) -> Tuple[List[str], List[str], bool, bool]:
    args = func.args  # type: ignore[attr-defined]
    positional = [a.arg for a in args.posonlyargs + args.args]
    if method and positional:
        positional = positional[1:]
    return positional, [a.arg for a in args.kwonlyargs], args.vararg is not None, args.kwarg is not None


class Wheel(WheelSource):
    """The torch_xla sources of one release wheel (tools/wheel_source.py reads them)."""

    def_node = -1  # a redefined name is its last def: an @overload's implementation, which has the parameters

    def __init__(self, release: str, path: Path):
        super().__init__(path, ["torch_xla"])
        self.release = release
        self.version = parse_version(release)
        self.path = path
        self.py = sorted(n for n in self.zip.namelist() if n.startswith("torch_xla/") and n.endswith(".py"))
        self.so_strings: Optional[List[str]] = None
        self._env: Optional[dict] = None

    # --- names: a table name is an import path (longest module prefix + one attribute) ---------
    def definition(self, binding: Binding, depth: int = 0) -> Binding:
        """Follow ``from x import name`` re-exports to the binding that defines the name."""
        if binding.kind == "from" and depth < 8 and binding.source in self.modules:
            if f"{binding.source}.{binding.attr}" not in self.modules:
                target = self.lookup(binding.source, binding.attr)
                if target is not None:
                    return self.definition(target, depth + 1)
        return binding

    def resolve(self, qualname: str) -> Optional[Binding]:
        module, attrs = self.split(qualname)
        if module is None or len(attrs) != 1:
            return None
        return self.lookup(module, attrs[0])

    def resolve_expr(self, module: str, node: ast.AST) -> Optional[Binding]:
        """The binding an expression such as ``runtime.world_size`` names inside ``module``."""
        parts = dotted(node)
        if not parts:
            return None
        head = self.lookup(module, parts[0])
        if head is None:
            qual = parts[0] if parts[0] == "torch_xla" else None
        elif head.kind == "import":
            qual = head.source
        elif head.kind == "from":
            qual = f"{head.source}.{head.attr}"
        else:
            return self.definition(head) if len(parts) == 1 else None
        if qual is None:
            return None
        qual = ".".join([qual] + parts[1:])
        if qual in self.modules:
            return None
        found = self.resolve(qual)
        return self.definition(found) if found is not None else None

    def module_of(self, binding: Binding) -> str:
        return next(m for m, p in self.modules.items() if p == binding.path)

    # --- deprecation markers -----------------------------------------------------------------
    def body_deprecation(self, func: ast.AST, path: str, name: str) -> Optional[str]:
        """A warning in ``func``'s body that deprecates the function itself."""
        for stmt in func.body:  # type: ignore[attr-defined]
            for node in _walk_no_defs(stmt):
                if isinstance(node, ast.Call) and _is_warning(node):
                    text = _message(node)
                    direct = isinstance(stmt, ast.Expr) and stmt.value is node
                    if DEPRECAT.search(text) and (direct or _says(text, name, DEPRECAT)):
                        return f"{self.ev(path, node)} ({_callee(node.func)}: {text[:60]!r})"
        return None

    def deprecation(self, binding: Binding) -> Optional[str]:
        node, path = binding.node, binding.path
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for deco in node.decorator_list:
                if _callee(deco) in DEPRECATION_HELPERS:
                    return f"{self.ev(path, deco)} (@{_callee(deco)})"
            func = node
            if isinstance(node, ast.ClassDef):
                func = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            return self.body_deprecation(func, path, binding.name) if func is not None else None
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            if _callee(node.value) in DEPRECATION_HELPERS:
                return f"{self.ev(path, node)} (alias via {_callee(node.value)}())"
        return None

    def module_deprecation(self, module: str) -> Optional[str]:
        """A module-level warnings.warn (DeprecationWarning/UserWarning) or register_deprecated() call."""
        path = self.modules[module]
        for stmt in toplevel(self.tree(path).body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            calls = [stmt.value] if isinstance(stmt, ast.Expr) else []
            for call in calls:
                if not isinstance(call, ast.Call):
                    continue
                if _callee(call.func) == "register_deprecated":
                    return f"{self.ev(path, call)} (register_deprecated)"
                if _callee(call.func) == "warn":
                    category = call.args[1] if len(call.args) > 1 else next(
                        (k.value for k in call.keywords if k.arg == "category"), None)
                    name = _callee(category) if category is not None else "UserWarning"
                    if name in WARNING_CATEGORIES:
                        return f"{self.ev(path, call)} (import-time {name})"
        return None

    # --- environment variables ---------------------------------------------------------------
    def env_facts(self) -> dict:
        """Reads of environment variables, warning texts, deprecated-name lists and compared strings."""
        if self._env is not None:
            return self._env
        reads: Dict[str, List[str]] = {}
        messages: List[Tuple[str, str]] = []
        deprecated_lists: Dict[str, List[str]] = {}
        compared: Dict[str, List[str]] = {}

        def key(node: ast.AST) -> Optional[str]:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value
            if isinstance(node, ast.Attribute):
                return node.attr
            if isinstance(node, ast.Name):
                return node.id
            return None

        def environ(node: ast.AST) -> bool:
            return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
                isinstance(node, ast.Name) and node.id == "environ")

        for path in self.py:
            for node in ast.walk(self.tree(path)):
                name = None
                if isinstance(node, ast.Call) and node.args and _callee(node.func) in ENV_ACCESSORS:
                    name = key(node.args[0])
                elif isinstance(node, ast.Subscript) and environ(node.value):
                    name = key(node.slice)
                elif (isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn))
                      and environ(node.comparators[0])):
                    name = key(node.left)
                if name and re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                    reads.setdefault(name, []).append(self.ev(path, node))
                if isinstance(node, ast.Call) and _is_warning(node):
                    messages.append((_message(node), self.ev(path, node)))
                elif isinstance(node, ast.Raise) and node.exc is not None:
                    messages.append((_text(node.exc), self.ev(path, node)))
                elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple, ast.Set)):
                    if any(isinstance(t, ast.Name) and DEPRECAT.search(t.id) for t in node.targets):
                        for elt in node.value.elts:
                            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                                deprecated_lists.setdefault(elt.value, []).append(self.ev(path, node))
                elif isinstance(node, ast.Compare):
                    sides = [node.left] + node.comparators
                    folded = any(_callee(side) in ("casefold", "lower", "upper") for side in sides)
                    for side in sides:
                        elts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                        for elt in elts:
                            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                                value = elt.value.upper() if folded else elt.value
                                compared.setdefault(value, []).append(self.ev(path, node))
        self._env = {"reads": reads, "messages": messages, "deprecated_lists": deprecated_lists,
                     "compared": compared}
        return self._env


# --------------------------------------------------------------------------------------------
# Checking rows.

@dataclass
class Report:
    releases: List[str]
    disagreements: List[dict] = field(default_factory=list)
    skipped: List[dict] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    checked_rows: List[str] = field(default_factory=list)
    checks: int = 0
    states: Dict[str, Dict[str, str]] = field(default_factory=dict)  # "row name" -> release -> "state evidence"

    def disagree(self, row: str, release: str, expected: str, found: str, evidence: str, name: str = "") -> None:
        where = f"{name}: {evidence}" if name else evidence
        self.disagreements.append({"row": row, "release": release, "name": name, "expected": expected,
                                   "found": found, "evidence": evidence,
                                   "line": f"{row} {release}: expected {expected}, found {found} ({where})"})

    def skip(self, row: str, aspect: str, reason: str) -> None:
        self.skipped.append({"row": row, "aspect": aspect, "reason": reason})


def find_name(wheel: Wheel, qualname: str, kind: str) -> Finding:
    """State of a function/class/decorator/module name in one release."""
    if kind == "module":
        path = wheel.modules.get(qualname)
        if path is None:
            return Finding(REMOVED, f"no {qualname.replace('.', '/')}.py or /__init__.py", "ImportError")
        marker = wheel.module_deprecation(qualname)
        return Finding(DEPRECATED, marker) if marker else Finding(PRESENT, f"{path}:1")
    module, attrs = wheel.split(qualname)
    if module is None or len(attrs) != 1:
        return Finding(REMOVED, f"no module {qualname.rpartition('.')[0]}", "ImportError")
    binding = wheel.lookup(module, attrs[0])
    if binding is None:
        return Finding(REMOVED, f"{wheel.modules[module]}: no top-level {attrs[0]}", "AttributeError")
    where = wheel.ev(binding.path, binding.node)
    defn = wheel.definition(binding)
    marker = wheel.deprecation(defn)
    if marker:
        return Finding(DEPRECATED, marker if defn is binding else f"{where} -> {marker}")
    marker = inherited_deprecation(wheel, defn)
    if marker:  # not deprecated itself: the warning is the callee's
        return Finding(INDIRECT, marker if defn is binding else f"{where} -> {marker}")
    return Finding(PRESENT, where if defn is binding else f"{where} -> {wheel.ev(defn.path, defn.node)}")


def inherited_deprecation(wheel: Wheel, binding: Binding, depth: int = 3) -> Optional[str]:
    """A deprecated torch_xla function that ``binding``'s function calls outside any ``if``, directly
    or through up to ``depth`` calls: every call then warns (xm.rendezvous -> xla_rendezvous ->
    xla_device on 2.8+). A call under a condition (``if device is None:``) is another row's matter."""
    func = binding.node
    if depth == 0 or not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    module = wheel.module_of(binding)
    for statement in func.body:
        if isinstance(statement, (ast.If, ast.Try, ast.For, ast.While, ast.With)):
            continue
        for node in _walk_no_defs(statement):
            found = _deprecated_callee(wheel, module, node, func, depth - 1)
            if found:
                return f"{wheel.ev(binding.path, node)} calls {found[0]} -> {found[1]}"
    return None


def _deprecated_callee(wheel: Wheel, module: str, node: ast.AST, caller: ast.AST,
                       depth: int = 3) -> Optional[Tuple[str, str]]:
    """(name, marker) when ``node`` calls a torch_xla function that is deprecated or calls one."""
    if not isinstance(node, ast.Call):
        return None
    target = wheel.resolve_expr(module, node.func)
    if target is None:
        return None
    target = wheel.definition(target)
    if target.node is caller:
        return None
    marker = wheel.deprecation(target) or inherited_deprecation(wheel, target, depth)
    return (target.name, marker) if marker else None


def callee_function(wheel: Wheel, qualname: str) -> Tuple[Optional[Binding], Optional[ast.AST], bool, str]:
    """(binding, function node, is_method, evidence) for a callee; follows deprecated() aliases."""
    binding = wheel.resolve(qualname)
    if binding is None:
        return None, None, False, f"no top-level {qualname}"
    defn = wheel.definition(binding)
    trail = wheel.ev(defn.path, defn.node)
    for _ in range(4):
        node = defn.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return defn, node, False, trail
        if isinstance(node, ast.ClassDef):
            init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            return defn, init, True, wheel.ev(defn.path, init or node)
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and _callee(node.value) in DEPRECATION_HELPERS and len(node.value.args) > 1):
            target = wheel.resolve_expr(wheel.module_of(defn), node.value.args[1])
            if target is None:
                break
            defn = target
            trail += f" -> {wheel.ev(defn.path, defn.node)}"
            continue
        break
    return defn, None, False, trail


def called_functions(wheel: Wheel, binding: Binding, func: ast.AST) -> List[Tuple[ast.AST, str]]:
    """The torch_xla functions ``func`` calls directly (one level), with their file paths."""
    out = []
    module = wheel.module_of(binding)
    for node in _walk_no_defs(func):
        if isinstance(node, ast.Call) and node is not func:
            target = wheel.resolve_expr(module, node.func)
            if target is not None and isinstance(target.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((target.node, target.path))
    return out


def find_argument(wheel: Wheel, row: ApiRow, qualname: str) -> Finding:
    change = row.argument
    binding, func, method, where = callee_function(wheel, qualname)
    if binding is None:
        return Finding(REMOVED, where, "AttributeError")
    if func is None:
        raise LookupError(f"{qualname}: cannot find the function definition ({where})")
    positional, kwonly, vararg, kwarg = _params(func, method)
    keyword, position = change.keyword, change.position
    if keyword:
        present = keyword in positional or keyword in kwonly or kwarg
        sig = f"{where} ({'has' if present else 'no'} parameter {keyword})"
    else:
        present = vararg or (position is not None and len(positional) > position)
        sig = f"{where} ({', '.join(positional + (['*'] if kwonly and not vararg else []) + kwonly)})"
    if not present:
        return Finding(REMOVED, sig, "TypeError")
    if change.missing:  # left out: a TypeError without a default, else the default may come from a deprecated call
        args = func.args  # type: ignore[attr-defined]
        ordered = [a.arg for a in args.posonlyargs + args.args]
        if keyword in ordered[:len(ordered) - len(args.defaults)]:
            return Finding(REMOVED, f"{sig}: no default", "TypeError")
        return _default_filled_by_deprecated(wheel, binding, func, keyword) or Finding(PRESENT, sig)
    if keyword:
        bodies = [(func, binding.path)] + called_functions(wheel, binding, func)
        for body, path in bodies:
            for node in _walk_no_defs(body):
                if (isinstance(node, ast.Raise) and _callee(node.exc) == "ValueError"
                        and _says(_text(node.exc), keyword, re.compile("."))):
                    return Finding(REMOVED, f"{wheel.ev(path, node)} (raise ValueError)", "ValueError")
        for body, path in bodies:
            for node in _walk_no_defs(body):
                if isinstance(node, ast.Call) and _is_warning(node) and _says(_message(node), keyword, ARG_WARNING):
                    return Finding(DEPRECATED, f"{wheel.ev(path, node)} ({_message(node)[:60]!r})")
    return Finding(PRESENT, sig)


def _default_filled_by_deprecated(wheel: Wheel, binding: Binding, func: ast.AST, parameter: str) -> Optional[Finding]:
    """``if parameter is None: parameter = deprecated_function()`` (or ``== None``) in ``func``."""
    module = wheel.module_of(binding)
    for node in _walk_no_defs(func):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and isinstance(node.test.left, ast.Name) and node.test.left.id == parameter
                and isinstance(node.test.comparators[0], ast.Constant) and node.test.comparators[0].value is None):
            continue
        for inner in node.body:
            for call in _walk_no_defs(inner):
                found = _deprecated_callee(wheel, module, call, func)
                if found:
                    return Finding(INDIRECT, f"{wheel.ev(binding.path, call)} fills {parameter} by {found[0]} "
                                               f"-> {found[1]}")
    return None


def find_env(wheel: Wheel, row: ApiRow) -> Finding:
    """State of an env_var row: read by the .py sources or named by _XLAC.so, and deprecation texts."""
    env, facts = row.env, wheel.env_facts()
    name, prefix, values = env.name, env.prefix, [v.upper() for v in env.values]
    so = wheel.so_strings or []
    label = f"{name}={values[0]}" if values else name
    backend = ENV_BACKEND.get(label)

    def so_hits(regex: str) -> List[str]:
        return [s for s in so if re.search(regex, s)]

    if backend and so_hits(BACKEND_REMOVED.format(b=backend)):
        return Finding(REMOVED, f"_XLAC.so: {so_hits(BACKEND_REMOVED.format(b=backend))[0]!r}")
    if values:
        accepted = [e for v in values for e in facts["compared"].get(v, ())]
        if not accepted:
            return Finding(REMOVED, f"no .py compares {name} against {'/'.join(values)}")
        said = [e for text, e in facts["messages"] for v in values if _says(text, f"{name}={v}", DEPRECAT)]
    else:
        match = (lambda k: k.startswith(name)) if prefix else (lambda k: k == name)
        py_reads = [e for k, es in facts["reads"].items() if match(k) for e in es]
        if prefix:
            so_keys = so_hits(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"[A-Z0-9_]")
        else:
            so_keys = [s for s in so if s == name or s.endswith(name)]
        if not py_reads and not so_keys:
            return Finding(REMOVED, f"no read of {name}{'*' if prefix else ''} in .py sources or _XLAC.so")
        said = [e for text, e in facts["messages"] if _says(text, name, DEPRECAT)]
        said += [e + " (deprecated-name list)" for e in facts["deprecated_lists"].get(name, ())]
        said += [f"_XLAC.so: {s!r}" for s in so if _says(s, name, DEPRECAT)]
        accepted = py_reads or [f"_XLAC.so: {so_keys[0]!r}"]
    if backend:
        said += [f"_XLAC.so: {s!r}" for s in so_hits(BACKEND_DEPRECATED.format(b=backend))]
    if said:
        return Finding(DEPRECATED, said[0])
    return Finding(PRESENT, accepted[0])


def parse_replacement(text: str) -> Tuple[Optional[str], List[str], Optional[str]]:
    """(torch_xla qualified name or None, keywords it must accept, keyword-only replacement)."""
    text = text.strip()
    if re.fullmatch(r"[A-Za-z_]\w*=", text):
        return None, [], text[:-1]
    head, _, rest = text.partition("(")
    keywords = re.findall(r"([A-Za-z_]\w*)\s*=", rest)
    return (head if head.split(".")[0] == "torch_xla" else None), keywords, None


def replacement_available(wheel: Wheel, row: ApiRow) -> Finding:
    qual, keywords, keyword_only = parse_replacement(row.replacement or "")
    if keyword_only:
        for name in row.names:
            binding, func, method, where = callee_function(wheel, name)
            if func is None:
                return Finding(REMOVED, where)
            positional, kwonly, _, kwarg = _params(func, method)
            if keyword_only not in positional + kwonly and not kwarg:
                return Finding(REMOVED, f"{where}: no parameter {keyword_only}")
            return Finding(PRESENT, where)
    assert qual is not None
    if qual in wheel.modules:
        return Finding(PRESENT, wheel.modules[qual])
    found = find_name(wheel, qual, "function")
    if found.state == REMOVED or not keywords:
        return found
    binding, func, method, where = callee_function(wheel, qual)
    if func is None:
        return Finding(REMOVED, where)
    positional, kwonly, _, kwarg = _params(func, method)
    missing = [k for k in keywords if k not in positional + kwonly and not kwarg]
    return Finding(REMOVED, f"{where}: no parameter {', '.join(missing)}") if missing else Finding(PRESENT, where)


def compare(report: Report, row: ApiRow, name: str, findings: Dict[str, Finding], wheels: List[Wheel]) -> None:
    """Report where the found states differ from the states the table implies."""
    present_in = [w.version for w in wheels if findings[w.release].state != REMOVED]
    first = min(present_in) if present_in else None
    label = name if len(row.names) > 1 else ""
    report.states[f"{row.id} {name}"] = {r: f"{f.state} {f.evidence}" for r, f in findings.items()}
    for wheel in wheels:
        found, expected = findings[wheel.release], implied_state(row, wheel.version)
        report.checks += 1
        if found.state == expected:
            if (expected == REMOVED and row.removed_in and row.effect and found.effect and name == row.names[0]
                    and row.kind != "env_var"):
                earlier = [w for w in wheels if w.version < wheel.version and w.version >= row.removed_in]
                if not earlier and found.effect != row.effect:  # the first release the removal shows in
                    report.disagree(row.id, wheel.release, f"effect {row.effect}", f"effect {found.effect}",
                                    found.evidence, label)
            continue
        if expected == PRESENT and found.state == REMOVED and first is not None and wheel.version < first:
            report.notes.append(f"{row.id} {wheel.release}: {name} not yet in this release (first: {first})")
            continue
        report.disagree(row.id, wheel.release, expected, found.state, found.evidence, label)


def check_transitions(report: Report, row: ApiRow, wheels: List[Wheel]) -> None:
    oldest = min(w.version for w in wheels)
    why = "2.0 is not on PyPI" if oldest <= parse_version(RELEASES[0]) else "not in --releases"
    for aspect, when in (("deprecated_in", row.deprecated_in), ("removed_in", row.removed_in)):
        if when is not None and when <= oldest:
            report.skip(row.id, aspect, f"{when} is not after the oldest release checked, so that the "
                                        f"release before it differed is unverifiable ({why})")


def check_replacement(report: Report, row: ApiRow, wheels: List[Wheel]) -> None:
    if not row.replacement:
        return
    qual, _, keyword_only = parse_replacement(row.replacement)
    if qual is None and keyword_only is None:
        report.skip(row.id, "replacement", f"replacement {row.replacement} is not a torch_xla name")
        return
    for wheel in wheels:
        found = replacement_available(wheel, row)
        report.checks += 1
        if row.replacement_since is not None:
            want = PRESENT if wheel.version >= row.replacement_since else REMOVED
        elif implied_state(row, wheel.version) != PRESENT:
            want = PRESENT
        else:
            continue
        if found.state == REMOVED and want == PRESENT:
            report.disagree(row.id, wheel.release, f"replacement {row.replacement} available",
                            "it missing", found.evidence)
        elif found.state != REMOVED and want == REMOVED:
            report.disagree(row.id, wheel.release,
                            f"replacement {row.replacement} missing (replacement_since {row.replacement_since})",
                            "it available", found.evidence)


def check(rows: List[ApiRow], wheels: List[Wheel]) -> Report:
    report = Report(releases=[w.release for w in wheels])
    for row in rows:
        report.checked_rows.append(row.id)
        check_transitions(report, row, wheels)
        if row.kind in ("function", "class", "decorator", "module"):
            for name in row.names:
                compare(report, row, name, {w.release: find_name(w, name, row.kind) for w in wheels}, wheels)
        elif row.kind == "argument":
            for name in row.names:
                compare(report, row, name, {w.release: find_argument(w, row, name) for w in wheels}, wheels)
            if row.argument.allowed:
                report.skip(row.id, "allowed", f"that {list(row.argument.allowed)} stay accepted needs control-flow "
                                               "analysis of the callee; only the warning/raise is checked")
        elif row.kind == "env_var":
            if any(w.so_strings is None for w in wheels):
                report.skip(row.id, "row", "environment variables are read by the compiled library too; "
                                           "its strings were not scanned (--no-so)")
                continue
            label = row.env.name + (f"={'/'.join(row.env.values)}" if row.env.values else "")
            compare(report, row, label, {w.release: find_env(w, row) for w in wheels}, wheels)
            if row.env.values:
                report.skip(row.id, "compiled-value", "whether _XLAC.so accepts the value is a string comparison in "
                                                      "compiled code; only the Python-side handling is checked")
        else:
            report.skip(row.id, "row", f"unknown kind {row.kind!r}")
            continue
        check_replacement(report, row, wheels)
    return report


# --------------------------------------------------------------------------------------------

def so_tokens(rows: List[ApiRow]) -> List[str]:
    tokens = {r.env.name for r in rows if r.kind == "env_var"}
    tokens.update(f"XLA:{b}" for b in ENV_BACKEND.values())
    return sorted(tokens)


def run(releases: Sequence[str], cache: Path, scan: bool = True, table: Path = TABLE) -> Report:
    rows = load_table(table)
    paths = [fetch_wheel(r, cache) for r in releases]
    wheels = [Wheel(r, p) for r, p in zip(releases, paths)]
    if scan:
        tokens = so_tokens(rows)
        workers = max(1, min(len(wheels), os.cpu_count() or 1))
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            for wheel, strings in zip(wheels, pool.map(scan_so, [str(p) for p in paths], [tokens] * len(paths))):
                wheel.so_strings = strings
    return check(rows, wheels)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None,
                        help="wheel cache (default: $XLA_WHEEL_CACHE or ~/.cache/flake8-xla/wheels)")
    parser.add_argument("--releases", default=",".join(RELEASES), help="comma-separated torch_xla releases")
    parser.add_argument("--table", type=Path, default=TABLE, help="the lifecycle table to check")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-so", action="store_true",
                        help="do not scan the compiled library (faster; the env_var rows are then skipped)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also print every row's state per release and the notes (APIs not yet added)")
    args = parser.parse_args(argv)
    releases = sorted((r.strip() for r in args.releases.split(",") if r.strip()), key=parse_version)
    try:
        report = run(releases, args.cache or default_cache(), scan=not args.no_so, table=args.table)
    except (RuntimeError, LookupError, OSError, zipfile.BadZipFile) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.__dict__, indent=1))
    else:
        print(f"{len(report.checked_rows)} rows x {len(releases)} releases ({', '.join(releases)}): "
              f"{report.checks} checks, {len(report.disagreements)} disagreements, {len(report.skipped)} skipped")
        for item in report.disagreements:
            print(item["line"])
        if report.skipped:
            print("skipped:")
            for item in report.skipped:
                print(f"  {item['row']} [{item['aspect']}]: {item['reason']}")
        if args.verbose:
            print("states:")
            for key, states in report.states.items():
                print(f"  {key}")
                for release, state in states.items():
                    print(f"    {release}: {state}")
            print("notes:")
            for note in report.notes:
                print(f"  {note}")
    return 1 if report.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
