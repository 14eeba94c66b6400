"""What a run says about itself on stderr: the closing line of check and fix, --statistics,
-v notes, and the settings it decided on (-v, --show-settings)."""
from __future__ import annotations

import os
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

from ..config import Settings
from ..output.formats import Finding
from ..rules import rule_index
from ..lifecycle.table import latest_release
from ..versions import Target, infer_target, project_root
from .discovery import EXCLUDED_ANYWHERE, EXCLUDED_AT_ROOT
from ..output.terminal import display_name
from ..session.sources import format_size
from ..session.running import FileResult


def plural(n: int, word: str, words: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else words or word + 's'}"


def statistics(findings: Sequence[Finding], output_format: str = "text") -> str:
    """--statistics: the count per code, instead of the findings (ruff's table); a JSON list of
    ``{code, name, count, fixable}`` (``fixable``: how many of them) for ``--format json``."""
    counts = Counter(f.diagnostic.code for f in findings)
    fixable = Counter(f.diagnostic.code for f in findings if f.fixable)
    names = {code: name for code, name, _ in rule_index()}
    if output_format == "json":
        import json  # --format json only

        return json.dumps([{"code": code, "name": names.get(code), "count": n, "fixable": fixable[code]}
                           for code, n in sorted(counts.items())], indent=2) + "\n"
    return "".join(f"{n:<6}{code} {names.get(code, '')}\n" for code, n in sorted(counts.items()))


def fix_command(migrate_to: Optional[str] = None, unsafe: bool = False) -> str:
    """The fix run that fixes what a check run with these settings marks fixable: the same migration
    (its rules fix nothing without it) and the same fix safety."""
    return "flake8-xla fix" + (f" --migrate-to {migrate_to}" if migrate_to else "") + \
        (" --unsafe-fixes" if unsafe else "")


def check_note(findings: Sequence[Finding], results: Sequence[FileResult], command: str = "flake8-xla fix"
               ) -> Optional[str]:
    """``command``: the fix_command() of the run."""
    if not findings:
        return None
    fixable = sum(f.fixable for f in findings)
    unsafe = sum(r.unsafe_available for r in results)
    note = f"Found {plural(len(findings), 'diagnostic')}"
    if fixable:
        note += f"; {fixable} fixable with `{command}` (marked [*])"
    if unsafe:  # never with --unsafe-fixes, which counts them fixable
        note += f"; {unsafe} more with `{command} --unsafe-fixes`"
    return note + "."


def fix_summary(results: Sequence[FileResult], diff: bool) -> str:
    remaining = [f for r in results for f in r.findings]
    fixed = sum((r.fixed for r in results), Counter())
    changed = sum(1 for r in results if r.fixed)
    total = sum(fixed.values())
    summary = f"{'Would fix' if diff else 'Fixed'} {plural(total, 'issue')} in {plural(changed, 'file')}"
    if fixed:
        summary += " (" + ", ".join(f"{code} x{n}" for code, n in sorted(fixed.items())) + ")"
    # three groups that never overlap: no fix at all, only an unsafe fix (not asked for), and a
    # safe fix that was declined (its reason is printed after the summary)
    unsafe = sum(r.unsafe_available for r in results)
    if not diff:
        needs_human = sum(1 for f in remaining if not f.fixable) - unsafe
        if needs_human:
            summary += f"; {needs_human} {'needs' if needs_human == 1 else 'need'} a human (listed above)"
        declined = sum(1 for f in remaining if f.fixable)
        if declined:
            summary += f"; {declined} not applied (the reason follows)"
    if unsafe:
        summary += f"; {unsafe} more fixable with --unsafe-fixes"
    return summary + "."


def settings_report(settings: Settings, paths: Sequence[str], files: Sequence[str], *, respect_gitignore: bool,
                    max_file_size: int, stdin_filename: Optional[str] = None) -> List[str]:
    """One line per decision: config file, project root, target (per source it came from), codes,
    excludes, limits and the number of files."""
    def listed(values: Sequence[str]) -> str:
        return ", ".join(values) if values else "(none)"

    lines = [f"config file: {settings.source or '(none: defaults)'}",
             f"project root (excludes and per-file-ignores are relative to it): "
             f"{display_name(os.path.abspath(settings.base_dir))}"]
    for root, target, count in _targets(settings, paths, files, stdin_filename):
        lines.append(f"target for {display_name(root)}: {target} ({plural(count, 'file')})")
    lines += [f"select: {listed(settings.select) if settings.select is not None else 'XLA (default)'}",
              f"extend-select: {listed(settings.extend_select)}",
              f"ignore: {listed(settings.ignore)}",
              "per-file-ignores: " + listed([f"{glob}:{','.join(codes)}" for glob, codes in settings.per_file_ignores])]
    if settings.exclude is None:
        lines.append(f"exclude: default: {', '.join(EXCLUDED_ANYWHERE)} (at any depth); "
                     f"{', '.join(EXCLUDED_AT_ROOT)} (at the project root only)")
    else:
        lines.append(f"exclude: {listed(settings.exclude)}")
    assume = settings.assume_torch_xla
    lines += [f"extend-exclude: {listed(settings.extend_exclude)}",
              f"respect-gitignore: {'true' if respect_gitignore else 'false'}",
              f"assume-torch-xla: {listed(assume) if not isinstance(assume, bool) else str(assume).lower()}",
              f"sync-functions: {listed(tuple(sorted(settings.sync_functions)))}",
              f"max-file-size: {format_size(max_file_size)}",
              f"files: {len(files)}"]
    return lines


def _targets(settings: Settings, paths: Sequence[str], files: Sequence[str],
             stdin_filename: Optional[str]) -> List[Tuple[str, str, int]]:
    """(project root, target and where it came from, number of files) for each project root met,
    in order of first appearance. Without files, the target of each path given."""
    return [(root, f"torch_xla {target.version}, from {target.origin or target.source}", count)
            for root, target, count in _targets_by_root(settings, files or paths, stdin_filename, bool(files))]


def _targets_by_root(settings: Settings, paths: Sequence[str], stdin_filename: Optional[str],
                     count: bool = True) -> List[Tuple[str, Target, int]]:
    found: Dict[Tuple[str, Target], int] = {}
    by_directory: Dict[str, Tuple[str, Target]] = {}  # a file's target is its directory's: one look-up each
    for path in paths:
        name = (stdin_filename or "stdin") if path == "-" else path
        directory = os.path.dirname(name)
        key = by_directory.get(directory)
        if key is None:
            target = infer_target(name, settings.target_version, latest_release(), settings.target_origin)
            key = by_directory[directory] = (project_root(name), target)
        found[key] = found.get(key, 0) + (1 if count else 0)
    return [(root, target, n) for (root, target), n in found.items()]


def inferred_targets(settings: Settings, files: Sequence[str], stdin_filename: Optional[str] = None) -> List[str]:
    """The closing lines of check and fix that say which torch_xla release the files were judged
    against when nobody chose it (a pin, the installed wheel, the newest known): one per project
    root met, or one ``target:`` line when the run has a single one. None when the user chose it, and
    under ``--migrate-to``, whose rules judge the code for the platform the user named instead."""
    if settings.target_version or settings.migrate_to or not files:
        return []
    found = _targets_by_root(settings, files, stdin_filename)
    return [f"target{'' if len(found) == 1 else ' for ' + display_name(root)}: torch_xla {target.version} "
            f"(from {target.origin or target.source}; set --target-version to choose)" for root, target, _ in found]
