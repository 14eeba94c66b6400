"""Match a file's resolved references against the API lifecycle table.

Produces :class:`LifecycleUse` records; the XLA1xx rules pick theirs by row kind and state and
word the message. Compat code (see :mod:`flake8_xla.analysis.semantic`) never produces a use.
"""
from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Tuple

from .table import ApiRow, ApiTable, ArgumentChange, LifecycleUse
from ..rule import FileContext
from ..analysis.environment import ENV_SETTERS, string_value, switches_off
from ..analysis.fsdp import USE_SPMD
from ..analysis.semantic import BROAD, COMPAT, TYPE_ERROR, Reference, SemanticModel
from ..analysis.syntax import within_dotted
from ..tables.uses import env_settings, passed_argument
from ..versions import Version


class LifecycleUses(tuple):
    """Every use of a table row in one file, judged against the target (a fact: ctx.get(LifecycleUses))."""

    @classmethod
    def from_context(cls, ctx: FileContext) -> "LifecycleUses":
        return cls(match_lifecycle(ctx.get(SemanticModel), ctx.table, ctx.target.version))


def match_lifecycle(model: SemanticModel, table: ApiTable, target: Version) -> List[LifecycleUse]:
    uses: List[LifecycleUse] = []
    reported_statements = set()
    for ref in model.references:
        qualname = ref.qualname
        if qualname.startswith("torch_xla"):
            uses.extend(_api_uses(ref, table, target, reported_statements))
        elif qualname in ENV_SETTERS and not ref.guard & COMPAT:
            uses.extend(_env_uses(ref, model, table, target))
    spmd = any(ref.qualname == USE_SPMD and not ref.is_import for ref in model.references)
    return [use._replace(target=target, spmd=spmd) for use in uses]


def _api_uses(ref: Reference, table: ApiTable, target: Version, reported: set) -> Iterator[LifecycleUse]:
    call = ref.call
    hit = table.lookup(ref.qualname)
    removed_callee = False
    if hit is not None:
        row, matched = hit
        state = row.state(target)
        guard = COMPAT | BROAD if ref.is_import else COMPAT
        removed_callee = state == "removed"
        if state and not ref.guard & guard:
            use = _place(ref, row, matched, state, call, reported)
            if use is not None:
                yield use
    if call is None or removed_callee or ref.guard & (COMPAT | TYPE_ERROR):
        return
    for row in table.arguments.get(ref.qualname, ()):
        state = row.state(target)
        if state is None:
            continue
        node = argument_hits(row, call)
        if node is not None:
            api, alias_of = _named(ref, ref.qualname, "()")
            yield LifecycleUse(row, state, node, api, ref=ref, alias_of=alias_of)


def _place(ref: Reference, row: ApiRow, matched: str, state: str, call: Optional[ast.Call],
           reported: set) -> Optional[LifecycleUse]:
    """Where and how to report one matched reference (None when it is reported elsewhere)."""
    if ref.is_import:
        stmt = ref.statement
        if row.kind != "module" and state != "removed":
            return None  # importing a deprecated or planned name is harmless; its uses are reported
        if type(stmt) is ast.ImportFrom and within_dotted(stmt.module or "", matched):
            # `from removed.module import a, b`: one diagnostic for the statement
            if id(stmt) in reported:
                return None
            reported.add(id(stmt))
            return LifecycleUse(row, state, stmt, matched, ref=ref)
        return LifecycleUse(row, state, ref.node, matched, ref=ref)
    if row.kind == "module" and within_dotted(ref.root_qualname, matched):
        return None  # the import that bound the root name is already reported
    call_parens = "()" if call is not None and matched == ref.qualname and row.kind != "module" else ""
    api, alias_of = _named(ref, matched, call_parens)
    return LifecycleUse(row, state, ref.node, api, ref=ref, alias_of=alias_of)


def _named(ref: Reference, qualname: str, suffix: str) -> Tuple[str, Optional[str]]:
    """The API as written, and the real API when the name is an alias that is not the API's own
    (``rank_of`` for ``get_ordinal``), so the help says what was removed."""
    written = ref.written_prefix(qualname)
    alias_of = qualname if written.rsplit(".", 1)[-1] != qualname.rsplit(".", 1)[-1] else None
    return written + suffix, alias_of


def _env_uses(ref: Reference, model: SemanticModel, table: ApiTable, target: Version) -> Iterator[LifecycleUse]:
    for key_node, key, value_node in env_settings(ref, model):
        seen = set()
        for candidate in _candidate_values(value_node):
            if switches_off(candidate):
                continue
            value = string_value(candidate) if candidate is not None else None
            row = table.env_row(key, value)
            if row is None or row.id in seen:
                continue
            seen.add(row.id)  # one diagnostic per table row, however many entries pick it
            state = row.state(target)
            if state:
                yield LifecycleUse(row, state, key_node, key, value)


def _candidate_values(node: Optional[ast.AST]) -> List[Optional[ast.AST]]:
    """The values an environment variable may be set to: a constant, each constant value of a
    dict of constants indexed by something (``{"cuda": "GPU", "tpu": "TPU"}[dev]``), or both
    arms of a conditional expression."""
    if type(node) is ast.Subscript and type(node.value) is ast.Dict:
        values = node.value.values
        if all(type(v) is ast.Constant for v in values):
            return list(values)
    if type(node) is ast.IfExp:
        return _candidate_values(node.body) + _candidate_values(node.orelse)
    return [node]


def _literal(node: ast.AST) -> object:
    """The value of a literal argument, or a sentinel when it is not a literal."""
    try:
        return ast.literal_eval(node)
    except Exception:
        return _NOT_LITERAL


_NOT_LITERAL = object()


def argument_hits(row: ApiRow, call: ast.Call) -> Optional[ast.AST]:
    """The argument node of ``call`` that the argument row ``row`` is about, if any."""
    change = row.argument
    assert change is not None
    if change.missing:
        by_keyword = any(k.arg is None or k.arg == change.keyword for k in call.keywords)  # **kwargs may hold it
        by_position = any(type(a) is ast.Starred for a in call.args) or (
            change.position is not None and len(call.args) > change.position)
        return None if by_keyword or by_position else call
    node = passed_argument(call, change.keyword, change.position)
    if type(node) is ast.keyword:
        return node if _disallowed(change, node.value) else None
    if node is None or change.strings_only and not (type(node) is ast.Constant and type(node.value) is str):
        return None
    return node if _disallowed(change, node) else None


def _disallowed(change: ArgumentChange, value: ast.AST) -> bool:
    """With an allow-list, only a literal outside it is reported: a computed value may be fine."""
    if not change.allowed:
        return True
    value = _literal(value)
    return value is not _NOT_LITERAL and value not in change.allowed
