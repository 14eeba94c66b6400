"""Match a file's references against the TorchTPU migration table.

Produces :class:`MigrationUse` records (a fact: ``ctx.get(MigrationUses)``); the engine runs the
rules that ask for them only under ``--migrate-to torchtpu``. Compat code is torch_xla code too: it is reported, since
after the move nothing of torch_xla runs.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Iterator, List, NamedTuple, Optional, Set, Tuple

from ..analysis import syntax
from ..analysis.availability import import_guards, is_probe
from ..analysis.environment import ENV_SETTERS, string_value, switches_off
from ..analysis.semantic import Reference, SemanticModel
from ..rule import FileContext
from ..tables.uses import env_settings, passed_argument
from ..versions import MIGRATIONS
from .table import EnvRow, MigrationRow, MigrationTable, migration_table, public_tpu_names

TORCHTPU = MIGRATIONS[0]


class MigrationUse(NamedTuple):
    node: ast.AST  # where it is reported
    api: str  # as the message names it: "xm.mark_step()", 'backend="openxla"', "import torch_xla"
    row: Optional[MigrationRow] = None
    env: Optional[EnvRow] = None
    ref: Optional[Reference] = None
    # the rewrite is mechanical for this use: the row's, unless the call passes arguments its fix does not take
    mechanical: bool = False
    reason: str = ""  # why this use needs a human when the row alone does not say

    @property
    def why(self) -> str:
        """Why a human has to do this rewrite."""
        if self.reason:
            return self.reason
        if self.row is None:
            return ""
        if not self.row.mechanical:
            return self.row.why
        if self.ref is not None and self.ref.call is None and self.row.kind == "call":
            return "it is used as a value, not called here: rewrite the calls it stands for"
        return self.row.other_arguments

    @property
    def refused_arguments(self) -> bool:
        """A call of a mechanical row with arguments its fix does not take (``xm.mark_step(wait=True)``)."""
        return self.row is not None and self.row.mechanical and not self.mechanical and not self.reason and \
            self.ref is not None and self.ref.call is not None


class MigrationUses(tuple):
    """Every use of a migration table row in one file, in source order."""

    @classmethod
    def from_context(cls, ctx: FileContext) -> "MigrationUses":
        return cls(match_migration(ctx.get(SemanticModel), migration_table(), ctx.tree, ctx.get(syntax.Parents)))


def match_migration(model: SemanticModel, table: MigrationTable, tree: ast.AST,
                    parents: syntax.Parents) -> List[MigrationUse]:
    uses: List[MigrationUse] = []
    imports_seen: Set[int] = set()
    loaded: Optional[Counter] = None
    in_try: Set[int] = set()
    guarded: Set[int] = set()
    for ref in model.references:
        if ref.is_import:
            if loaded is None:
                loaded, in_try = syntax.names_used(tree), _imports_in_try(tree)
                guarded = {id(s) for guard in import_guards(tree) for s in guard.body}
            if id(ref.statement) in guarded:
                continue  # the guard is the use: XLA504 reports it
            use = _import_use(ref, table, imports_seen, loaded, in_try)
        elif ref.qualname in ENV_SETTERS:
            uses.extend(_env_uses(ref, model, table))
            continue
        else:
            use = _api_use(ref, table, parents, tree)
        if use is not None:
            uses.append(use)
    uses.extend(_device_string_uses(tree, table))
    return sorted(uses, key=lambda u: (u.node.lineno, u.node.col_offset))


_OTHER_INDEX = "another device index has no equivalent: a process drives one device, tpu:0"


def _device_string_uses(tree: ast.AST, table: MigrationTable) -> Iterator[MigrationUse]:
    """``.to("xla")`` and ``device="xla:0"``: the device named by a string (``torch.device("xla")`` is the
    device-name row's)."""
    if not table.device_strings:
        return
    for node in ast.walk(tree):
        if type(node) is not ast.Call:
            continue
        func = node.func
        if type(func) is ast.Attribute and func.attr == "to" and node.args:
            found, written = node.args[0], '.to({})'
        else:
            # device_type= elsewhere is often a label (a server's info message), not a device
            autocast = (func.attr if type(func) is ast.Attribute else getattr(func, "id", "")) == "autocast"
            found = next((k.value for k in node.keywords
                          if k.arg == "device" or (autocast and k.arg == "device_type")), None)
            written = "device={}"
        value = string_value(found)
        if value is None or not _XLA_DEVICE.fullmatch(value):
            continue
        row = table.device_strings.get(value) or next(iter(table.device_strings.values()))
        mapped = value in table.device_strings
        yield MigrationUse(found, written.format(f'"{value}"'), row=row, mechanical=mapped,
                           reason="" if mapped else _OTHER_INDEX)


_PROBE = "an availability probe inside try: what its except branch sets (a flag, a fallback) has to be rethought"
_PROBE_CALL = ("it probes for a TPU inside try, and its TorchTPU form cannot fail: test "
               "torch.accelerator.is_available() instead (XLA504)")
# a torch_xla name the table has no row for: still a use that fails once torch_xla is gone
UNMAPPED = MigrationRow(
    id="unmapped", kind="call", names=(), becomes="no TorchTPU counterpart known", rewrite="manual", evidence="",
    why="find what it does and write that with torch, torch.distributed or torch.tpu")
UNMAPPED_ENV = EnvRow(names=(), becomes="no TorchTPU counterpart known", rewrite="manual", evidence="")
_TORCH_XLA_PREFIXES = ("torch_xla.", "torch.ops.xla.")
_TORCH_XLA_ENV = re.compile(r"(XLA|PT_XLA|PJRT|XRT)_\w+")
_XLA_DEVICE = re.compile(r"xla(:\d+)?")
_STILL_READ = frozenset({"XLA_FLAGS"})  # read by the XLA compiler TorchTPU runs too
_SIDE_EFFECT = ("it is imported for what it registers (the xla device, the 'xla' process-group backend, "
                "torch.ops.xla): remove it once nothing relies on that")


def _import_use(ref: Reference, table: MigrationTable, seen: Set[int], loaded: Counter,
                probes: Set[int]) -> Optional[MigrationUse]:
    """An import statement of torch_xla none of whose names the file uses (reported once). Only an
    aliased or from-import is mechanical: ``import torch_xla.x`` runs for its side effects, and an
    import in a ``try`` is an availability probe."""
    stmt = ref.statement
    if stmt is None or id(stmt) in seen or type(stmt) not in (ast.Import, ast.ImportFrom):
        return None
    seen.add(id(stmt))
    if type(stmt) is ast.ImportFrom:
        modules = [stmt.module or ""] if not stmt.level else []
        bound = [a.asname or a.name for a in stmt.names]
    else:
        modules = [a.name for a in stmt.names]
        bound = [a.asname or a.name.split(".")[0] for a in stmt.names]
    rows = [table.import_row(m) for m in modules]
    if not rows or any(r is None for r in rows) or "*" in bound or any(name in loaded for name in bound):
        return None
    reason = _PROBE if id(stmt) in probes else \
        _SIDE_EFFECT if type(stmt) is ast.Import and any(a.asname is None for a in stmt.names) else ""
    return MigrationUse(stmt, f"import of {', '.join(modules)}", row=rows[0], ref=ref,
                        mechanical=rows[0].mechanical and not reason, reason=reason)


def _imports_in_try(tree: ast.AST) -> Set[int]:
    return {id(stmt) for node in ast.walk(tree) if type(node) in syntax.TRY_NODES
            for stmt in node.body if type(stmt) in (ast.Import, ast.ImportFrom)}


def _api_use(ref: Reference, table: MigrationTable, parents: syntax.Parents, tree: ast.AST) -> Optional[MigrationUse]:
    row = table.lookup(ref.qualname)
    call = ref.call
    if row is None:
        if not ref.qualname.startswith(_TORCH_XLA_PREFIXES):
            return None
        return MigrationUse(ref.node, ref.written_prefix(ref.qualname) + ("()" if call is not None else ""),
                            row=UNMAPPED, ref=ref)
    written = ref.written_prefix(ref.qualname)
    if row.kind == "argument":
        node = None if call is None else argument_value(row, call)
        if node is None:
            return None
        limited = row.fix is not None and row.fix.args is not None
        return MigrationUse(node, f'{row.argument.keyword}="{node.value}" of {written}()', row=row, ref=ref,
                            mechanical=row.mechanical and not (limited and not accepted(row.fix.args, call)))
    limited = row.fix is not None and row.fix.args is not None
    mechanical = row.mechanical and (row.fix is None or call is not None) and \
        not (limited and not accepted(row.fix.args, call))
    probe = mechanical and row.fix is not None and row.fix.kind == "replace" and is_probe(call, parents, tree)
    return MigrationUse(ref.node, written + ("()" if call is not None else ""), row=row, ref=ref,
                        mechanical=mechanical and not probe, reason=_PROBE_CALL if probe else "")


def accepted(options: Tuple[Tuple[str, ...], ...], call: ast.Call) -> bool:
    """Whether the call's arguments, as source texts, are one of ``options`` ("$1": one positional)."""
    passed = [ast.unparse(a) for a in call.args] + [f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords]
    return any(len(option) == len(passed) and all(o == p or (o == "$1" and not p.startswith("*") and "=" not in p)
                                                  for o, p in zip(option, passed)) for option in options)


def argument_value(row: MigrationRow, call: ast.Call) -> Optional[ast.Constant]:
    """The string literal of ``call`` that the argument row is about (by keyword or position)."""
    argument = row.argument
    node = passed_argument(call, argument.keyword, argument.position)
    value = node.value if type(node) is ast.keyword else node
    if string_value(value) in argument.values:
        return value  # type: ignore[return-value]
    return None


def _env_uses(ref: Reference, model: SemanticModel, table: MigrationTable) -> Iterator[MigrationUse]:
    for key_node, name, value in env_settings(ref, model):
        env = table.env_by_name.get(name)
        if env is None and name not in _STILL_READ and _TORCH_XLA_ENV.fullmatch(name):
            env = UNMAPPED_ENV
        if env is None or switches_off(value):  # X = "0" asks for nothing to carry over
            continue
        reason = ""
        if env.mechanical and env.values and string_value(value) not in env.values:
            reason = f"the value is not {' or '.join(env.values)}: what picks the device has to be rethought"
        elif env.mechanical and _reads_env(model, name):
            reason = f"the program reads {name} itself"
        yield MigrationUse(key_node, name, env=env, ref=ref, mechanical=env.mechanical and not reason, reason=reason)


def _reads_env(model: SemanticModel, name: str) -> bool:
    """Whether the module reads the variable: ``os.environ.get(name)``, ``os.getenv(name)``, ``os.environ[name]``."""
    for ref in model.references:
        call = ref.call
        if ref.qualname in ("os.environ.get", "os.getenv") and call is not None and call.args:
            if string_value(call.args[0]) == name:
                return True
        parent = ref.parent
        if ref.qualname == "os.environ" and type(parent) is ast.Subscript and type(parent.ctx) is ast.Load \
                and string_value(parent.slice) == name:
            return True
    return False


def speaks_torchtpu(model: SemanticModel) -> bool:
    """Whether the module is TorchTPU code: it imports ``torch_tpu`` or uses ``torch.tpu``, and nothing
    of ``torch.tpu`` it uses is foreign to Google's TorchTPU (see :func:`another_torch_tpu`)."""
    return any(ref.qualname == "torch_tpu" or ref.qualname.startswith(("torch_tpu.", "torch.tpu."))
               for ref in model.references) and another_torch_tpu(model) is None


def another_torch_tpu(model: SemanticModel) -> Optional[str]:
    """A ``torch.tpu`` name the module uses that Google's TorchTPU does not have (``torch.tpu.empty_cache``
    of sophgo/torch-tpu, which installs a ``torch_tpu`` too), else None: such code is not TorchTPU's."""
    public = public_tpu_names()
    for ref in model.references:
        name = ref.qualname
        if name.startswith("torch.tpu.") and not ref.is_import:
            parts = name.split(".")
            prefixes = [".".join(parts[:cut]) for cut in range(3, len(parts))]
            known = name in public or any(public.get(p, "module") != "module" for p in prefixes)  # EagerMode.X
            if not known and not parts[2].startswith("_"):
                return name
    return None
