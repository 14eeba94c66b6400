"""What a rule is: metadata, documentation, examples (which are also its tests) and a check."""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, NamedTuple, Optional, Sequence, Tuple

from .lifecycle import ApiTable
from .semantic import SemanticModel
from .versions import Target


class Diagnostic(NamedTuple):
    line: int  # 1-based
    col: int  # 0-based character column (flake8 adds 1 when printing)
    code: str
    message: str

    def render(self, filename: str) -> str:
        return f"{filename}:{self.line}:{self.col + 1}: {self.code} {self.message}"


@dataclass(frozen=True)
class Example:
    """A code sample: VALID ones must stay silent, INVALID ones must produce exactly ``expect``."""

    source: str
    target: str = "2.9"
    # (line, 1-based column, message) for each expected diagnostic of the owning rule.
    expect: Tuple[Tuple[int, int, str], ...] = ()
    title: str = ""
    # INVALID only: the source after `flake8-xla fix --unsafe-fixes` of this rule; None: no fix
    fixed: Optional[str] = None


class FileContext:
    """One file under analysis. Derived facts are computed on first use and shared by all rules."""

    def __init__(self, lines: Sequence[str], tree: ast.AST, filename: str, target: Target,
                 table: ApiTable) -> None:
        self.lines = lines
        self.tree = tree
        self.filename = filename
        self.target = target
        self.table = table

    @functools.cached_property
    def model(self) -> SemanticModel:
        return SemanticModel(self.tree, self.table.leaf_names, self.table.by_name.__contains__, self.target.version)

    @functools.cached_property
    def lifecycle_uses(self) -> list:
        from .lifecycle_match import match_lifecycle

        return match_lifecycle(self.model, self.table, self.target.version)

    @functools.cached_property
    def flow(self):
        """Flow facts (statement order, wraps, optimizers, bindings), built lazily on first use."""
        from .flow import FlowFacts

        return FlowFacts(self.tree, self.model.references)

    @functools.cached_property
    def index(self):
        """Every node by type and its scope (one walk, shared by the rules that scan for kinds)."""
        from .syntax import NodeIndex

        return NodeIndex(self.tree)

    def nodes_of(self, *kinds: type) -> list:
        return self.index.of(*kinds)

    @functools.cached_property
    def tensors(self):
        """What expressions hold (device tensor, host value, module), for the graph rules."""
        from .tensors import TensorFacts

        return TensorFacts(self.index, self.flow.qualname)

    @functools.cached_property
    def step_regions(self):
        """Where code runs once per step (training and model loops, compiled steps, forward)."""
        from .loops import StepRegions

        return StepRegions(self)

    @functools.cached_property
    def pattern_matches(self):
        """Matches of the ast-grep pattern rules (one parse and one walk for all of them)."""
        from .engine import all_rules
        from .patterns import PatternRule, PatternRun

        return PatternRun(self, [r for r in all_rules() if isinstance(r, PatternRule)])

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
