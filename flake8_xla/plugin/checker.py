"""The flake8 checkers: a thin adapter over :mod:`flake8_xla.engine`."""
from __future__ import annotations

import ast
import functools
from typing import FrozenSet, Iterator, List, Optional, Tuple

from .. import __version__
from ..engine import TOO_DEEP, all_rules, concerns_xla, lint, lint_fixable
from ..engine import too_deep_message as engine_too_deep_message
from ..lifecycle.table import api_table
from ..config import ConfigError, known_releases, parse_sync_functions
from ..versions import check_migration, check_target, forget_project_files, infer_target
from .fix_mark import FIX_REPORTING_FORMATS, marked

# The rule data is loaded on the first file that passes the substring pre-filter (once per
# process), so a run over code that never mentions torch_xla never pays for it (unless
# --xla-assume-torch-xla says every file is torch_xla code).


@functools.lru_cache(maxsize=2)
def _rules(off_by_default: bool) -> tuple:
    return tuple(r for r in all_rules() if bool(r.off_by_default) == off_by_default)


def too_deep_message(exc: BaseException) -> str:
    """What a file nested beyond what Python (or our walks) can recurse into is reported as: an
    E999, as flake8 reports a file it cannot parse, never an XLA000 "please report"."""
    return f"E999 {engine_too_deep_message(exc)}"


# The tree whose E999 was reported last: XlaChecker and XlaOptInChecker see the same tree object
# (one flake8 FileChecker), and the file gets one E999, not one per checker.
_too_deep_tree: Optional[ast.AST] = None


class XlaChecker:
    """The rules that are on by default (entry point ``XLA``)."""

    name = "flake8-xla"
    version = __version__
    off_by_default = False

    target_version: Optional[str] = None
    assume_xla: bool = False
    sync_functions: FrozenSet[str] = frozenset()
    migrate_to: Optional[str] = None
    report_fixes: bool = False  # mark each diagnostic's fix applicability (see fix_mark)

    def __init__(self, tree: ast.AST, lines: List[str], filename: str) -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, parser) -> None:
        parser.add_option(
            "--xla-target-version",
            default=None,
            parse_from_config=True,
            help="torch_xla release to judge the code against, e.g. 2.8 (default: the floor of the "
                 "project's torch_xla requirement, else the installed torch_xla, else the newest known)",
        )
        parser.add_option(
            "--xla-assume-torch-xla",
            action="store_true",
            default=False,
            parse_from_config=True,
            help="lint files that never mention torch_xla too, as torch_xla code (for model code in modules "
                 "that do not import torch_xla); in config: xla-assume-torch-xla = true",
        )
        parser.add_option(
            "--xla-migrate-to",
            default=None,
            parse_from_config=True,
            help="report what the code becomes on the platform it moves to instead of the torch_xla rules: "
                 "torchtpu (the XLA5xx rules); in config: xla-migrate-to = torchtpu",
        )
        parser.add_option(
            "--xla-sync-functions",
            default="",
            parse_from_config=True,
            help="the project's own functions that sync the graph, as qualified names (comma-separated, "
                 "e.g. mylib.sync): a training loop that calls one syncs; in config: xla-sync-functions = mylib.sync",
        )

    @classmethod
    def parse_options(cls, options) -> None:
        value = getattr(options, "xla_target_version", None)
        if value:  # a bad value is a usage error: fail at start-up, not per file; warn for an unknown release
            check_target(value, "--xla-target-version", known_releases())
        cls.target_version = value or None
        cls.assume_xla = bool(getattr(options, "xla_assume_torch_xla", False))
        migrate_to = getattr(options, "xla_migrate_to", None) or None
        cls.migrate_to = check_migration(migrate_to, "--xla-migrate-to") if migrate_to else None
        names = getattr(options, "xla_sync_functions", "") or ""
        try:  # a usage error, raised like --xla-target-version's
            cls.sync_functions = parse_sync_functions(names, "--xla-sync-functions") if names.strip() else frozenset()
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        # parse_options runs before flake8 forks its workers (and again in each spawned worker)
        cls.report_fixes = getattr(options, "format", None) in FIX_REPORTING_FORMATS
        forget_project_files()  # called once per flake8 run, also when flake8 runs in-process

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        global _too_deep_tree
        # the pre-filter here, before _rules(), keeps the rule import lazy; lint() need not repeat it
        source = "".join(self.lines)
        if not concerns_xla(source, self.assume_xla, self.migrate_to):
            return
        try:
            reported = self._fixable(source) if self.report_fixes else lint(
                self.lines, self.tree, self.filename, self.target_version, _rules(self.off_by_default),
                assume_xla=True, sync_functions=self.sync_functions, migrate_to=self.migrate_to)
        except TOO_DEEP as exc:
            # flake8 parsed the file, but it nests deeper than our recursive walks (or ast.unparse)
            # go: a limit of the input, like flake8's own E999 for nesting past the parser's limit
            if self.tree is not _too_deep_tree:
                _too_deep_tree = self.tree
                yield 1, 0, too_deep_message(exc), type(self)
            return
        except Exception as exc:  # never crash flake8: report it where the user will see it
            yield 1, 0, f"XLA000 flake8-xla internal error, please report: {type(exc).__name__}: {exc}", type(self)
            return
        for d in reported:
            yield d.line, d.col, f"{d.code} {marked(d.message, d.applicability)}", type(self)

    def _fixable(self, source: str) -> list:
        """The diagnostics with their fix applicability set."""
        target = infer_target(self.filename, self.target_version, api_table().latest)._replace(
            migrate_to=self.migrate_to)
        pairs, _ = lint_fixable(source, self.tree, self.filename, target, _rules(self.off_by_default),
                                assume_xla=True, sync_functions=self.sync_functions)
        return [d for d, _ in pairs]


class XlaOptInChecker(XlaChecker):
    """The opt-in XLA9xx rules (entry point ``XLA9``): flake8 loads it only with
    ``--enable-extensions=XLA9``. It shares XlaChecker's options, which XlaChecker registers."""

    off_by_default = True

    @classmethod
    def add_options(cls, parser) -> None:
        pass  # registering --xla-target-version twice would be an argparse conflict
