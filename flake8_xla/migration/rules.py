"""What the XLA5xx rules share: they report the migration uses of one kind, each with its fix builder."""
from __future__ import annotations

import functools
from typing import Callable, ClassVar, Iterator, Optional, Tuple

from ..rule import Diagnostic, FileContext, Rule
from .fixes import build_fix
from .matching import TORCHTPU, MigrationUse, MigrationUses


class MigrationRule(Rule):
    """A rule of the ``--migrate-to`` family (XLA5xx) that reports table rows."""

    migration: ClassVar[Optional[str]] = TORCHTPU

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (d for d, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        for use in ctx.get(MigrationUses):
            if self.reports(use):
                yield self.diagnostic(ctx, use.node, self.message(use)), functools.partial(build_fix, use)

    def reports(self, use: MigrationUse) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def message(self, use: MigrationUse) -> str:  # pragma: no cover - abstract
        raise NotImplementedError
