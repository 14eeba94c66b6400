"""What a rule is: metadata, documentation, examples (which are also its tests) and a check."""
from __future__ import annotations

import ast
import re
from typing import (TYPE_CHECKING, Callable, ClassVar, Dict, FrozenSet, Iterable, NamedTuple, Optional, Sequence, Tuple,
                    Type, TypeVar)

from .versions import Target

if TYPE_CHECKING:  # the table is data a context carries; rule.py sits below the lifecycle layer
    from .lifecycle.table import ApiTable

F = TypeVar("F")


class Diagnostic(NamedTuple):
    line: int  # 1-based
    col: int  # 0-based character column (flake8 adds 1 when printing)
    code: str
    message: str

    def render(self, filename: str) -> str:
        return f"{filename}:{self.line}:{self.col + 1}: {self.code} {self.message}"


class Example(NamedTuple):
    """A code sample: VALID ones must stay silent, INVALID ones must produce exactly ``expect``."""

    source: str
    target: str = "2.9"
    # (line, 1-based column, message) for each expected diagnostic of the owning rule.
    expect: Tuple[Tuple[int, int, str], ...] = ()
    title: str = ""
    # INVALID only: the source after `flake8-xla fix --unsafe-fixes` of this rule; None: no fix
    fixed: Optional[str] = None


class FileContext:
    """One file under analysis. A rule reaches a fact by its type, ``ctx.get(StepRegions)``: the
    fact's ``from_context(ctx)`` builds it on first use and every rule shares it. The context knows no fact
    type, so the facts, the rules and the engine import each other in one direction only."""

    def __init__(self, lines: Sequence[str], tree: ast.AST, filename: str, target: Target,
                 table: ApiTable, sync_functions: FrozenSet[str] = frozenset(), project: object = None) -> None:
        self.lines = lines
        self.tree = tree
        self.filename = filename
        self.target = target
        self.table = table
        # the project's own functions that sync the graph (``sync-functions`` in its configuration),
        # as qualified names: ``mylib.sync`` for ``import mylib; mylib.sync()``
        self.sync_functions = sync_functions
        # the other modules of the project (an analysis.project.Project), or None: this file alone
        self.project = project
        self._facts: Dict[type, object] = {}

    def get(self, kind: Type[F]) -> F:
        fact = self._facts.get(kind)
        if fact is None:
            fact = self._facts[kind] = kind.from_context(self)  # type: ignore[attr-defined]
        return fact  # type: ignore[return-value]

    def column(self, node: ast.AST) -> Tuple[int, int]:
        """(line, 0-based character column) of a node; ast columns count UTF-8 bytes."""
        line, col = node.lineno, node.col_offset
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                col = len(text.encode("utf-8")[:col].decode("utf-8", errors="replace"))
        return line, col


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, e.g. removed-api
    summary: ClassVar[str]
    what_it_does: ClassVar[str]
    why_bad: ClassVar[str]
    fix_safety: ClassVar[str] = ""
    since: ClassVar[str] = "0.1.0"
    references: ClassVar[Tuple[str, ...]] = ()
    valid: ClassVar[Tuple[Example, ...]] = ()
    invalid: ClassVar[Tuple[Example, ...]] = ()
    # Opt-in (XLA9xx heuristics): flake8 runs it only with --enable-extensions=XLA9, the CLI
    # reports it only when a select prefix longer than "XLA" names it.
    off_by_default: ClassVar[bool] = False
    # A migration rule (XLA5xx, "torchtpu") runs only when the target says the code moves there
    # (``--migrate-to torchtpu``), and then the torch_xla rules (migration None) do not run.
    migration: ClassVar[Optional[str]] = None

    def check(self, ctx: FileContext) -> Iterable[Diagnostic]:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_fixable(self, ctx: FileContext) -> Iterable[Tuple[Diagnostic, Optional[Callable]]]:
        """Each diagnostic with a builder of its fix (called with a :class:`flake8_xla.fixing.FixSite`),
        or None when it has no fix. Rules with fixes override this and derive ``check`` from it."""
        return ((d, None) for d in self.check(ctx))

    def diagnostic(self, ctx: FileContext, node: ast.AST, message: str) -> Diagnostic:
        line, col = ctx.column(node)
        return Diagnostic(line, col, self.code, message)

    @classmethod
    def module_name(cls) -> str:
        """Mechanical file name: XLA101 + removed-api -> xla101_removed_api."""
        return f"{cls.code.lower()}_{re.sub(r'[^a-z0-9]+', '_', cls.name)}"
