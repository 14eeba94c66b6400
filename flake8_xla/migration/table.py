"""The torch_xla -> TorchTPU migration table (``rules/torchtpu_migration.yaml``) as typed data.

One row per torch_xla API (or torch argument, or import) with what it becomes on TorchTPU and
whether that rewrite is mechanical; one row per environment variable TorchTPU does not read. The
XLA5xx rules only match uses against it; ``docs/torchtpu.md`` is rendered from it.
"""
from __future__ import annotations

import functools
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..analysis.syntax import within_dotted
from ..tables.core import TableError, check_fields, index_by_name, read_table, strings

KINDS = ("call", "argument", "import", "device_string", "availability")  # device_string: "xla" naming the device;
# availability: the test TorchTPU answers where code tested for torch_xla (XLA504)
REWRITES = ("mechanical", "manual")
FIX_KINDS = ("delete", "replace", "rename", "value", "master_print", "delete_import", "unwrap_with")
# fixes the message words without a short: a deletion, and the new value of a string argument
_SAYS_ITSELF = ("delete", "delete_import", "unwrap_with", "value")
STAGES = ("stable", "experimental", "deprecated")
TABLE_FILE = "torchtpu_migration.yaml"


class MigrationFix(NamedTuple):
    kind: str
    to: str = ""
    # the argument lists the fix accepts, as source texts ("$1": any one expression); None: any
    args: Optional[Tuple[Tuple[str, ...], ...]] = None


class ArgumentValue(NamedTuple):
    keyword: str
    position: Optional[int]
    values: Tuple[str, ...]


class MigrationRow(NamedTuple):
    id: str
    kind: str
    names: Tuple[str, ...]
    becomes: str
    rewrite: str
    evidence: str
    why: str = ""
    fix: Optional[MigrationFix] = None
    argument: Optional[ArgumentValue] = None
    tpu_names: Tuple[Tuple[str, str], ...] = ()  # (torch.tpu name, its stage in the wheel)
    torch_names: Tuple[str, ...] = ()
    other_arguments: str = ""  # why a call with arguments the fix does not accept needs a human
    short: str = ""  # the replacement in a few words, as the message names it: "<api> -> <short> on TorchTPU"
    short_for: Tuple[Tuple[str, str], ...] = ()  # (name, its short) where the row's names become different things

    @property
    def mechanical(self) -> bool:
        return self.rewrite == "mechanical"

    def short_of(self, qualname: str) -> str:
        return next((short for name, short in self.short_for if name == qualname), self.short)


class EnvRow(NamedTuple):
    names: Tuple[str, ...]
    becomes: str
    rewrite: str
    evidence: str
    read_instead: Optional[str] = None
    values: Tuple[str, ...] = ()  # a mechanical row: the values whose setting can simply go
    short: str = ""  # what to do, as the message says it after "has no effect on TorchTPU; "

    @property
    def mechanical(self) -> bool:
        return self.rewrite == "mechanical"


class MigrationTable(NamedTuple):
    package: str
    version: str
    requires_torch: str
    rows: Tuple[MigrationRow, ...]
    env_vars: Tuple[EnvRow, ...]
    by_name: Dict[str, MigrationRow]  # call and argument rows by each qualified name
    imports: Tuple[MigrationRow, ...]  # import rows (their names are module prefixes)
    env_by_name: Dict[str, EnvRow]
    device_strings: Dict[str, MigrationRow]  # "xla", "xla:0" -> their row
    availability: Optional[MigrationRow]  # what a test of torch_xla's presence becomes

    def lookup(self, qualname: str) -> Optional[MigrationRow]:
        return self.by_name.get(qualname)

    def import_row(self, module: str) -> Optional[MigrationRow]:
        return next((row for row in self.imports for name in row.names if within_dotted(module, name)), None)


def _fix(data, row_id: str) -> Optional[MigrationFix]:
    if data is None:
        return None
    kind = data.get("kind")
    if kind not in FIX_KINDS:
        raise TableError(f"{row_id}: fix kind {kind!r} is not one of {FIX_KINDS}")
    args = data.get("args")
    accepted = None if args is None else tuple(tuple(str(a) for a in option) for option in args)
    return MigrationFix(kind, str(data.get("to", "")), accepted)


def _row(data: dict) -> MigrationRow:
    row_id = data.get("id", "?")
    check_fields(data, MigrationRow, row_id)
    if data.get("kind") not in KINDS or data.get("rewrite") not in REWRITES:
        raise TableError(f"{row_id}: kind must be one of {KINDS} and rewrite one of {REWRITES}")
    fix = _fix(data.get("fix"), row_id)
    if fix is not None and data["rewrite"] != "mechanical":
        raise TableError(f"{row_id}: only a mechanical rewrite has a fix")
    if data["rewrite"] == "manual" and not data.get("why"):
        raise TableError(f"{row_id}: a manual rewrite says why it needs a human")
    if (fix is not None and fix.args is not None) != bool(data.get("other_arguments")):
        raise TableError(f"{row_id}: a fix limited to some arguments says why the others need a human")
    argument = data.get("argument")
    if (argument is None) != (data["kind"] != "argument"):
        raise TableError(f"{row_id}: argument rows, and only they, have an argument")
    short_for = data.get("short_for") or {}
    if set(short_for) - set(data.get("names") or ()):
        raise TableError(f"{row_id}: short_for names only the row's names")
    if data["rewrite"] == "mechanical" and not data.get("short") and data["kind"] != "availability" and \
            (fix is None or fix.kind not in _SAYS_ITSELF):
        raise TableError(f"{row_id}: a mechanical row names its replacement in a few words (short)")
    stages = data.get("tpu_names") or {}
    if any(stage not in STAGES for stage in stages.values()):
        raise TableError(f"{row_id}: a tpu_names stage is one of {STAGES}")
    return MigrationRow(
        id=row_id, kind=data["kind"], names=strings(data.get("names")), becomes=data["becomes"],
        rewrite=data["rewrite"], evidence=data["evidence"], why=data.get("why", ""), fix=fix,
        argument=None if argument is None else ArgumentValue(
            argument["keyword"], argument.get("position"), strings(argument["values"])),
        tpu_names=tuple(sorted(stages.items())), torch_names=strings(data.get("torch_names")),
        other_arguments=data.get("other_arguments", ""), short=data.get("short", ""),
        short_for=tuple(sorted(short_for.items())))


def build_table(data: dict) -> MigrationTable:
    rows = tuple(_row(r) for r in data["rows"])
    env_rows = tuple(EnvRow(strings(e["names"]), e["becomes"], e["rewrite"], e["evidence"], e.get("read_instead"),
                            strings(e.get("values")), e.get("short", ""))
                     for e in data.get("env_vars", ()))
    by_name = index_by_name(r for r in rows if r.kind not in ("import", "device_string", "availability"))
    ids: List[str] = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise TableError("row ids repeat")
    env_by_name = {name: env for env in env_rows for name in env.names}
    return MigrationTable(str(data["package"]), str(data["version"]), str(data["requires_torch"]), rows, env_rows,
                          by_name, tuple(r for r in rows if r.kind == "import"), env_by_name,
                          {name: r for r in rows if r.kind == "device_string" for name in r.names},
                          next((r for r in rows if r.kind == "availability"), None))


@functools.lru_cache(maxsize=None)
def migration_table() -> MigrationTable:
    """The shipped table, parsed once per process."""
    return build_table(read_table(TABLE_FILE))


class InternalApi(NamedTuple):
    prefer: str  # the torch.accelerator API TorchTPU names instead
    internal_when: str  # e.g. "torch>=2.11"


INTERNAL_FILE = "torchtpu_internal_apis.json"


@functools.lru_cache(maxsize=None)
def internal_device_apis() -> Dict[str, InternalApi]:
    """The torch.tpu device APIs torch-tpu marks internal, read from the wheel by tools/check_torchtpu.py."""
    data = read_table(INTERNAL_FILE)
    return {name: InternalApi(entry["prefer"], entry["internal_when"]) for name, entry in data.items()}


PUBLIC_FILE = "torchtpu_public_api.json"


@functools.lru_cache(maxsize=None)
def public_tpu_names() -> Dict[str, str]:
    """Every public ``torch.tpu`` name of the torch-tpu wheel (modules too) and its stage."""
    return dict(read_table(PUBLIC_FILE))
