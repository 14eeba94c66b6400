#!/usr/bin/env python3
"""Check rules/torchtpu_migration.yaml against the torch-tpu 0.2.0 wheel and torch 2.13.0, statically.

The torch-tpu wheel and the torch 2.13.0 CPU wheel are fetched with ``pip download`` (never
installed, never imported) into a cache directory and read straight from the zip:

- ``torch_tpu/_internal/public_api.py``: the ``_PUBLIC_MODULES`` table, evaluated with ``ast``, gives
  every public name ``torch.tpu[.sub].name`` and its target ``pkg.mod:Qual.name``;
- each target's lifecycle stage, from its decorators in the target module (``@experimental``,
  ``@stable``, ``@deprecated``, ``@internal_or_experimental(internal_when=..., prefer=...)``, resolved
  to ``torch_tpu._internal.utils.annotations`` through the module's imports and aliases) and from the
  ``__tt_api_stages__`` maps (the public module's, and a class's for attributes the class does not
  define); an attribute the class defines without a stage decorator is stable (annotations.py);
- the environment-variable-like strings of every ``.so`` and ``.py`` file in the wheel: a plain byte
  search for whole upper-case tokens, so "read" means "the name occurs as a string", not a traced read;
- the wheel's METADATA (version, Requires-Dist torch) and the torch versions of its C++ glue;
- torch 2.13.0's Python sources and ``torch/_C/__init__.pyi``, to resolve the torch names the table
  recommends (module file, or a binding in the module: def, class, assignment, import, star import,
  ``__all__``).

Then every row of the table is checked (see ``check``); every failure prints as
``check row: expected X, found Y (evidence)``.

    python tools/check_torchtpu.py [--cache DIR] [--table FILE] [--json] [--write-internal-apis]

``--write-internal-apis`` regenerates rules/torchtpu_internal_apis.json (the wheel's internal
``torch.tpu`` names with their ``prefer`` replacement and ``internal_when`` condition).

Exit status: 0 when the table agrees with the wheels, 1 on failures, 2 on errors (a failed download
among them). The cache is $XLA_WHEEL_CACHE, else /work/cache/wheels if it exists, else
~/.cache/flake8-xla/wheels; the facts read from the wheels are cached there too, keyed by the wheels'
sha256 and the hash of this script and tools/wheel_source.py, so a second run takes about a second.
Dependencies: PyYAML (the table is read with yaml.safe_load, not through flake8_xla's loader) and
tools/wheel_source.py (the static reader of the wheels' Python sources).
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/wheel_source.py, when loaded by path
from wheel_source import Binding, WheelSource, dotted  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "rules" / "torchtpu_migration.yaml"
INTERNAL_APIS = ROOT / "rules" / "torchtpu_internal_apis.json"
# every public torch.tpu name: XLA511 tells Google's torch.tpu from another package's (sophgo/torch-tpu)
PUBLIC_API = ROOT / "rules" / "torchtpu_public_api.json"

TPU_PROJECT, TPU_VERSION = "torch-tpu", "0.2.0"
TORCH_VERSION = "2.13.0"  # the lowest torch the 0.2.0 glue supports (2.11-2.15) that this machine's pip has
# Pinned so that every machine caches the same file (the sha256 keys the facts cache).
TPU_PLATFORM = ("--python-version", "3.11", "--platform", "manylinux_2_31_x86_64")
TORCH_PLATFORM = ("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64")

ANNOTATIONS = "torch_tpu._internal.utils.annotations"
STAGE_DECORATORS = {"experimental", "stable", "deprecated", "internal_or_experimental"}
STAGES = ("stable", "experimental", "deprecated", "internal")

# shared/research/torch_tpu.md section 2: the stages of the 71 public exports on torch >= 2.13.
CATALOG = {"total": 71, "stable": 6, "deprecated": 1, "internal": 10, "experimental": 54}
CATALOG_TORCH = "2.13"

# Torch names a row mentions for a newer torch, which must not be in torch_names: name -> row id.
ABSENT_IN_TORCH = {"torch.accelerator.random.get_rng_state": "get-rng-state"}

TOKEN = re.compile(rb"(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]{2,}(?![A-Za-z0-9_])")
TPU_MENTION = re.compile(r"(?<![\w.])torch\.tpu(?:\.[A-Za-z_]\w*)*")
TORCH_MENTION = re.compile(r"(?<![\w.])torch(?:\.[A-Za-z_]\w*)+")


# --------------------------------------------------------------------------------------------
# Fetching the wheels.

def default_cache() -> Path:
    env = os.environ.get("XLA_WHEEL_CACHE")
    if env:
        return Path(env)
    if Path("/work/cache/wheels").is_dir():
        return Path("/work/cache/wheels")
    return Path.home() / ".cache" / "flake8-xla" / "wheels"


def _cached(pattern: str, cache: Path) -> Optional[Path]:
    found = sorted(cache.glob(pattern))
    return found[0] if found else None


def fetch(project: str, version: str, cache: Path, platform: Sequence[str]) -> Path:
    """The cached wheel of ``project==version``, downloaded first (without dependencies) if missing."""
    pattern = f"{project.replace('-', '_')}-{version}-*.whl"
    alt = f"{project.replace('-', '_')}-{version}+*.whl"  # a local build such as torch-2.13.0+cpu
    wheel = _cached(pattern, cache) or _cached(alt, cache)
    if wheel is not None:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    staging = cache / f".download-{os.getpid()}"  # moved in whole, so a concurrent run never reads half a wheel
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *platform,
           f"{project}=={version}", "-d", str(staging)]
    print(f"downloading {project} {version} into {cache} ...", file=sys.stderr)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        got = (_cached(pattern, staging) or _cached(alt, staging)) if staging.is_dir() else None
        if proc.returncode != 0 or got is None:
            raise RuntimeError(f"pip download {project}=={version} into {cache} failed (status {proc.returncode}); "
                               f"the check needs this wheel:\n{' '.join(cmd)}\n{proc.stderr.strip()}")
        os.replace(got, cache / got.name)
    finally:
        if staging.is_dir():
            for leftover in staging.iterdir():
                leftover.unlink()
            staging.rmdir()
    return cache / got.name


def sha256(path: Path) -> str:
    """The file's sha256, remembered beside it by size and mtime (hashing 190 MB takes a while)."""
    st = path.stat()
    memo = path.with_name(path.name + ".sha256")
    stamp = f"{st.st_size} {st.st_mtime_ns}"
    try:
        got_stamp, digest = memo.read_text().split("\n")[:2]
        if got_stamp == stamp:
            return digest
    except (OSError, ValueError):
        pass
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    try:
        memo.write_text(f"{stamp}\n{h.hexdigest()}\n")
    except OSError:
        pass
    return h.hexdigest()


def tool_hash() -> str:
    """The hash of the code that reads the wheels: this script and tools/wheel_source.py."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(Path(sys.modules[WheelSource.__module__].__file__).read_bytes())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# Names as Python finds them, attribute by attribute (over tools/wheel_source.py's bindings).

class Source(WheelSource):
    """The Python modules of the packages ``tops`` inside a wheel, with dotted names resolved."""

    def __init__(self, wheel: Path, tops: Sequence[str]):
        super().__init__(wheel, tops)
        self._active: set = set()

    def definition(self, binding: Binding, depth: int = 0) -> Binding:
        """Follow ``from x import name`` re-exports and ``a = b.c`` aliases to the defining binding."""
        if depth > 12 or id(binding.node) in self._active:
            return binding
        self._active.add(id(binding.node))
        try:
            if binding.kind == "import" and binding.source in self.modules:
                return self.module_binding(binding.source)
            if binding.kind == "from" and binding.source in self.modules:
                sub = f"{binding.source}.{binding.attr}"
                if sub in self.modules and binding.source == self.package_of(binding.module):
                    # a package importing its own submodule: at that point the name is the submodule
                    return Binding(binding.name, "module", None, binding.source, self.modules[sub], source=sub)
                target = self.lookup(binding.source, binding.attr)
                if target is not None:
                    return self.definition(target, depth + 1)
            if binding.kind == "assign" and isinstance(binding.node.value, (ast.Name, ast.Attribute)):
                target = self.resolve_expr(binding.module, binding.node.value)
                if target is not None and target.node is not binding.node:
                    return self.definition(target, depth + 1)
            return binding
        finally:
            self._active.discard(id(binding.node))

    def step(self, binding: Optional[Binding], attr: str) -> Optional[Binding]:
        """The attribute ``attr`` of what ``binding`` names: a module's binding or submodule, a class member."""
        if binding is None:
            return None
        binding = self.definition(binding)
        if binding.kind == "module":
            return self.lookup(binding.source, attr)
        if binding.kind == "class":
            return self.member(binding, attr)
        return None

    def resolve_expr(self, module: str, node: ast.AST) -> Optional[Binding]:
        """The binding an expression such as ``annotations.experimental`` names inside ``module``."""
        parts = dotted(node)
        if not parts:
            return None
        binding = self.lookup(module, parts[0])
        if binding is None and parts[0] in self.modules:
            binding = self.module_binding(parts[0])
        for attr in parts[1:]:
            binding = self.step(binding, attr)
        return self.definition(binding) if binding is not None else None

    def resolve(self, qualname: str) -> Optional[Binding]:
        """The binding a dotted name refers to, attribute by attribute as Python finds it: a package's own
        binding first (``precision = _precision.precision`` hides the submodule ``precision``), then a
        submodule, then class members."""
        parts = qualname.split(".")
        if parts[0] not in self.modules:
            return None
        binding: Optional[Binding] = self.module_binding(parts[0])
        for attr in parts[1:]:
            binding = self.step(binding, attr)
        return self.definition(binding) if binding is not None else None

    def refers_to(self, module: str, node: ast.AST) -> str:
        """``module.name`` of the def or class an expression resolves to (else its dotted text)."""
        found = self.resolve_expr(module, node)
        if found is not None and found.kind in ("def", "class"):
            return f"{found.module}.{found.name}"
        return ".".join(dotted(node) or [])

    def member(self, cls: Binding, attr: str, depth: int = 0) -> Optional[Binding]:
        """A class attribute defined in the class body or in a base class (resolved statically)."""
        node = cls.node
        names = self.bindings(cls.module, node.body, scope=f"{node.name}@{node.lineno}")[0]
        if attr in names:
            return names[attr]
        if depth < 8:
            for base in node.bases:
                found = self.resolve_expr(cls.module, base)
                if found is not None and found.kind == "class":
                    hit = self.member(self.definition(found), attr, depth + 1)
                    if hit is not None:
                        return hit
        return None


# --------------------------------------------------------------------------------------------
# torch-tpu: the public API table and the lifecycle stages.

class _Eval:
    """Evaluates the constant expressions of public_api.py: strings, f-strings, dicts, ModuleSpec(...),
    Property(...) and module-level helpers whose body is one ``return``."""

    def __init__(self, src: Source, module: str):
        self.src, self.module = src, module
        self.names = src.bindings(module)[0]

    def __call__(self, node: ast.AST, env: Optional[Dict[str, Any]] = None) -> Any:
        env = env or {}
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(str(self(v.value if isinstance(v, ast.FormattedValue) else v, env)) for v in node.values)
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            binding = self.names.get(node.id)
            if binding is not None and binding.kind == "assign":
                return self(binding.node.value, env)
        if isinstance(node, ast.Dict):
            return {self(k, env): (self(v, env), v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            kwargs = {k.arg: self(k.value, env) for k in node.keywords}
            args = [self(a, env) for a in node.args]
            if node.func.id == "Property":
                return {"property": (args or [kwargs.get("target")])[0]}
            if node.func.id == "ModuleSpec":
                return kwargs
            binding = self.names.get(node.func.id)
            if binding is not None and binding.kind == "def":
                func = binding.node
                body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if len(body) == 1 and isinstance(body[0], ast.Return):
                    params = [a.arg for a in func.args.args]
                    return self(body[0].value, {**env, **dict(zip(params, args)), **kwargs})
        raise ValueError(f"{self.src.ev(self.src.modules[self.module], node)}: cannot evaluate "
                         f"{ast.unparse(node)!r} statically")


def public_api(src: Source) -> Tuple[Dict[str, dict], Dict[str, dict]]:
    """(exports, modules) of ``_PUBLIC_MODULES``: public name -> {target, kind, line}; module -> spec."""
    module = "torch_tpu._internal.public_api"
    binding = src.lookup(module, "_PUBLIC_MODULES")
    if binding is None or binding.kind != "assign":
        raise LookupError(f"{src.modules.get(module, module)}: no _PUBLIC_MODULES table")
    table = _Eval(src, module)(binding.node.value)
    path = src.modules[module]
    exports: Dict[str, dict] = {}
    modules: Dict[str, dict] = {}
    for mod_name, (spec, spec_node) in table.items():
        export_nodes = next((k.value for k in spec_node.keywords if k.arg == "exports"), None)
        key_lines = {k.value: k.lineno for k in getattr(export_nodes, "keys", []) if isinstance(k, ast.Constant)}
        modules[mod_name] = {"main": spec.get("main"), "stages": spec.get("stages"),
                             "private_fallback": spec.get("private_fallback"),
                             "line": f"{path}:{spec_node.lineno}"}
        for name, (value, _node) in (spec.get("exports") or {}).items():
            kind, target = ("property", value["property"]) if isinstance(value, dict) else ("attribute", value)
            exports[f"{mod_name}.{name}"] = {"module": mod_name, "name": name, "target": target, "kind": kind,
                                             "line": f"{path}:{key_lines.get(name, spec_node.lineno)}"}
    return exports, modules


def _kw(call: ast.AST, name: str, position: Optional[int] = None) -> Optional[ast.AST]:
    if not isinstance(call, ast.Call):
        return None
    found = next((k.value for k in call.keywords if k.arg == name), None)
    if found is None and position is not None and len(call.args) > position:
        return call.args[position]
    return found


def _const(node: Optional[ast.AST]) -> Optional[str]:
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return value if isinstance(value, str) else repr(value)


def _condition(src: Source, module: str, node: Optional[ast.AST]) -> Tuple[str, Optional[str]]:
    """(text, torch lower bound) of an ``internal_when`` such as ``get_torch_version() >= (2, 11)``."""
    if node is None:
        return "never", None
    if isinstance(node, ast.Constant):
        return ("always", "0") if node.value else ("never", None)
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.GtE)
            and isinstance(node.left, ast.Call) and not node.left.args
            and src.refers_to(module, node.left.func) == f"{ANNOTATIONS}.get_torch_version"):
        try:
            bound = ast.literal_eval(node.comparators[0])
        except ValueError:
            bound = None
        if isinstance(bound, tuple) and all(isinstance(b, int) for b in bound):
            text = ".".join(map(str, bound))
            return f"torch>={text}", text
    return ast.unparse(node), None


def decorator_stage(src: Source, binding: Binding) -> Optional[dict]:
    """The stage the stage decorators of a def/class give, or None when it has none."""
    found: List[dict] = []
    forbidden = False
    for node in binding.nodes or [binding.node]:
        for deco in getattr(node, "decorator_list", []):
            qual = src.refers_to(binding.module, deco.func if isinstance(deco, ast.Call) else deco)
            if qual == f"{ANNOTATIONS}.forbid_in_torch_compile":
                forbidden = True
            if not (qual.startswith(ANNOTATIONS + ".") and qual.rpartition(".")[2] in STAGE_DECORATORS):
                continue
            kind = qual.rpartition(".")[2]
            info = {"stage": kind, "evidence": src.ev(binding.path, deco), "via": "decorator"}
            if kind == "experimental":
                info["reason"] = _const(_kw(deco, "reason", 0))
            elif kind == "deprecated":
                info["deprecated_version"] = _const(_kw(deco, "version", 0))
                info["reason"] = _const(_kw(deco, "reason", 1))
            elif kind == "internal_or_experimental":
                text, bound = _condition(src, binding.module, _kw(deco, "internal_when"))
                info.update(stage="internal", internal_when=text, internal_from_torch=bound,
                            prefer=_const(_kw(deco, "prefer")), strict=_const(_kw(deco, "strict")) or "True")
                if bound is None:
                    info["stage"] = "experimental" if text == "never" else "internal"
            found.append(info)
    if not found:
        return None
    stages = {f["stage"] for f in found}
    if len(stages) > 1:
        raise LookupError(f"{binding.name}: conflicting stage decorators {sorted(stages)} at "
                          f"{', '.join(f['evidence'] for f in found)}")
    found[0]["forbidden_in_compile"] = forbidden
    return found[0]


def stages_map(src: Source, module: str, node: ast.AST) -> Dict[str, dict]:
    """A ``__tt_api_stages__`` dict literal: name -> {stage, reason, version, evidence, value node}."""
    if isinstance(node, ast.Name):  # a class body's ``__tt_api_stages__ = __tt_api_stages__``
        binding = src.lookup(module, node.id)
        node = binding.node.value if binding is not None and binding.kind == "assign" else node
    out: Dict[str, dict] = {}
    if not isinstance(node, ast.Dict):
        return out
    path = src.modules[module]
    for key, value in zip(node.keys, node.values):
        stage = _kw(value, "stage", 0)
        if not isinstance(key, ast.Constant) or not isinstance(stage, ast.Attribute):
            continue
        out[key.value] = {"stage": stage.attr.lower(), "reason": _const(_kw(value, "reason", 1)),
                          "deprecated_version": _const(_kw(value, "version", 3)),
                          "evidence": src.ev(path, key), "via": "stages-map", "_value": _kw(value, "value", 2),
                          "_module": module}
    return out


def class_stages_map(src: Source, cls: Binding, depth: int = 0) -> Dict[str, dict]:
    names = src.bindings(cls.module, cls.node.body, scope=f"{cls.node.name}@{cls.node.lineno}")[0]
    if "__tt_api_stages__" in names and names["__tt_api_stages__"].kind == "assign":
        return stages_map(src, cls.module, names["__tt_api_stages__"].node.value)
    if depth < 8:
        for base in cls.node.bases:
            found = src.resolve_expr(cls.module, base)
            if found is not None and found.kind == "class":
                got = class_stages_map(src, src.definition(found), depth + 1)
                if got:
                    return got
    return {}


def target_stage(src: Source, target: str) -> dict:
    """The lifecycle stage of a public_api target ``pkg.mod:Qual.name``."""
    module, _, qual = target.partition(":")
    if module not in src.modules:
        raise LookupError(f"target {target}: no module {module} in the wheel")
    parts = qual.split(".")
    binding = src.lookup(module, parts[0])
    owner: Optional[Binding] = None
    for attr in parts[1:]:
        if binding is None:
            break
        binding = src.definition(binding)
        if binding.kind != "class":
            raise LookupError(f"target {target}: {binding.name} is a {binding.kind}, not a class")
        owner = binding
        found = src.member(binding, attr)
        if found is None:  # not defined on the class: the class's __tt_api_stages__ map serves it
            entry = class_stages_map(src, binding).get(attr)
            if entry is None:
                raise LookupError(f"target {target}: {binding.name} has no attribute {attr} "
                                  f"({src.ev(binding.path, binding.node)})")
            info = {k: v for k, v in entry.items() if not k.startswith("_")}
            value = entry.get("_value")
            if value is not None and isinstance(value, (ast.Name, ast.Attribute)):
                resolved = src.resolve_expr(entry["_module"], value)
                own = decorator_stage(src, resolved) if resolved is not None and resolved.kind in ("def", "class") \
                    else None
                if own is not None and own["stage"] != info["stage"]:
                    info["conflict"] = f"its value is {own['stage']} ({own['evidence']})"
            return info
        binding = found
    if binding is None:
        raise LookupError(f"target {target}: {parts[0]} not bound in {src.modules[module]}")
    defn = src.definition(binding)
    info = decorator_stage(src, defn) if defn.kind in ("def", "class") else None
    if info is None:
        where = src.ev(defn.path, defn.node)
        if owner is not None:  # annotations.py: an unannotated attribute a class defines is stable
            return {"stage": "stable", "via": "unannotated", "evidence": where}
        return {"stage": "unannotated", "via": "unannotated", "evidence": where}
    if defn is not binding:
        info["evidence"] = f"{src.ev(binding.path, binding.node)} -> {info['evidence']}"
    return info


def stage_on(info: dict, torch: str) -> str:
    """The stage on a given torch version (internal_or_experimental depends on it)."""
    if info["stage"] == "internal" and info.get("internal_from_torch"):
        return "internal" if _vt(torch) >= _vt(info["internal_from_torch"]) else "experimental"
    return info["stage"]


def _vt(version: str) -> Tuple[int, ...]:
    parts = [int(p) for p in re.findall(r"\d+", version.split("+")[0])]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


# --------------------------------------------------------------------------------------------
# torch-tpu: strings, metadata, glue.

def _scan_tokens(wheel: str, members: Sequence[str]) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in members:
            for token in set(TOKEN.findall(zf.read(name))):
                found.setdefault(token.decode("ascii"), []).append(name)
    return found


def scan_tokens(wheel: Path) -> Dict[str, List[str]]:
    """Every whole upper-case token (``[A-Z][A-Z0-9_]{2,}``) of the wheel's .so and .py files -> files."""
    with zipfile.ZipFile(wheel) as zf:
        infos = [i for i in zf.infolist() if i.filename.endswith(".py") or i.filename.endswith(".so")
                 or ".so." in i.filename]
    infos.sort(key=lambda i: -i.file_size)
    workers = max(1, min(4, os.cpu_count() or 1))
    shares = [[i.filename for i in infos[k::workers]] for k in range(workers)]
    merged: Dict[str, List[str]] = {}
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        for part in pool.map(_scan_tokens, [str(wheel)] * workers, shares):
            for token, files in part.items():
                merged.setdefault(token, []).extend(files)
    return {t: sorted(f) for t, f in sorted(merged.items())}


def metadata(zf: zipfile.ZipFile) -> dict:
    name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(zf.read(name).decode("utf-8"), headersonly=True)
    requires = msg.get_all("Requires-Dist") or []
    torch_req = next((r for r in requires if re.match(r"torch\s*[<>=!~(;]", r) or r.strip() == "torch"), None)
    return {"file": name, "name": msg["Name"], "version": msg["Version"], "requires_torch_line": torch_req,
            "requires_torch": re.sub(r"^torch\s*", "", torch_req or "").split(";")[0].strip("() ")}


def glue_versions(zf: zipfile.ZipFile) -> List[str]:
    found = {m.group(1).replace("_", ".") for n in zf.namelist()
             for m in [re.search(r"_(\d+_\d+_\d+)(?:_common)?\.so$", n)] if m}
    return sorted(found, key=_vt)


def tpu_facts(wheel: Path) -> dict:
    """Everything the checks need from the torch-tpu wheel (JSON-serializable, cached)."""
    src = Source(wheel, ["torch_tpu"])
    exports, modules = public_api(src)
    stage_maps = {}
    for mod_name, spec in modules.items():
        if spec["stages"]:
            mod, _, attr = spec["stages"].partition(":")
            b = src.lookup(mod, attr)
            stage_maps[mod_name] = stages_map(src, mod, b.node.value) if b is not None and b.kind == "assign" else {}
    for public, exp in exports.items():
        info = target_stage(src, exp["target"])
        entry = stage_maps.get(exp["module"], {}).get(exp["name"])
        if entry is not None:  # the public module's stages map decides, as _PublicApiModule does
            mapped = {k: v for k, v in entry.items() if not k.startswith("_")}
            if mapped["stage"] != info["stage"]:
                mapped["conflict"] = f"its target is {info['stage']} ({info['evidence']})"
            info = mapped
        exp.update(info)
    with zipfile.ZipFile(wheel) as zf:
        meta, glue = metadata(zf), glue_versions(zf)
    return {"wheel": wheel.name, "sha256": sha256(wheel), "metadata": meta, "glue_torch_versions": glue,
            "modules": modules, "exports": exports, "tokens": scan_tokens(wheel)}


# --------------------------------------------------------------------------------------------
# torch: resolving names.

class TorchNames:
    """Static resolution of dotted torch names in the torch wheel, memoized (and cached on disk)."""

    def __init__(self, wheel: Path, memo: Optional[Dict[str, dict]] = None):
        self.wheel = wheel
        self.memo: Dict[str, dict] = dict(memo or {})
        self._src: Optional[Source] = None
        self.dirty = False

    @property
    def src(self) -> Source:
        if self._src is None:
            self._src = Source(self.wheel, ["torch"])
        return self._src

    def resolve(self, name: str) -> dict:
        if name not in self.memo:
            self.memo[name] = self._resolve(name)
            self.dirty = True
        return self.memo[name]

    def _resolve(self, name: str) -> dict:
        """Attribute by attribute, as Python finds it (a package's binding, else its submodule)."""
        src = self.src
        parts = name.split(".")
        if parts[0] != "torch" or "torch" not in src.modules:
            return {"found": False, "evidence": f"not a torch name: {name}"}
        binding: Optional[Binding] = src.module_binding("torch")
        trail: List[str] = []
        for i, attr in enumerate(parts[1:], 1):
            owner = src.definition(binding)
            binding = src.step(owner, attr)
            if binding is None:
                exported = src.bindings(owner.source)[2] or [] if owner.kind == "module" else []
                if attr in exported and i == len(parts) - 1:  # bound at run time, listed in __all__
                    trail.append(f"{src.modules[owner.source]} (in __all__)")
                    return {"found": True, "kind": "__all__", "evidence": " -> ".join(trail)}
                where = src.modules[owner.source] if owner.kind == "module" else src.ev(owner.path, owner.node)
                return {"found": False, "evidence": f"{where}: no {attr}"}
            trail.append(src.modules[binding.source] if binding.kind == "module" and binding.node is None
                         else src.ev(binding.path, binding.node))
        defn = src.definition(binding)
        trail.append(src.modules[defn.source] if defn.kind == "module" and defn.node is None
                     else src.ev(defn.path, defn.node))
        return {"found": True, "kind": defn.kind, "evidence": " -> ".join(dict.fromkeys(trail))}


# --------------------------------------------------------------------------------------------
# The checks.

@dataclass
class Report:
    package: str = TPU_PROJECT
    version: str = TPU_VERSION
    torch: str = TORCH_VERSION
    checks: int = 0
    failures: List[dict] = field(default_factory=list)
    skipped: List[dict] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    checked_rows: List[str] = field(default_factory=list)
    counts: Dict[str, Dict[str, int]] = field(default_factory=dict)
    catalog: Dict[str, Any] = field(default_factory=dict)
    torch_names: Dict[str, dict] = field(default_factory=dict)
    wheels: Dict[str, dict] = field(default_factory=dict)

    def check(self, ok: bool, check: str, row: str, name: str, expected: str, found: str, evidence: str) -> bool:
        self.checks += 1
        if not ok:
            self.failures.append({"check": check, "row": row, "name": name, "expected": expected, "found": found,
                                  "evidence": evidence,
                                  "line": f"{check} {row}: {name + ': ' if name else ''}expected {expected}, "
                                          f"found {found} ({evidence})"})
        return ok

    def skip(self, row: str, aspect: str, reason: str) -> None:
        self.skipped.append({"row": row, "aspect": aspect, "reason": reason})


def _range(spec: str) -> List[Tuple[str, Tuple[int, ...]]]:
    out = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(===|==|!=|~=|<=|>=|<|>)\s*([0-9][0-9A-Za-z.+*]*)\s*", part)
        if not m:
            raise ValueError(f"cannot read the version range {spec!r}")
        out.append((m.group(1), _vt(m.group(2))))
    return sorted(out)


def table_torch_versions(requires: str, glue: Sequence[str]) -> List[str]:
    """The glue torch versions (minor releases) inside the table's torch range."""
    def ok(v: Tuple[int, ...]) -> bool:
        for op, bound in _range(requires):
            if not {"<=": v <= bound, ">=": v >= bound, "<": v < bound, ">": v > bound,
                    "==": v == bound, "!=": v != bound}.get(op, True):
                return False
        return True
    return [g for g in glue if ok(_vt(g))]


def _texts(row: dict) -> List[Tuple[str, str]]:
    fix = row.get("fix") or {}
    texts = [("becomes", row.get("becomes") or ""), ("why", row.get("why") or "")]
    if isinstance(fix.get("to"), str):
        texts.append(("fix.to", fix["to"]))
    return texts


def _after(text: str, end: int) -> str:
    """The text after a name and its own call arguments (balanced parentheses)."""
    rest = text[end:]
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return rest[i + 1:]
    return rest


def internal_apis(facts: dict) -> Dict[str, dict]:
    """The wheel's internal public names (on some torch the glue supports) -> prefer, internal_when."""
    return {name: {"prefer": exp.get("prefer"), "internal_when": exp.get("internal_when")}
            for name, exp in sorted(facts["exports"].items()) if exp["stage"] == "internal"}


def check(table: dict, facts: dict, torch: TorchNames, internal_apis_file: Optional[Path] = INTERNAL_APIS) -> Report:
    """Check the table (the YAML's data) against the facts; ``internal_apis_file`` against a regeneration."""
    report = Report()
    exports, modules, tokens = facts["exports"], facts["modules"], facts["tokens"]
    meta = facts["metadata"]
    requires = table.get("requires_torch", "")
    report.wheels = {"torch-tpu": {"file": facts["wheel"], "sha256": facts["sha256"], "metadata": meta,
                                   "glue_torch_versions": facts["glue_torch_versions"]},
                     "torch": {"file": torch.wheel.name}}

    # --- metadata -------------------------------------------------------------------------------
    where = f"{facts['wheel']}!{meta['file']}"
    norm = lambda s: re.sub(r"[-_.]+", "-", str(s)).lower()  # noqa: E731
    report.check(norm(table.get("package")) == norm(meta["name"]), "metadata", "package", "",
                 f"Name {table.get('package')}", f"Name {meta['name']}", where)
    report.check(str(table.get("version")) == meta["version"], "metadata", "version", "",
                 f"Version {table.get('version')}", f"Version {meta['version']}", where)
    try:
        same = _range(requires) == _range(meta["requires_torch"])
    except ValueError as exc:
        same = False
        report.notes.append(str(exc))
    report.check(same, "metadata", "requires_torch", "", f"torch{requires}",
                 f"Requires-Dist: {meta['requires_torch_line']}", where)
    supported = table_torch_versions(requires, facts["glue_torch_versions"]) if same else []
    bounds = dict((op, v) for op, v in _range(meta["requires_torch"])) if same else {}
    lo, hi = bounds.get(">=", ()), bounds.get("<=", ())
    glue_minors = {_vt(g)[:2] for g in supported}
    wanted = set()
    if len(lo) >= 2 and len(hi) >= 2 and lo[0] == hi[0]:  # every minor release from lo to hi
        wanted = {(lo[0], minor) for minor in range(lo[1], hi[1] + 1)}
    report.check(bool(wanted) and wanted <= glue_minors, "metadata", "glue", "",
                 f"C++ glue for every torch minor in torch{requires}",
                 f"glue for {', '.join(facts['glue_torch_versions'])}", facts["wheel"])
    low = supported[0] if supported else TORCH_VERSION

    # --- the public table against the catalog ---------------------------------------------------
    for torch_v in sorted({low, CATALOG_TORCH}, key=_vt):
        counts = {s: 0 for s in STAGES}
        for exp in exports.values():
            counts[stage_on(exp, torch_v)] = counts.get(stage_on(exp, torch_v), 0) + 1
        counts["total"] = len(exports)
        report.counts[f"torch {torch_v}"] = counts
    got = report.counts[f"torch {CATALOG_TORCH}"]
    report.catalog = {"torch": CATALOG_TORCH, "expected": CATALOG, "found": {k: got.get(k, 0) for k in CATALOG}}
    for key, want in CATALOG.items():
        report.check(got.get(key, 0) == want, "catalog", "public_api", key, f"{want} ({CATALOG_TORCH})",
                     str(got.get(key, 0)), "shared/research/torch_tpu.md section 2")
    for name, exp in exports.items():
        if exp.get("conflict"):
            report.notes.append(f"{name}: {exp['stage']} by {exp['evidence']}, but {exp['conflict']}")
        if exp["stage"] == "unannotated":
            report.notes.append(f"{name}: no stage annotation ({exp['evidence']})")

    # --- rows -----------------------------------------------------------------------------------
    rows = [(r.get("id", f"row{i}"), r) for i, r in enumerate(table.get("rows") or [])]
    rows += [(f"env:{'/'.join(r.get('names') or [])}", r) for r in table.get("env_vars") or []]
    for row_id, row in rows:
        report.checked_rows.append(row_id)
        declared = row.get("tpu_names") or {}
        if not isinstance(declared, dict):
            report.check(False, "tpu_names", row_id, "", "a mapping name -> stage", type(declared).__name__, "table")
            declared = {}
        for name, stage in declared.items():
            exp = exports.get(name)
            if not report.check(exp is not None, "tpu_names", row_id, name, "a public torch.tpu name",
                                "missing from _PUBLIC_MODULES", "torch_tpu/_internal/public_api.py"):
                continue
            stage_range = sorted({stage_on(exp, v) for v in supported or [low]})
            wheel_stage = "internal" if "internal" in stage_range else exp["stage"]
            detail = f"{wheel_stage}" + (f" ({exp['internal_when']}; prefer {exp.get('prefer')})"
                                         if wheel_stage == "internal" else "")
            report.check(wheel_stage != "internal", "tpu_names", row_id, name,
                         "not internal (a recommended name)", detail, exp["evidence"])
            report.check(stage == wheel_stage, "tpu_names", row_id, name, f"stage {stage}",
                         f"stage {detail}", exp["evidence"])

        # every torch.tpu mention is listed, called internal (and is), or a public module
        for where_, text in _texts(row):
            for m in TPU_MENTION.finditer(text):
                name, after = m.group(0), _after(text, m.end())
                context = repr(text[max(0, m.start() - 20):m.end() + 40])
                if name in declared:
                    report.checks += 1
                elif name in modules or name == "torch.tpu":
                    spec = modules.get(name) or {}
                    if re.search(r"python3?\s+-m\s+$", text[:m.start()]):
                        report.check(bool(spec.get("main")), "mentions", row_id, name,
                                     "a public module runnable with python -m (ModuleSpec main=)",
                                     f"main={spec.get('main')}", spec.get("line", "public_api.py"))
                    else:
                        report.check(name in modules, "mentions", row_id, name, "a public module", "missing",
                                     "torch_tpu/_internal/public_api.py")
                elif re.match(r"\s*(?:is internal|\(internal)", after):  # named as what not to use
                    exp = exports.get(name)
                    internal_in = [v for v in supported or [low] if exp and stage_on(exp, v) == "internal"]
                    report.check(bool(internal_in), "mentions", row_id, name,
                                 "internal in the wheel (the text says so)",
                                 "missing" if exp is None else exp["stage"], exp["evidence"] if exp else context)
                    if exp is not None and internal_in and internal_in != (supported or [low]):
                        report.notes.append(f"{row_id}: {name} is called internal; it is internal on "
                                            f"{exp['internal_when']} only (experimental on older torch)")
                else:
                    report.check(False, "mentions", row_id, name, f"listed in tpu_names (mentioned in {where_})",
                                 "not listed", context)

        # every recommended name appears in becomes, its first mention tagged with its stage
        becomes = row.get("becomes") or ""
        for name in declared:
            exp = exports.get(name)
            hits = [m for m in TPU_MENTION.finditer(becomes) if m.group(0) == name]
            if not report.check(bool(hits), "mentions", row_id, name, "mentioned in becomes (it is in tpu_names)",
                                "not mentioned", repr(becomes)) or exp is None:
                continue
            for stage in ("experimental", "deprecated"):
                tags = [re.match(rf"\s*\({stage}\b", _after(becomes, m.end())) is not None for m in hits]
                near = repr(becomes[hits[0].start():hits[0].end() + 45])
                if exp["stage"] == stage:
                    report.check(tags[0], "stage_tag", row_id, name, f"'({stage})' right after its name in becomes",
                                 near, exp["evidence"])
                else:
                    report.check(not any(tags), "stage_tag", row_id, name,
                                 f"no '({stage})' tag (the wheel says {exp['stage']})", near, exp["evidence"])

        # torch names
        listed = list(row.get("torch_names") or [])
        for name in listed:
            found = torch.resolve(name)
            report.torch_names[name] = found
            report.check(found["found"], "torch_names", row_id, name, f"defined in torch {TORCH_VERSION}",
                         "missing", found["evidence"])
        fix_to = (row.get("fix") or {}).get("to")
        if isinstance(fix_to, str):
            for m in TORCH_MENTION.finditer(fix_to):
                if not m.group(0).startswith("torch.tpu"):
                    report.check(m.group(0) in listed, "mentions", row_id, m.group(0),
                                 "listed in torch_names (the fix writes it)", "not listed", repr(fix_to))
        for m in TORCH_MENTION.finditer(row.get("becomes") or ""):
            name = m.group(0)
            if name.startswith("torch.tpu") or name in listed:
                continue
            found = torch.resolve(name)
            report.torch_names.setdefault(name, found)
            report.notes.append(f"{row_id}: mentions {name}, not in torch_names: "
                                f"{'defined' if found['found'] else 'MISSING'} in torch {TORCH_VERSION} "
                                f"({found['evidence']})")

        # environment variables: a plain byte search of every .so and .py in the wheel
        if "read_instead" in row or row_id.startswith("env:"):
            for name in row.get("names") or []:
                hits = tokens.get(name, [])
                report.check(not hits, "env_vars", row_id, name, "not read by the wheel (absent from .so/.py strings)",
                             f"present in {len(hits)} file(s)", ", ".join(hits[:3]) or facts["wheel"])
            instead = row.get("read_instead")
            if instead:
                hits = tokens.get(instead, [])
                report.check(bool(hits), "env_vars", row_id, instead, "read by the wheel (present in .so/.py strings)",
                             "absent", ", ".join(hits[:3]) or f"no .so/.py of {facts['wheel']}")

    # --- torch names the table must not recommend: absent from torch 2.13 -------------------------
    all_listed = {n: r.get("id") for r in table.get("rows") or [] for n in r.get("torch_names") or []}
    for name, row_id in ABSENT_IN_TORCH.items():
        found = torch.resolve(name)
        report.torch_names.setdefault(name, found)
        report.check(not found["found"], "torch_absent", row_id, name, f"absent from torch {TORCH_VERSION}",
                     "defined", found["evidence"])
        report.check(name not in all_listed, "torch_absent", row_id, name, "not in any torch_names",
                     f"listed in {all_listed.get(name)}", "table")
        row = next((r for r in table.get("rows") or [] if r.get("id") == row_id), {})
        report.check(name in (row.get("becomes") or ""), "torch_absent", row_id, name,
                     "named in the row's becomes (with the torch it needs)", "not named", repr(row.get("becomes")))

    # --- internal device APIs: the data file XLA511 imports, and their replacements in torch --------
    if internal_apis_file is not None:
        try:
            on_disk = json.loads(Path(internal_apis_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            on_disk = {"<unreadable>": str(exc)}
        regenerated = internal_apis(facts)
        for name in sorted(set(on_disk) | set(regenerated)):
            report.check(on_disk.get(name) == regenerated.get(name), "internal_apis", Path(internal_apis_file).name,
                         name, f"{regenerated.get(name)} (the wheel)", str(on_disk.get(name)),
                         facts["exports"].get(name, {}).get("evidence", "not internal in the wheel"))
    for name, info in internal_apis(facts).items():
        prefer = info.get("prefer")
        if prefer:
            found = torch.resolve(prefer)
            report.torch_names.setdefault(prefer, found)
            if not found["found"]:
                report.notes.append(f"internal {name} ({info['internal_when']}): its prefer= {prefer} is missing "
                                    f"in torch {TORCH_VERSION} ({found['evidence']})")
    return report


# --------------------------------------------------------------------------------------------

def load_facts(cache: Path) -> Tuple[dict, TorchNames, Dict[str, float]]:
    """The torch-tpu facts and the torch resolver, from the facts cache when it is current."""
    times: Dict[str, float] = {}
    t0 = time.monotonic()
    tpu = fetch(TPU_PROJECT, TPU_VERSION, cache, TPU_PLATFORM)
    torch_wheel = fetch("torch", TORCH_VERSION, cache, TORCH_PLATFORM)
    times["fetch"] = time.monotonic() - t0
    key = f"{sha256(tpu)[:16]}-{sha256(torch_wheel)[:16]}-{tool_hash()[:16]}"
    memo_path = cache / f"check_torchtpu-facts-{key}.json"
    facts, memo = None, {}
    try:
        saved = json.loads(memo_path.read_text(encoding="utf-8"))
        facts, memo = saved["tpu"], saved["torch_names"]
    except (OSError, ValueError, KeyError):
        pass
    times["hash"] = time.monotonic() - t0 - times["fetch"]
    if facts is None:
        facts = tpu_facts(tpu)
    times["read"] = time.monotonic() - t0 - times["fetch"] - times["hash"]
    names = TorchNames(torch_wheel, memo)
    names.memo_path = memo_path  # type: ignore[attr-defined]
    names.facts = facts  # type: ignore[attr-defined]
    if not memo_path.exists():
        names.dirty = True
    return facts, names, times


def save_facts(names: TorchNames) -> None:
    if not names.dirty:
        return
    path: Path = names.memo_path  # type: ignore[attr-defined]
    for old in path.parent.glob("check_torchtpu-facts-*.json"):
        if old != path:
            old.unlink(missing_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"tpu": names.facts, "torch_names": names.memo}), encoding="utf-8")  # type: ignore
    os.replace(tmp, path)
    names.dirty = False


def load_table(path: Path = TABLE) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def render_internal_apis(facts: dict) -> str:
    return json.dumps(internal_apis(facts), indent=2) + "\n"


def render_public_api(facts: dict) -> str:
    """Every public name of the wheel's API table (modules included) and its stage."""
    names = {name: exp["stage"] for name, exp in facts["exports"].items()}
    names.update({module: "module" for module in facts["modules"]})
    return json.dumps(dict(sorted(names.items())), indent=2) + "\n"


def run(cache: Path, table: Path = TABLE, write_internal_apis: bool = False) -> Tuple[Report, dict, Dict[str, float]]:
    facts, names, times = load_facts(cache)
    if write_internal_apis:
        for path, text in ((INTERNAL_APIS, render_internal_apis(facts)), (PUBLIC_API, render_public_api(facts))):
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    t0 = time.monotonic()
    report = check(load_table(table), facts, names)
    save_facts(names)
    times["check"] = time.monotonic() - t0
    return report, facts, times


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None,
                        help="wheel cache (default: $XLA_WHEEL_CACHE, /work/cache/wheels, ~/.cache/flake8-xla/wheels)")
    parser.add_argument("--table", type=Path, default=TABLE, help="the migration table to check")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--write-internal-apis", action="store_true",
                        help=f"regenerate {INTERNAL_APIS.relative_to(ROOT)} and {PUBLIC_API.relative_to(ROOT)} "
                             "from the wheel")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print every public name and its stage")
    args = parser.parse_args(argv)
    try:
        report, facts, times = run(args.cache or default_cache(), args.table, args.write_internal_apis)
    except (RuntimeError, LookupError, ValueError, OSError, zipfile.BadZipFile, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out = dict(report.__dict__)
        out["seconds"] = {k: round(v, 2) for k, v in times.items()}
        out["exports"] = {k: {f: v for f, v in e.items() if f not in ("module", "name")}
                          for k, e in facts["exports"].items()}
        print(json.dumps(out, indent=1))
    else:
        counts = report.counts.get(f"torch {CATALOG_TORCH}", {})
        print(f"{len(report.checked_rows)} rows, {counts.get('total', 0)} public torch.tpu names "
              f"({', '.join(f'{counts.get(s, 0)} {s}' for s in STAGES)} on torch {CATALOG_TORCH}): "
              f"{report.checks} checks, {len(report.failures)} failures, {len(report.skipped)} skipped")
        for item in report.failures:
            print(item["line"])
        for item in report.skipped:
            print(f"skipped {item['row']} [{item['aspect']}]: {item['reason']}")
        if args.verbose:
            for name, exp in sorted(facts["exports"].items()):
                extra = f" {exp['internal_when']} prefer {exp.get('prefer')}" if exp["stage"] == "internal" else ""
                print(f"  {name}: {exp['stage']}{extra} ({exp['evidence']})")
            for note in report.notes:
                print(f"note: {note}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
