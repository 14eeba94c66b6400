"""The base of the rules that report a table's uses: each use the rule takes becomes a diagnostic, with
a builder of the fix its row names (called later with a :class:`flake8_xla.fixing.FixSite`)."""
from __future__ import annotations

import functools
from typing import Callable, ClassVar, Iterator, Optional, Tuple

from ..rule import Diagnostic, FileContext, Rule


class TableRule(Rule):
    """A rule reporting some of the uses a table fact (``uses``: ``ctx.get(uses)``) finds in a file."""

    uses: ClassVar[type]
    build_fix: ClassVar[Callable]  # (use, site) -> Fix, NoFix (why a human) or None

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        return (d for d, _ in self.check_fixable(ctx))

    def check_fixable(self, ctx: FileContext) -> Iterator[Tuple[Diagnostic, Optional[Callable]]]:
        for use in ctx.get(self.uses):
            if self.takes(use):
                yield self.diagnostic_of(ctx, use), functools.partial(self.build_fix, use)

    def takes(self, use) -> bool:
        """Whether the rule reports ``use`` (default: what ``reports`` says)."""
        return self.reports(use)

    def reports(self, use) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def diagnostic_of(self, ctx: FileContext, use) -> Diagnostic:  # pragma: no cover - abstract
        raise NotImplementedError
