"""Match a file's resolved references against the API lifecycle table.

Produces :class:`LifecycleUse` records; the XLA1xx rules pick theirs by row kind and state and
word the message. Compat code (see :mod:`flake8_xla.analysis.semantic`) never produces a use.
"""
from __future__ import annotations

import ast
import functools
import re
from typing import Callable, ClassVar, Iterator, List, Optional, Tuple

from .table import ApiRow, ApiTable, LifecycleUse, api_table, argument_hits
from .fixes import build_fix
from ..rule import Diagnostic, FileContext, Level, Rule
from ..analysis.environment import ENV_SETTERS, env_assignments, string_value, switches_off
from ..analysis.fsdp import USE_SPMD
from ..analysis.semantic import BROAD, COMPAT, TYPE_ERROR, Reference, SemanticModel
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
        if type(stmt) is ast.ImportFrom and _within(stmt.module or "", matched):
            # `from removed.module import a, b`: one diagnostic for the statement
            if id(stmt) in reported:
                return None
            reported.add(id(stmt))
            return LifecycleUse(row, state, stmt, matched, ref=ref)
        return LifecycleUse(row, state, ref.node, matched, ref=ref)
    if row.kind == "module" and _within(ref.root_qualname, matched):
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


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def _env_uses(ref: Reference, model: SemanticModel, table: ApiTable, target: Version) -> Iterator[LifecycleUse]:
    for key_node, value_node in env_assignments(ref, model):
        key = string_value(key_node)
        if key is None:
            continue
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


class LifecycleRule(Rule):
    """A rule that reports the table rows of some kinds in some states (XLA101-XLA106)."""

    kinds: ClassVar[Tuple[str, ...]]
    states: ClassVar[Tuple[str, ...]]

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (d for d, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        for use in ctx.get(LifecycleUses):
            if use.row.kind in self.kinds and use.state in self.states and self.reports(use):
                builder = functools.partial(build_fix, use)  # a manual row's builder says why it has none
                yield self.diagnostic(ctx, use.node, self.message(use), self.level_of(use), self.help(use)), builder

    def level_of(self, use: LifecycleUse) -> Level:
        """An error where the use fails on the target and the table names the exception it raises
        (``effect: AttributeError``); a removed environment variable is ``ignored``: the rule's level."""
        raises = use.state in ("removed", "unavailable") and (use.row.effect or "").endswith("Error")
        return "error" if raises else self.level

    def reports(self, use: LifecycleUse) -> bool:
        """A further choice among the uses of the rule's kinds and states (default: all)."""
        return True

    def message(self, use: LifecycleUse) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def help(self, use: LifecycleUse) -> Optional[str]:
        """The detail behind the message (default: what an alias stands for and the rest of the advice)."""
        return lifecycle_help(use)

    def covers(self, row: ApiRow) -> bool:
        """Whether this rule can report ``row`` on some release (for the generated docs)."""
        if row.kind not in self.kinds:
            return False
        reachable = {"planned": row.plan is not None, "removed": row.removed_in is not None,
                     "deprecated": row.deprecated_in is not None,
                     "warns": row.warns_in is not None and row.plan is None,
                     "unavailable": row.added_in is not None and row.kind in ("argument", "env_var")}
        return any(reachable.get(state, False) for state in self.states)


_PLAN_PHRASES = {
    "deprecation": "is planned for deprecation",
    "removal": "is planned for removal",
    "internalization": "is planned to become internal",
    "replacement": "is planned to be replaced",
}


def planned_message(use: LifecycleUse) -> str:
    """XLA103/XLA903: the planned change (not done yet) and what to use instead."""
    phrase = _PLAN_PHRASES.get(use.row.plan or "removal", "is planned for removal")
    return f"{use.api} {phrase}; {use.advice().first}"


def planned_help(use: LifecycleUse) -> Optional[str]:
    """XLA103/XLA903: whose plan it is and whether a use warns yet, then the rest of the advice."""
    table = api_table()
    if use.row.warns_in:
        warning = f"not deprecated, but it {indirect_phrase(use.row)}"
    elif use.row.deprecated_in:
        warning = f"it warns from torch_xla {use.row.deprecated_in}"
    else:
        warning = f"no warning as of torch_xla {table.latest}"
    issue = f" ({table.usability_plan})" if table.usability_plan else ""
    return lifecycle_help(use, f"the PyTorch/XLA usability plan{issue} slates it; {warning}")


def lifecycle_help(use: LifecycleUse, *facts: Optional[str]) -> Optional[str]:
    """A lifecycle diagnostic's help: the API an alias stands for, the facts the rule's message
    leaves out, then what the first line's advice does not say (caveats, the other replacement)."""
    sentences = [f"{use.api.removesuffix('()')} is {use.alias_of}."] if use.alias_of else []
    sentences += [_sentence(part) for part in (*facts, use.advice().rest) if part]
    return " ".join(sentences) or None


def _sentence(text: str) -> str:
    """``text`` as a sentence; a leading name from code (``torch.save() ...``) keeps its case."""
    if re.match(r"[a-z]+[\s:;,]", text):
        text = text[0].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def indirect_phrase(row: ApiRow) -> str:
    """'warns indirectly from torch_xla 2.8 through xla_device()': a row that is not deprecated but
    calls a deprecated API, whose warning (about that API) its uses then show."""
    return f"warns indirectly from torch_xla {row.warns_in} through {row.warns_through or 'a deprecated call'}"


def removal_phrase(row: ApiRow, state: str, removed_verb: str = "was removed") -> str:
    """'was removed in torch_xla 2.7' / 'is deprecated since torch_xla 2.5 (removed in 2.7)'."""
    if state == "removed":
        return f"{removed_verb} in torch_xla {row.removed_in}"
    later = f" (removed in {row.removed_in})" if row.removed_in else ""
    return f"is deprecated since torch_xla {row.deprecated_in}{later}"
