"""What the XLA5xx rules share: they report the migration uses of one kind, each with its fix builder, in
one wording: the message names the API and what it becomes in one clause; the help, and migrate-report
(through ``Diagnostic.data``), say it in full."""
from __future__ import annotations

import ast
from typing import ClassVar, Optional

from ..rule import Diagnostic, FileContext, Rule
from ..tables.rules import TableRule
from . import fixes
from .facts import MANUAL, MECHANICAL, MigrationFacts
from .fixes import new_value
from .matching import TORCHTPU, UNMAPPED, MigrationUse, MigrationUses


class MigrationRule(TableRule):
    """A rule of the ``--migrate-to`` family (XLA5xx) that reports table rows."""

    migration: ClassVar[Optional[str]] = TORCHTPU
    uses = MigrationUses
    build_fix = staticmethod(fixes.build_fix)

    def diagnostic_of(self, ctx: FileContext, use: MigrationUse) -> Diagnostic:
        return migration_diagnostic(self, ctx, use.node, self.message(use), self.facts(use))

    def message(self, use: MigrationUse) -> str:
        return use_message(use)

    def facts(self, use: MigrationUse) -> MigrationFacts:
        human = "" if use.mechanical else "; needs a human" + (f": {use.why}" if use.why else "")
        api = use.api if use.env is None else f"environment variable {use.api}"
        return MigrationFacts(api, MECHANICAL if use.mechanical else MANUAL, (use.row or use.env).becomes + human)


def migration_diagnostic(rule: Rule, ctx: FileContext, node: ast.AST, message: str,
                         facts: MigrationFacts) -> Diagnostic:
    """The help is the advice in full, unless the message already says it."""
    help = None if facts.advice in message else facts.advice
    return rule.diagnostic(ctx, node, message, help=help)._replace(data=facts)


_SAYS_DELETE = {"delete": "delete it", "unwrap_with": "drop the with, keep its body"}


def use_message(use: MigrationUse) -> str:
    """One clause for a use of a table row (XLA501, XLA502): the API and what it becomes."""
    row, api = use.row, use.api
    fix = row.fix
    if row.kind == "import":
        return f"{api} is unused and fails on TorchTPU; delete it"
    if use.refused_arguments:
        return f"{api} with these arguments has no drop-in TorchTPU form"
    if fix is not None and fix.kind in _SAYS_DELETE:
        return f"{api} does nothing on TorchTPU; {_SAYS_DELETE[fix.kind]}"
    if fix is not None and fix.kind == "value" and use.mechanical:
        return f'{api} -> "{new_value(use.node.value, fix.to)}" on TorchTPU'
    short = row.short_of(use.ref.qualname) if use.ref is not None else row.short
    if short:
        return f"{api} -> {short} on TorchTPU"
    known = "known " if row is UNMAPPED else ""
    return f"{api} has no {known}TorchTPU equivalent; rewrite by hand"


def env_message(use: MigrationUse) -> str:
    """One clause for an environment variable TorchTPU does not read (XLA503)."""
    short = use.env.short
    return f"environment variable {use.api} has no effect on TorchTPU" + (f"; {short}" if short else "")
