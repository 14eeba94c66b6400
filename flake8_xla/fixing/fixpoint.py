"""Fixes applied to a fixpoint.

Each pass applies the non-overlapping fixes offered for the current source, adds the imports they
need, removes torch_xla imports the pass left unused, and re-parses. A pass whose result does not
parse is never kept: the fixes that break it are declined one by one and the others still apply.
"""
from __future__ import annotations

import ast
import functools
from collections import Counter
from typing import Callable, Dict, Hashable, List, Optional, Sequence, Set, Tuple, Union

from ..analysis import syntax
from .lines import LineModel
from .edits import Fix, NoFix, apply_edits, choose, has_comment, removal_edits
from .imports import Importer
from ..analysis.semantic import SemanticModel

MAX_PASSES = 10


class FixSite:
    """What fix builders need about the file being fixed (one per pass)."""

    def __init__(self, source: str, tree: ast.Module, target, ctx) -> None:
        self.source = source
        self.tree = tree
        self.target = target  # the torch_xla Version the fixed code must run on
        self.ctx = ctx  # the FileContext (semantic model) of this source
        # the diagnostics that got no fix, and why (`fix` says it under each one a human must fix)
        self.no_fix: Dict[Hashable, str] = {}  # keyed by Diagnostic

    # built on first use: most files have no diagnostic, and so never need them
    @functools.cached_property
    def lines(self) -> LineModel:
        return LineModel(self.source)

    @functools.cached_property
    def importer(self) -> Importer:
        return Importer(self.tree, self.lines, self.parents, self.references)

    @property
    def references(self) -> Sequence:
        return self.ctx.get(SemanticModel).references

    @functools.cached_property
    def qualnames(self) -> Dict[int, str]:
        """id(node) -> the qualified name a reference there resolves to."""
        return {id(ref.node): ref.qualname for ref in self.references}

    @functools.cached_property
    def parents(self) -> Dict[int, ast.AST]:
        return syntax.parents(self.tree)


FixBuilder = Callable[[FixSite], Union[Fix, NoFix, None]]


# --- imports that a fix left unused --------------------------------------------------------------

def _import_bindings(tree: ast.AST) -> List[Tuple[ast.stmt, ast.alias, str]]:
    """(statement, alias, bound name) of every aliased or from-import of a torch_xla module."""
    out = []
    for node in syntax.walk([tree]):
        if type(node) is ast.Import:
            out.extend((node, a, a.asname) for a in node.names if a.asname and a.name.startswith("torch_xla"))
        elif type(node) is ast.ImportFrom and (node.module or "").startswith("torch_xla") and not node.level:
            out.extend((node, a, a.asname or a.name) for a in node.names if a.name != "*")
    return out


def _parse(source: str) -> Optional[ast.Module]:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def remove_newly_unused(before: ast.AST, source: str) -> Tuple[str, Optional[ast.Module]]:
    """Remove torch_xla imports that were used in ``before`` and are unused in ``source``; an import
    carrying a comment (``# noqa: F401``, ``# keep: side effects``) or in a ``try`` stays. Returns the source and its
    tree (None when it does not parse)."""
    tree = _parse(source)
    if tree is None:
        return source, None
    used_before = syntax.names_used(before)
    used_now = syntax.names_used(tree)
    lines = LineModel(source)
    parents = syntax.parents(tree)
    doomed: Dict[int, Tuple[ast.stmt, List[ast.alias]]] = {}
    for stmt, alias, name in _import_bindings(tree):
        # an import in a try is an availability probe: its success is what the code asks, used or not
        if used_before[name] and not used_now[name] and not has_comment(lines, stmt) \
                and type(parents.get(id(stmt))) not in syntax.TRY_NODES:
            doomed.setdefault(id(stmt), (stmt, []))[1].append(alias)
    edits = removal_edits(lines, list(doomed.values()), parents) if doomed else None
    if not edits:
        return source, tree
    new = apply_edits(source, edits)
    return new, _parse(new)


# --- the loop ------------------------------------------------------------------------------------

class FixOutcome:
    """What the fix loop made of a source; filled in pass by pass."""

    __slots__ = ("source", "fixed", "passes", "error", "notes", "applied", "fixed_diagnostics")

    def __init__(self, source: str) -> None:
        self.source = source
        self.fixed: Counter = Counter()  # code -> fixes applied
        self.passes = 0
        self.error: Optional[str] = None  # why some fixes were not applied (the rest were)
        self.notes: List[str] = []  # what applied fixes still ask of the user
        self.applied: List[Fix] = []  # the fixes applied, pass by pass (an editor names its quick fix by them)
        # what those fixes fixed (--show-fixes), filled in by the caller that knows the diagnostics:
        # (diagnostic, whether it was found in the source as given, so its position is in it)
        self.fixed_diagnostics: List[Tuple[object, bool]] = []


Candidate = Tuple[str, Fix]  # (code, fix)


def _apply(site: FixSite, source: str, tree: ast.Module, fixes: Sequence[Fix]
           ) -> Optional[Tuple[str, ast.Module]]:
    """The source with ``fixes`` and their imports applied, and its tree; None when it would not parse."""
    edits = [e for fix in fixes for e in fix.edits]
    planned = [p for fix in fixes for p in fix.imports]
    if planned:
        edits += site.importer.import_edits(planned)
    new, new_tree = remove_newly_unused(tree, apply_edits(source, edits))
    return None if new_tree is None else (new, new_tree)


def fix_to_fixpoint(source: str, candidates_for: Callable[[str, ast.Module], Tuple[FixSite, Sequence[Candidate]]]
                    ) -> FixOutcome:
    """Apply the fixes ``candidates_for(source, tree)`` offers until none is left or MAX_PASSES."""
    outcome = FixOutcome(source)
    declined: Set[Tuple] = set()
    invalid: List[str] = []  # the declined fixes, named
    tree = ast.parse(source)
    capped = False
    for _ in range(MAX_PASSES * 2):
        if outcome.passes >= MAX_PASSES:
            capped = True
            break
        current = outcome.source
        site, built = candidates_for(current, tree)
        built = [(code, fix) for code, fix in built if fix.identity(current) not in declined]
        chosen = choose([fix for _, fix in built])
        if not chosen:
            break
        applied = _apply(site, current, tree, chosen)
        if applied is None:
            # decline what breaks the code alone; if each is fine alone, take only the first this pass
            bad = [fix for fix in chosen if _apply(site, current, tree, [fix]) is None]
            for fix in bad:
                declined.add(fix.identity(current))
                code = next(c for c, f in built if f is fix)
                invalid.append(f"{code} ({fix.title}) at line {site.lines.lineno(fix.span()[0])}")
            if bad:
                continue
            chosen = chosen[:1]
            applied = _apply(site, current, tree, chosen)
            if applied is None:  # cannot happen: it was fine alone
                break
        chosen_ids = {id(f) for f in chosen}
        outcome.source, tree = applied
        outcome.passes += 1
        outcome.fixed.update(code for code, fix in built if id(fix) in chosen_ids)
        outcome.notes.extend(fix.note for fix in chosen if fix.note and fix.note not in outcome.notes)
        outcome.applied.extend(chosen)
    parts = [f"still changing after {MAX_PASSES} passes; stopped"] if capped else []
    if invalid:
        parts.append("not applied, it would produce invalid code: " + "; ".join(invalid))
    outcome.error = "; ".join(parts) or None
    return outcome


__all__ = ["FixBuilder", "FixOutcome", "FixSite", "MAX_PASSES", "fix_to_fixpoint", "remove_newly_unused"]
