"""What a rule is: metadata, documentation, examples (which are also its tests) and a check."""
from __future__ import annotations

import re
from typing import (TYPE_CHECKING, Callable, ClassVar, Dict, FrozenSet, Iterable, Literal, NamedTuple, Optional,
                    Sequence, Tuple, Type, TypeVar)

from .versions import Target

if TYPE_CHECKING:  # the table is data a context carries; rule.py sits below the lifecycle layer
    import ast  # annotations only: a run over cached files (which needs Diagnostic) never loads the ast module

    from .lifecycle.table import ApiTable

F = TypeVar("F")


# How bad a diagnostic is, in SARIF's words (GitHub annotations say "notice" for a note):
# error: the code fails on the target (it raises, or cannot be imported); warning: a problem to fix;
# note: an opt-in heuristic's hint, which may well be fine.
Level = Literal["error", "warning", "note"]
LEVELS: Tuple[Level, ...] = ("error", "warning", "note")
# Whether `flake8-xla fix` fixes a diagnostic: "safe" (by default), "unsafe" (with --unsafe-fixes:
# the rewrite may change behaviour); a diagnostic without a fix has None.
Applicability = Literal["safe", "unsafe"]
APPLICABILITIES: Tuple[Applicability, ...] = ("safe", "unsafe")


class Diagnostic(NamedTuple):
    line: int  # 1-based
    col: int  # 0-based character column (flake8 adds 1 when printing)
    code: str
    message: str
    # where the reported node ends: 1-based line, 0-based character column just past its last
    # character; None when unknown (flake8's own errors, file-level errors)
    end_line: Optional[int] = None
    end_col: Optional[int] = None
    level: Optional[Level] = None  # this diagnostic's own level; None: its rule's
    # the detail behind the one-clause message: why, measured facts, caveats (shown by --format full,
    # --show-source, the editor's hover, JSON and SARIF); None: the message says it all
    help: Optional[str] = None
    # what a tool built on the findings reads instead of parsing the message (migrate-report reads the
    # XLA5xx rules': flake8_xla.migration.facts.MigrationFacts); never shown, and not kept by the result cache
    data: Optional[tuple] = None
    # whether its fix is safe or unsafe, set where the fix is built (engine.lint_fixable); None: no fix,
    # or a run that built none (engine.lint)
    applicability: Optional[Applicability] = None

    # A diagnostic is what is said where: line, column, code and message. The extent, the level and
    # the help ride along, so one rebuilt from those four (by flake8, an editor, a test) equals the engine's.
    def __eq__(self, other: object) -> bool:
        return self[:4] == other[:4] if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other: object) -> bool:
        return self[:4] != other[:4] if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(self[:4])

    def __lt__(self, other: tuple) -> bool:
        return self[:4] < other[:4]

    def __le__(self, other: tuple) -> bool:
        return self[:4] <= other[:4]

    def __gt__(self, other: tuple) -> bool:
        return self[:4] > other[:4]

    def __ge__(self, other: tuple) -> bool:
        return self[:4] >= other[:4]

    def render(self, filename: str) -> str:
        return f"{filename}:{self.line}:{self.col + 1}: {self.code} {self.message}"


class Example(NamedTuple):
    """A code sample: VALID ones must stay silent, INVALID ones must produce exactly ``expect``."""

    source: str
    target: str = "2.9"
    # (line, 1-based column, message) for each expected diagnostic of the owning rule, or
    # (line, 1-based column, message, help) to pin its help too (None: it has none)
    expect: Tuple[Tuple, ...] = ()
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

    def forget_facts(self, keep: Tuple[type, ...] = ()) -> None:
        """Drop the facts built so far but those of the ``keep`` types (a later ``get`` builds them
        again). Facts keep their context, so a context and its facts form a cycle that only the garbage
        collector frees, after tracing every node of the file: a lint that is done with the context
        drops them instead. A kept fact must not hold the context."""
        self._facts = {kind: fact for kind, fact in self._facts.items() if kind in keep}

    def column(self, node: ast.AST) -> Tuple[int, int]:
        """(line, 0-based character column) of a node; ast columns count UTF-8 bytes."""
        return node.lineno, character_column(self.lines, node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> Tuple[Optional[int], Optional[int]]:
        """(line, 0-based character column just past it) where a node ends; (None, None) when the node has no end."""
        line, col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if line is None or col is None:
            return None, None
        return line, character_column(self.lines, line, col)


def character_column(lines: Sequence[str], line: int, byte_col: int) -> int:
    """The character column of an ast (UTF-8 byte) column on a 1-based line."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return byte_col if text.isascii() else len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


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
    # Opt-in (XLA9xx heuristics, XLA001 unused-noqa): flake8 runs an XLA9xx only with
    # --enable-extensions=XLA9, the CLI reports one only when a select prefix longer than "XLA" names it.
    off_by_default: ClassVar[bool] = False
    # A migration rule (XLA5xx, "torchtpu") runs only when the target says the code moves there
    # (``--migrate-to torchtpu``), and then the torch_xla rules (migration None) do not run.
    migration: ClassVar[Optional[str]] = None
    # How bad its diagnostics are (SARIF level, GitHub annotation, JSON severity) unless one says
    # otherwise (Diagnostic.level): a lifecycle use that raises on the target is an error.
    level: ClassVar[Level] = "warning"
    # Reported only by the run-time trace (``python -m xla_compat.trace``): the linter never reports
    # it, and its examples are programs whose ``expect`` is what the trace of them reports.
    run_only: ClassVar[bool] = False

    def check(self, ctx: FileContext) -> Iterable[Diagnostic]:
        if self.run_only:
            return ()
        raise NotImplementedError  # pragma: no cover - abstract

    def check_fixable(self, ctx: FileContext) -> Iterable[Tuple[Diagnostic, Optional[Callable]]]:
        """Each diagnostic with a builder of its fix (called with a :class:`flake8_xla.fixing.FixSite`),
        or None when it has no fix. Rules with fixes override this and derive ``check`` from it."""
        return ((d, None) for d in self.check(ctx))

    def diagnostic(self, ctx: FileContext, node: ast.AST, message: str, level: Optional[Level] = None,
                   help: Optional[str] = None) -> Diagnostic:
        """A diagnostic spanning ``node``; ``level``: this one's, when it is not the rule's; ``help``:
        the detail behind the one-clause ``message``."""
        line, col = ctx.column(node)
        end_line, end_col = ctx.end(node)
        return Diagnostic(line, col, self.code, message, end_line, end_col, None if level == self.level else level,
                          help or None)

    @classmethod
    def no_fix_reason(cls) -> str:
        """Why a diagnostic of this rule got no fix, when its builder gave no reason: the rule's fix
        safety, without the "No automatic fix:" such a text starts with."""
        return re.sub(r"^No (?:automatic )?fix[:;.,]?\s*", "", cls.fix_safety).strip() or "this rule has no automatic fix"

    @classmethod
    def module_name(cls) -> str:
        """Mechanical file name: XLA101 + removed-api -> xla101_removed_api."""
        return f"{cls.code.lower()}_{re.sub(r'[^a-z0-9]+', '_', cls.name)}"
