"""The one engine every front-end calls: source in, sorted diagnostics out."""
from __future__ import annotations

import ast
import functools
from typing import Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple

from .fixing import Fix, FixOutcome, FixSite, NoFix, fix_to_fixpoint
from .config import known_releases
from .fixing.lines import LineModel, split_lines
from .noqa import OUR_PREFIX, UNUSED_NOQA, filter_noqa, unused_codes
from .lifecycle.table import api_table
from .analysis.project import Project
from .analysis.semantic import SemanticModel
from .rule import Diagnostic, FileContext, Rule
from .rules import rule_index
from .versions import Target, infer_target
# the pre-filter and the guards live apart so a front-end can ask them without importing the engine
from .prefilter import TOO_DEEP, collector_paused, concerns_xla, might_match, too_deep_message


@functools.lru_cache(maxsize=None)
def all_rules() -> tuple:
    from flake8_xla.rules.registry import RULES  # rule modules load on first use (see rules.rule_index)

    return tuple(cls() for cls in RULES)


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
        try:
            for rule in runs_for(target, all_rules() if rules is None else rules):
                out.extend(rule.check(ctx))
        finally:
            # the facts hold the context that holds them: without this cycle, reference counting frees
            # the file's tree and facts now, instead of the collector tracing them all first (~8% of a run)
            ctx.forget_facts()
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
        try:
            for rule in runs_for(target, all_rules() if rules is None else rules):
                for diagnostic, builder in rule.check_fixable(ctx):
                    fix = builder(site) if builder is not None else None
                    if not isinstance(fix, Fix):  # None or NoFix: a human's job; say why
                        site.no_fix[diagnostic] = fix.reason if isinstance(fix, NoFix) else rule.no_fix_reason()
                        fix = None
                    out.append((with_applicability(diagnostic, fix), fix))
        finally:
            ctx.forget_facts(keep=(SemanticModel,))  # what the site asks after (see lint_tree); it holds no context
    out.sort(key=lambda pair: pair[0])
    return out, site


def with_applicability(diagnostic: Diagnostic, fix: Optional[Fix]) -> Diagnostic:
    """The diagnostic carrying whether its fix is safe (None: it has none)."""
    return diagnostic._replace(applicability=None if fix is None else "safe" if fix.safe else "unsafe")


def fix_source(source: str, filename: str, target: Target, wanted: Callable[[str], bool] = lambda code: True,
               unsafe: bool = False, rules: Optional[Sequence[Rule]] = None, assume_xla: bool = False,
               sync_functions: FrozenSet[str] = frozenset(), project: Optional[Project] = None,
               selected: Optional[Callable[[str], bool]] = None) -> FixOutcome:
    """Apply the fixes of the diagnostics ``wanted`` selects and no `# noqa` suppresses, to a fixpoint.
    ``selected``: the codes the run reports, whose `# noqa` codes XLA001 judges (None: every rule's).

    A source that fails the pre-filter is returned unchanged, unless ``assume_xla``. The pre-filter is
    judged once, on the source as given: a pass that removes the last torch_xla import does not end
    the fixing early."""
    if not concerns_xla(source, assume_xla, target.migrate_to):
        return FixOutcome(source)

    offered: Dict[int, Tuple[Diagnostic, bool]] = {}  # id(fix) -> its diagnostic, found in ``source`` or not

    def candidates(current: str, tree: ast.Module):
        pairs, site = lint_fixable(current, tree, filename, target, rules, assume_xla=True,
                                   sync_functions=sync_functions, project=project)
        reported = set(filter_noqa(split_lines(current), [d for d, _ in pairs]))
        chosen = [(d, fix) for d, fix in pairs
                  if fix is not None and (fix.safe or unsafe) and wanted(d.code) and d in reported]
        if wanted(UNUSED_NOQA) and _judges_noqa(rules):
            chosen += unused_noqa(current, filename, target, [d for d, _ in pairs], selected, rules,
                                  sync_functions, project, tree, reported=True)
        offered.update((id(fix), (d, current is source)) for d, fix in chosen)
        return site, [(d.code, fix) for d, fix in chosen]

    outcome = fix_to_fixpoint(source, candidates)
    outcome.fixed_diagnostics = [offered[id(fix)] for fix in outcome.applied]
    return outcome


def _judges_noqa(rules: Optional[Sequence[Rule]]) -> bool:
    return rules is None or any(rule.code == UNUSED_NOQA for rule in rules)


def unused_noqa(source: str, filename: str, target: Target, diagnostics: Sequence[Diagnostic],
                selected: Optional[Callable[[str], bool]] = None, rules: Optional[Sequence[Rule]] = None,
                sync_functions: FrozenSet[str] = frozenset(), project: Optional[Project] = None,
                tree: Optional[ast.Module] = None, reported: bool = False) -> List[Tuple[Diagnostic, Fix]]:
    """XLA001: the XLA codes of each `# noqa` comment of ``source`` that suppress none of ``diagnostics``
    (the findings of the rules that ran on it for ``target``), with the fix removing them. A code is judged
    only when every rule it names ran and ``selected`` accepts it (None: every rule's), and one a rule
    reports on that line for another release flake8-xla knows is used. ``reported``: only the findings a
    `# noqa` does not suppress (a `# noqa: XLA001` silences it too)."""
    lines = split_lines(source)
    if not any(OUR_PREFIX in line and "noqa" in line.lower() for line in lines):
        return []
    every = all_rules() if rules is None else rules
    # a trace-only rule (run_only) never reports here: its `# noqa` codes are the trace's
    ran = {rule.code: rule for rule in runs_for(target, every) if rule.code != UNUSED_NOQA and not rule.run_only}
    known = [code for code, _, _ in rule_index()]

    def judged(code: str) -> bool:
        named = [k for k in known if k.startswith(code)] if code.startswith(OUR_PREFIX) else []
        return bool(named) and all(k in ran and (selected is None or selected(k)) for k in named)

    unused = unused_codes(lines, diagnostics, judged)
    if not unused:
        return []
    recheck = {code for _, codes in unused for code in codes}
    again = [rule for code, rule in ran.items() if any(code.startswith(c) for c in recheck)]
    if tree is None:
        try:
            tree = ast.parse(source, filename)
        except (SyntaxError, ValueError):
            return []
    elsewhere = [d for release in known_releases() if release != target.version
                 for d in lint_tree(lines, tree, filename, target._replace(version=release), again,
                                    sync_functions, project)]
    unused = unused_codes(lines, list(diagnostics) + elsewhere, judged)
    unit = next(rule for rule in all_rules() if rule.code == UNUSED_NOQA)
    model = LineModel(source)
    fixes = [(unit.report(directive, codes), unit.fix(model, directive, codes)) for directive, codes in unused]
    found = [(with_applicability(d, fix), fix) for d, fix in fixes]
    if reported:
        kept = set(filter_noqa(lines, [d for d, _ in found]))
        found = [(d, fix) for d, fix in found if d in kept]
    return found


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
        if diagnostic.code == UNUSED_NOQA:  # judged as by a run that selects every rule
            pairs = unused_noqa(current, filename, target, [d for d, _ in pairs], None, None, sync_functions,
                                project, tree)
        chosen = next((fix for d, fix in pairs if d == diagnostic and fix is not None), None)
        return site, [] if chosen is None else [(diagnostic.code, chosen)]

    return fix_to_fixpoint(source, candidates)


def lint_source(source: str, filename: str = "<string>", target: Optional[str] = "2.9",
                assume_xla: bool = False, sync_functions: FrozenSet[str] = frozenset(),
                migrate_to: Optional[str] = None) -> List[Diagnostic]:
    """Convenience for tests and tools: lint a source string against an explicit target, every rule
    selected (XLA001 included; no `# noqa` is applied)."""
    found = lint(split_lines(source), None, filename, target, assume_xla=assume_xla, sync_functions=sync_functions,
                 migrate_to=migrate_to)
    if "noqa" not in source or not concerns_xla(source, assume_xla, migrate_to):
        return found
    resolved = infer_target(filename, target, api_table().latest)._replace(migrate_to=migrate_to)
    unused = [d for d, _ in unused_noqa(source, filename, resolved, found, sync_functions=sync_functions)]
    return sorted(found + unused) if unused else found


__all__ = ["TOO_DEEP", "Diagnostic", "all_rules", "concerns_xla", "fix_one", "fix_source", "lint", "lint_fixable",
           "lint_source", "lint_tree", "might_match", "rule_index", "too_deep_message", "unused_noqa"]
