"""The torch_xla API lifecycle table (``rules/api_lifecycle.yaml``) as typed data.

One row per API, module, argument or environment variable. Whether a use is removed,
deprecated or planned on a given target release falls out of ``deprecated_in``/``removed_in``;
the lifecycle rules (XLA101-XLA106) only match uses against the table and word the message.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Tuple

from ..tables.core import check_fields, index_by_name, most_specific, read_table, release, strings
from ..versions import Version, parse_version

if TYPE_CHECKING:  # annotations only: the table loads (for the target's release) without the analysis layer
    import ast

    from ..analysis.semantic import Reference

KINDS = ("function", "class", "decorator", "module", "argument", "env_var")
# current: fine on the newest, fails before added_in; warns: not deprecated itself, but a use warns
# through a deprecated API it reaches (warns_in, warns_through)
STATUSES = ("removed", "deprecated", "planned", "warns", "current")
FIX_KINDS = ("rename", "rename_module", "delete_import", "rename_keyword", "keyword_arguments",
             "drop_arguments", "manual")
FIX_SAFETY = ("safe", "unsafe", "none")


class Fix(NamedTuple):
    """How `flake8-xla fix` rewrites a use (see flake8_xla/lifecycle/fixes.py)."""

    kind: str
    safety: str
    to: str = "replacement"  # rename target: the upstream replacement, or "companion" (xla_compat)
    # call rewriting: the old parameters in order, and what each becomes in the new call: a new
    # keyword name, or {literal: "text"} rewrites by value; a passed parameter not listed blocks the fix
    signature: Tuple[str, ...] = ()
    arguments: Tuple[Tuple[str, object], ...] = ()
    keep_positional: Optional[int] = None  # positional arguments beyond this become keywords
    except_names: Tuple[str, ...] = ()  # moved modules: names that did not move (no fix when used)
    reason: Optional[str] = None  # manual: why a human must rewrite it (else derived from the row)
    note: Optional[str] = None  # what an applied fix still asks of the user or changes (why it is unsafe)


class ArgumentChange(NamedTuple):
    """Which arguments of a call the row is about."""

    label: str  # how messages name it, e.g. "`defval`", "`nprocs` other than None or 1"
    keyword: Optional[str] = None  # a keyword that triggers the row
    position: Optional[int] = None  # a positional index at or beyond which an argument triggers it
    strings_only: bool = False  # the positional argument triggers only when it is a string literal
    allowed: Tuple[object, ...] = ()  # literal values that stay fine (e.g. nprocs=None or 1)
    missing: bool = False  # the row is about calls that leave the argument out (reported at the call)


class EnvVar(NamedTuple):
    name: str
    prefix: bool = False  # XRT_ matches every XRT_* variable
    values: Tuple[str, ...] = ()  # only these values are affected (empty: any value)


class ApiRow(NamedTuple):
    id: str
    kind: str
    names: Tuple[str, ...]
    status: str  # the status on the newest known release
    deprecated_in: Optional[Version]
    removed_in: Optional[Version]
    replacement: Optional[str]
    replacement_since: Optional[Version]
    instead: Optional[str]  # advice when there is no replacement, or a caveat that must be said
    plan: Optional[str]  # planned action for planned rows: deprecation, removal, internalization
    companion: Optional[str]  # the companion-runtime replacement (xla_compat), if any
    companion_note: Optional[str]  # why there is no companion replacement
    fix: Fix
    evidence: str
    notes: Optional[str] = None
    effect: Optional[str] = None  # what a removed use does: AttributeError, ImportError, ignored ...
    argument: Optional[ArgumentChange] = None
    env: Optional[EnvVar] = None
    references: Tuple[str, ...] = ()
    # the first release that has it: a target before it lacks the API (no lifecycle use), or, for an
    # argument or environment row, the keyword or value (it fails there: state "unavailable")
    added_in: Optional[Version] = None
    instead_before: Optional[str] = None  # what to do on a target before added_in (else: advice())
    instead_spmd: Optional[str] = None  # ``instead`` in a program that enables SPMD, where it would fail
    # not deprecated upstream, yet a use warns from this release because the API calls a deprecated
    # one (warns_through, e.g. "xla_device()"), whose warning names that API, not this one
    warns_in: Optional[Version] = None
    warns_through: Optional[str] = None
    # what a message's first line says in place of the replacement and a long ``instead`` (the help says them)
    instead_brief: Optional[str] = None

    @property
    def name(self) -> str:
        return self.names[0] if self.names else (self.env.name if self.env else self.id)

    def state(self, target: Version) -> Optional[str]:
        """removed / deprecated / planned / warns / unavailable on ``target``, or None when the use is
        fine there. A planned row that started to warn (``deprecated_in``) is planned before that
        release; a planned row that warns only through a deprecated API it calls (``warns_in``) stays
        planned; a row without a plan that does so is "warns" from ``warns_in``."""
        if self.added_in is not None and target < self.added_in:
            return "unavailable" if self.kind in ("argument", "env_var") else None
        if self.removed_in is not None and target >= self.removed_in:
            return "removed"
        if self.deprecated_in is not None and target >= self.deprecated_in:
            return "deprecated"
        if self.plan is not None:
            return "planned"
        return "warns" if self.warns_on(target) else None

    def warns_on(self, target: Optional[Version]) -> bool:
        """Whether a use warns on ``target`` only through a deprecated API it calls (``warns_in``)."""
        return self.warns_in is not None and target is not None and target >= self.warns_in

    def upstream_on(self, target: Optional[Version]) -> bool:
        """Whether an upstream replacement exists on ``target`` (None: on some release)."""
        return self.replacement is not None and (
            target is None or self.replacement_since is None or target >= self.replacement_since)

    @property
    def replacement_text(self) -> Optional[str]:
        """'torch_xla.launch() (2.5+)': the upstream replacement and its first release."""
        since = f" ({self.replacement_since}+)" if self.replacement_since else ""
        return f"{self.replacement}{since}" if self.replacement else None

    def advice(self, target: Optional[Version] = None, spmd: bool = False) -> "Advice":
        """What to use instead, split for a diagnostic. The first line names the companion where the
        target has no upstream replacement (with no target: always, as the migration guide does) or
        where the fix writes it, else the replacement, else ``instead_brief`` or ``instead``; every
        other part (a caveat, the upstream replacement, the companion) goes to the rest, the help.
        ``spmd``: the program enables SPMD, where some advice (the 'xla' process group) fails."""
        if self.instead_before and target is not None and self.added_in and target < self.added_in:
            return Advice(self.instead_before)
        instead = self.instead_spmd if spmd and self.instead_spmd else self.instead
        replacement = self.replacement_text
        upstream = target is not None and self.upstream_on(target) and self.fix.to != "companion"
        companion = f"{self.companion}()" if self.companion and not upstream else None
        if companion and self.kind != "argument":  # the companion stands in for the API itself
            rest = [f"upstream replacement: {replacement}" if replacement else None, instead]
            return Advice(f"use {companion}", _joined(rest))
        use = f"use {replacement}" if replacement else None
        first = self.instead_brief or use or instead or "no replacement"
        rest = [part for part in (use, instead) if part and part not in first]
        return Advice(first, _joined(rest + [f"companion: {companion}" if companion else None]))


class Advice(NamedTuple):
    first: str  # the clause a message's first line ends with
    rest: Optional[str] = None  # what the help adds: caveats, the other replacement


def _joined(parts: List[Optional[str]]) -> Optional[str]:
    return "; ".join(p for p in parts if p) or None


class LifecycleUse(NamedTuple):
    """One use of a table row in a file (what XLA101-XLA106 report and the fixes rewrite)."""

    row: ApiRow
    state: str  # removed | deprecated | planned (on the target)
    node: ast.AST  # where to report
    api: str  # the API as the user wrote it, e.g. "xm.xrt_world_size()"
    value: Optional[str] = None  # the value an environment variable is set to
    ref: Optional[Reference] = None  # the reference that matched (API and argument rows)
    alias_of: Optional[str] = None  # the API's qualified name when ``api`` is an alias of another name
    target: Optional[Version] = None  # the release the use was judged against
    spmd: bool = False  # the file enables SPMD (torch_xla.runtime.use_spmd())

    def advice(self) -> Advice:
        return self.row.advice(self.target, self.spmd)


class ApiTable(NamedTuple):
    latest: Version
    rows: Tuple[ApiRow, ...]
    by_name: Dict[str, ApiRow]  # function/class/decorator/module rows by every qualified name
    arguments: Dict[str, Tuple[ApiRow, ...]]  # argument rows by the callee's qualified name
    env_vars: Tuple[ApiRow, ...]
    leaf_names: frozenset  # last segments of APIs and replacements, for hasattr() compat checks
    usability_plan: Optional[str] = None  # the issue of the PyTorch/XLA usability plan (planned rows)

    def lookup(self, qualname: str) -> Optional[Tuple[ApiRow, str]]:
        """The most specific row covering ``qualname`` (itself or a prefix), with the matched name."""
        return most_specific(self.by_name, qualname)

    def env_row(self, name: str, value: Optional[str]) -> Optional[ApiRow]:
        for row in self.env_vars:
            env = row.env
            assert env is not None
            if (name.startswith(env.name) if env.prefix else name == env.name):
                if not env.values or (value is not None and value.upper() in env.values):
                    return row
        return None


def _row(raw: dict) -> ApiRow:
    check_fields(raw, ApiRow, raw["id"])
    fix = raw.get("fix") or {}
    argument = raw.get("argument")
    env = raw.get("env")
    return ApiRow(
        id=raw["id"],
        kind=raw["kind"],
        names=strings(raw.get("names")),
        status=raw["status"],
        deprecated_in=release(raw.get("deprecated_in")),
        removed_in=release(raw.get("removed_in")),
        replacement=raw.get("replacement"),
        replacement_since=release(raw.get("replacement_since")),
        instead=raw.get("instead"),
        plan=raw.get("plan"),
        companion=raw.get("companion"),
        companion_note=raw.get("companion_note"),
        fix=Fix(fix.get("kind", "manual"), fix.get("safety", "none"), fix.get("to", "replacement"),
                strings(fix.get("signature")), tuple((fix.get("arguments") or {}).items()),
                fix.get("keep_positional"), strings(fix.get("except_names")), reason=fix.get("reason"),
                note=fix.get("note")),
        evidence=raw["evidence"],
        notes=raw.get("notes"),
        effect=raw.get("effect"),
        argument=ArgumentChange(
            label=argument["label"],
            keyword=argument.get("keyword"),
            position=argument.get("position"),
            strings_only=bool(argument.get("strings_only", False)),
            allowed=tuple(argument.get("allowed", ())),
            missing=bool(argument.get("missing", False)),
        ) if argument else None,
        env=EnvVar(env["name"], bool(env.get("prefix", False)), strings(env.get("values"))) if env else None,
        references=strings(raw.get("references")),
        added_in=release(raw.get("added_in")),
        instead_before=raw.get("instead_before"),
        instead_spmd=raw.get("instead_spmd"),
        warns_in=release(raw.get("warns_in")),
        warns_through=raw.get("warns_through"),
        instead_brief=raw.get("instead_brief"),
    )


def build_table(data: dict) -> ApiTable:
    rows = tuple(_row(raw) for raw in data["apis"])
    arguments: Dict[str, List[ApiRow]] = {}
    leaves = set()
    for row in rows:
        if row.kind == "argument":
            for name in row.names:
                arguments.setdefault(name, []).append(row)
        for name in row.names:
            leaves.add(name.rsplit(".", 1)[-1])
        if row.replacement:
            head = row.replacement.split("(", 1)[0]
            leaves.add(head.rsplit(".", 1)[-1])
    return ApiTable(
        latest=parse_version(str(data["latest_release"])),
        rows=rows,
        by_name=index_by_name(r for r in rows if r.kind not in ("argument", "env_var")),
        arguments={k: tuple(v) for k, v in arguments.items()},
        env_vars=tuple(r for r in rows if r.kind == "env_var"),
        leaf_names=frozenset(leaves),
        usability_plan=data.get("usability_plan"),
    )


def _table_data() -> dict:
    return read_table("api_lifecycle.yaml")


@functools.lru_cache(maxsize=None)
def api_table() -> ApiTable:
    """The shipped table, parsed once per process."""
    return build_table(_table_data())


@functools.lru_cache(maxsize=None)
def latest_release() -> Version:
    """``api_table().latest`` without building the table: a run served from the cache needs only this."""
    return parse_version(str(_table_data()["latest_release"]))
