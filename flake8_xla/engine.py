"""The one engine every front-end calls: source in, sorted diagnostics out."""
from __future__ import annotations

import ast
import contextlib
import functools
import gc
import re
from typing import Callable, FrozenSet, Iterator, List, Optional, Sequence, Tuple

from .fixing import Fix, FixOutcome, FixSite, NoFix, fix_to_fixpoint
from .fixing.lines import split_lines
from .noqa import filter_noqa
from .lifecycle.table import api_table
from .analysis.project import Project
from .rule import Diagnostic, FileContext, Rule
from .versions import Target, infer_target

# A file that matches none of these cannot contain anything a rule reports, unless the project
# says it runs on XLA anyway (``assume_xla``: model code in modules that never import torch_xla).
_PREFILTER = re.compile(r"torch_xla|XRT_|XLA_|GPU_NUM_DEVICES|PJRT_DEVICE")
# A Lightning script that trains on TPUs (``Trainer(accelerator="tpu")``) may never name torch_xla, nor
# a module that takes ``xm`` from ``from transformers.trainer import *``. Asked only after a substring
# test: alternatives in the one pattern above doubled the regex time of a run over cached files.
_TPU_TRAINER = re.compile(r"accelerator\s*=\s*[\"']tpu[\"']|tpu_cores")
_STAR_TRAINER = "from transformers.trainer import *"
# TorchTPU code (torch.tpu, torch_tpu, device "tpu", TORCH_TPU_* variables) under --migrate-to torchtpu
# what code moving to TorchTPU may hold without naming torch_xla: TPU words, the "xla" device by name
_TPU_WORDS = re.compile(r"tpu|TPU|[\"']xla[\"':]")


@functools.lru_cache(maxsize=None)
def all_rules() -> tuple:
    from flake8_xla.rules import RULES  # rule modules load on first use (see rules.rule_index)

    return tuple(cls() for cls in RULES)


def rule_index() -> tuple:
    """(code, name, off by default) of every rule, without importing one."""
    from flake8_xla.rules import rule_index as index

    return index()


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off while one file is analysed: the analysis allocates many
    short-lived objects that reference counting frees, and each collection it would trigger
    scans every object the host process holds (flake8's trees and tokens too). Restored after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Input nested deeper than Python's parser or our walks can recurse: reported like a file that
# does not parse (E999), never as an internal error.
TOO_DEEP = (RecursionError, MemoryError)


def too_deep_message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: too deeply nested to analyse"


def might_match(source: str) -> bool:
    return _PREFILTER.search(source) is not None or _STAR_TRAINER in source or \
        (("accelerator" in source or "tpu_cores" in source) and _TPU_TRAINER.search(source) is not None)


def concerns_xla(source: str, assume_xla: bool = False, migrate_to: Optional[str] = None) -> bool:
    """The pre-filter, the one place it is decided: whether a source can hold anything a rule
    reports (it mentions torch_xla), or the project says it runs on XLA anyway (``assume_xla``); when
    the code moves to TorchTPU (``migrate_to``), also code that already speaks of the TPU.
    Front-ends ask once per file and then call the engine with ``assume_xla=True``."""
    return assume_xla or might_match(source) or (migrate_to is not None and _TPU_WORDS.search(source) is not None)


def lint(lines: Sequence[str], tree: Optional[ast.AST] = None, filename: str = "<stdin>",
         target: Optional[str] = None, rules: Optional[Sequence[Rule]] = None,
         assume_xla: bool = False, sync_functions: FrozenSet[str] = frozenset(),
         migrate_to: Optional[str] = None) -> List[Diagnostic]:
    """Lint one file given as lines (as flake8 provides them) and, optionally, its parsed tree.

    ``assume_xla``: lint the file even when its text never mentions torch_xla (skip the pre-filter).
    ``sync_functions``: the project's own functions that sync the graph (qualified names).
    ``migrate_to``: where the code moves ("torchtpu" runs the XLA5xx rules).
    Raises SyntaxError only when ``tree`` is None and the source does not parse.
    """
    if not concerns_xla("".join(lines), assume_xla, migrate_to):
        return []
    if tree is None:
        tree = ast.parse("".join(lines), filename)
    table = api_table()
    resolved = infer_target(filename, target, table.latest)._replace(migrate_to=migrate_to)
    return lint_tree(lines, tree, filename, resolved, rules, sync_functions)


def runs_for(target: Target, rules: Sequence[Rule]) -> Iterator[Rule]:
    """The rules that speak for ``target``: when the code moves (``--migrate-to torchtpu``) only that
    migration's rules (the others' advice names torch_xla APIs); otherwise only the torch_xla rules."""
    return (rule for rule in rules if rule.migration == target.migrate_to)


def lint_tree(lines: Sequence[str], tree: ast.AST, filename: str, target: Target,
              rules: Optional[Sequence[Rule]] = None,
              sync_functions: FrozenSet[str] = frozenset(), project: Optional[Project] = None) -> List[Diagnostic]:
    ctx = FileContext(lines, tree, filename, target, api_table(), sync_functions, project)
    out: List[Diagnostic] = []
    with collector_paused():
        for rule in runs_for(target, all_rules() if rules is None else rules):
            out.extend(rule.check(ctx))
    out.sort()
    return out


def lint_fixable(source: str, tree: ast.Module, filename: str, target: Target,
                 rules: Optional[Sequence[Rule]] = None, assume_xla: bool = False,
                 sync_functions: FrozenSet[str] = frozenset(), project: Optional[Project] = None
                 ) -> Tuple[List[Tuple[Diagnostic, Optional[Fix]]], FixSite]:
    """Every diagnostic with its fix (None when it has none), sorted, and the site the fixes were
    built on (its importer knows which imports they need). Nothing for a file that fails the
    pre-filter, unless ``assume_xla``. ``project``: the other modules of the file's project (the
    CLI's); without it the file is analysed alone."""
    ctx = FileContext(split_lines(source), tree, filename, target, api_table(), sync_functions, project)
    site = FixSite(source, tree, target.version, ctx)
    out: List[Tuple[Diagnostic, Optional[Fix]]] = []
    if not concerns_xla(source, assume_xla, target.migrate_to):
        return out, site
    with collector_paused():
        for rule in runs_for(target, all_rules() if rules is None else rules):
            for diagnostic, builder in rule.check_fixable(ctx):
                fix = builder(site) if builder is not None else None
                if not isinstance(fix, Fix):  # None or NoFix: a human's job; say why
                    site.no_fix[diagnostic] = fix.reason if isinstance(fix, NoFix) else rule.no_fix_reason()
                    fix = None
                out.append((diagnostic, fix))
    out.sort(key=lambda pair: pair[0])
    return out, site


def fix_source(source: str, filename: str, target: Target, wanted: Callable[[str], bool] = lambda code: True,
               unsafe: bool = False, rules: Optional[Sequence[Rule]] = None, assume_xla: bool = False,
               sync_functions: FrozenSet[str] = frozenset(), project: Optional[Project] = None) -> FixOutcome:
    """Apply the fixes of the diagnostics ``wanted`` selects and no `# noqa` suppresses, to a fixpoint.

    A source that fails the pre-filter is returned unchanged, unless ``assume_xla``. The pre-filter is
    judged once, on the source as given: a pass that removes the last torch_xla import does not end
    the fixing early."""
    if not concerns_xla(source, assume_xla, target.migrate_to):
        return FixOutcome(source)

    def candidates(current: str, tree: ast.Module):
        pairs, site = lint_fixable(current, tree, filename, target, rules, assume_xla=True,
                                   sync_functions=sync_functions, project=project)
        reported = set(filter_noqa(split_lines(current), [d for d, _ in pairs]))
        return site, [(d.code, fix) for d, fix in pairs
                      if fix is not None and (fix.safe or unsafe) and wanted(d.code) and d in reported]

    return fix_to_fixpoint(source, candidates)


def fix_one(source: str, filename: str, target: Target, diagnostic: Diagnostic,
            sync_functions: FrozenSet[str] = frozenset(), project: Optional[Project] = None) -> FixOutcome:
    """Apply the fix of one diagnostic (as :func:`lint_fixable` reports it), safe or not, with the
    imports it needs: one pass, declined like any fix when the result would not parse. An editor's
    quick fix; ``outcome.fixed`` is empty when the diagnostic has no fix (any more)."""
    def candidates(current: str, tree: ast.Module):
        if current != source:  # one pass: the loop asks again after applying it, and gets nothing
            return None, []
        pairs, site = lint_fixable(current, tree, filename, target, assume_xla=True, sync_functions=sync_functions,
                                   project=project)
        chosen = next((fix for d, fix in pairs if d == diagnostic and fix is not None), None)
        return site, [] if chosen is None else [(diagnostic.code, chosen)]

    return fix_to_fixpoint(source, candidates)


def lint_source(source: str, filename: str = "<string>", target: Optional[str] = "2.9",
                assume_xla: bool = False, sync_functions: FrozenSet[str] = frozenset(),
                migrate_to: Optional[str] = None) -> List[Diagnostic]:
    """Convenience for tests and tools: lint a source string against an explicit target."""
    return lint(split_lines(source), None, filename, target, assume_xla=assume_xla, sync_functions=sync_functions,
                migrate_to=migrate_to)


__all__ = ["TOO_DEEP", "Diagnostic", "all_rules", "concerns_xla", "fix_one", "fix_source", "lint", "lint_fixable",
           "lint_source", "lint_tree", "might_match", "rule_index", "too_deep_message"]
