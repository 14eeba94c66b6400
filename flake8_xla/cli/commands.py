"""The commands: ``flake8-xla check|fix|explain|rules|clean|server``, their options, and ``main``.

Exit status: 0 clean, 1 diagnostics remain, 2 usage or configuration error (one line on stderr).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, NoReturn, Optional, Sequence, Tuple

from .. import __version__
from ..session.cache import CACHE_DIR_NAME, ResultCache, resolve_cache_dir
from ..config import (FORMATS, ConfigError, PerFileIgnores, Settings, check_target_version, discover, load_file, merge,
                      parse_per_file_ignores, parse_sync_functions)
from ..documents import is_document
from ..output.formats import RENDERERS, TEXT_FORMATS, docs_url, render_text
from ..lifecycle.table import api_table
from ..session.selection import CodeSelector, build_selector
from ..versions import MIGRATIONS, forget_project_files
from .discovery import FileFinder
from .file_codes import FILE_CODES, explain_file_code
from .errors import UsageError
from ..output.terminal import COLOR_CHOICES, display_name, emit, printable, wants_color
from ..session.sources import DEFAULT_MAX_FILE_SIZE, decode_source, format_size, parse_size, read_file_bytes
from ..session.running import FileResult, Interrupted, Job, run_file, run_files
from .summary import check_note, fix_command, fix_summary, inferred_targets, plural, settings_report, statistics
from .trace_merge import merge as merge_trace, read_trace, summary as trace_summary


class ArgumentParser(argparse.ArgumentParser):
    """A usage mistake is one line on stderr and exit status 2, like every other error here."""

    def error(self, message: str) -> NoReturn:
        print(f"flake8-xla: error: {message}", file=sys.stderr)
        sys.exit(2)

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse asks shutil for the width of every formatter it builds (one per option): importing
        # shutil is ~2.5 ms of each start, so the width is found here the way shutil finds it
        return self.formatter_class(prog=self.prog, width=_terminal_width() - 2)


def _terminal_width() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
        if columns > 0:
            return columns
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def _jobs(text: str) -> int:
    """-j N, or -j auto (flake8's spelling): one worker per CPU."""
    if text.strip().lower() == "auto":
        return os.cpu_count() or 1
    return _positive_int(text, " or auto")


def _positive_int(text: str, what: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number{what}, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories (- for stdin)")
    parser.add_argument("--select", help="comma-separated codes or prefixes to report (replaces the default set)")
    parser.add_argument("--extend-select", help="codes or prefixes to report in addition (e.g. XLA9 opt-in rules)")
    parser.add_argument("--ignore", help="codes or prefixes not to report")
    parser.add_argument("--per-file-ignores", help="GLOB:CODES pairs, as in flake8")
    parser.add_argument("--exclude", help="replace the default excludes (comma-separated glob patterns)")
    parser.add_argument("--extend-exclude", help="more glob patterns to exclude")
    parser.add_argument("--force-exclude", action="store_true", help="apply excludes to paths given explicitly too")
    parser.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction, default=True,
                        help="skip what the git repository's .gitignore files ignore (default: yes)")
    parser.add_argument("--xla-target-version", "--target-version", dest="target_version", metavar="VERSION",
                        help="torch_xla release the code must run on, e.g. 2.8 (default: inferred per file)")
    parser.add_argument("--migrate-to", "--xla-migrate-to", dest="migrate_to", choices=MIGRATIONS,
                        help="report (and fix) what the code becomes on the platform it moves to instead: "
                             "torchtpu, the XLA5xx rules (config: migrate-to)")
    parser.add_argument("--assume-torch-xla", action=argparse.BooleanOptionalAction, default=None,
                        help="lint files that never mention torch_xla too (model code that runs on XLA); "
                             "overrides assume-torch-xla in the config")
    parser.add_argument("--sync-functions", "--xla-sync-functions", dest="sync_functions", metavar="NAMES",
                        help="the project's own functions that sync the graph, as qualified names "
                             "(comma-separated, e.g. mylib.sync): a loop that calls one syncs; added to the config's")
    parser.add_argument("--include-docs", action="store_true",
                        help="in directories, also lint the Python blocks of Markdown and reStructuredText files "
                             "(notebooks are always included; files named on the command line always are)")
    parser.add_argument("--stdin-filename", metavar="PATH",
                        help="the path that `-` (stdin) stands for: its name in the report, per-file-ignores, "
                             "target and kind (.ipynb, .md)")
    parser.add_argument("--max-file-size", type=_size, default=DEFAULT_MAX_FILE_SIZE, metavar="SIZE",
                        help=f"do not read larger files (E902); e.g. 512K, 20M (default: "
                             f"{format_size(DEFAULT_MAX_FILE_SIZE)})")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="say which settings and target were used, which named paths were excluded and why, "
                             "which files, notebook cells and document blocks were not linted")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print the diagnostics (fix: what remains; --diff: the diff) and errors only: "
                             "no summary line, notes or 'no Python files found'")
    parser.add_argument("--show-settings", action="store_true",
                        help="print the resolved settings (config file, target per project, excludes) and exit")
    parser.add_argument("--config", metavar="FILE", help="read settings from this file only")
    parser.add_argument("--isolated", action="store_true", help="ignore configuration files")
    parser.add_argument("-j", "--jobs", type=_jobs, default=os.cpu_count() or 1,
                        help="worker processes, or auto: one per CPU (the default)")
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help="also apply (fix) or count as fixable (check) fixes that may change behaviour")
    parser.add_argument("--show-source", action="store_true",
                        help="show the source line and a caret under the column after each diagnostic (text format)")
    parser.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                        help="colour the text report: auto (on a terminal, unless NO_COLOR is set), always, never")


def _add_cache_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", metavar="DIR",
                        help=f"where the result cache is kept (default: {CACHE_DIR_NAME} in the project root, "
                             "else a directory in the user's cache)")


def _check_options(check: argparse.ArgumentParser) -> None:
    _add_common_options(check)
    check.add_argument("--fix", action="store_true", help="apply the fixes, then report what remains (as `fix`)")
    _show_fixes_option(check)
    check.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing "
                       "(as `fix --diff`)")
    check.add_argument("--format", "--output-format", dest="output_format", choices=FORMATS, help="output format")
    check.add_argument("--output-file", help="write the report here instead of stdout")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are diagnostics")
    check.add_argument("--statistics", action="store_true",
                       help="print a count per code instead of the diagnostics (with --format json: as JSON)")
    check.add_argument("--add-noqa", action="store_true",
                       help="append `# noqa: CODE` to the lines with diagnostics (Python files only)")
    check.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    check.add_argument("--trace", metavar="TRACE.json",
                       help="merge a run's trace (python -m xla_compat.trace --format json): mark the graph "
                            "findings it confirmed or ran without a sync, add what only the run saw")
    _add_cache_option(check)


def _show_fixes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--show-fixes", action="store_true",
                        help="list each finding a fix fixed, with its message, on stderr (pre-commit shows it)")


def _fix_options(fix: argparse.ArgumentParser) -> None:
    _add_common_options(fix)
    _show_fixes_option(fix)
    fix.add_argument("--diff", action="store_true", help="print the changes as a unified diff; write nothing")
    fix.add_argument("--no-cache", action="store_true", help="accepted for symmetry with check (fix reads no cache)")
    _add_cache_option(fix)


def _migrate_report_options(report: argparse.ArgumentParser) -> None:
    from ..migration import report as migration_report  # migrate-report only (and --help)

    _add_common_options(report)
    report.add_argument("--format", dest="report_format", choices=tuple(migration_report.RENDERERS), default="text",
                        help="text (default), json, or markdown (a pull request's description)")
    report.add_argument("--output-file", help="write the report here instead of stdout")
    report.add_argument("--no-cache", action="store_true", help="accepted for symmetry with check (the report "
                        "reads no cache)")


def _clean_options(clean: argparse.ArgumentParser) -> None:
    clean.add_argument("--config", metavar="FILE", help="the config file that sets the project directory")
    clean.add_argument("--isolated", action="store_true", help="ignore configuration files")
    _add_cache_option(clean)


SUBCOMMANDS = {  # name -> (help, what adds its options)
    "check": ("report diagnostics", _check_options),
    "fix": ("apply fixes in place (review with --diff first); `fix -` prints the fixed stdin to stdout", _fix_options),
    "migrate-report": ("sum up what moving to TorchTPU takes, per file and API (the XLA5xx rules), and what "
                       "`fix --migrate-to torchtpu` leaves; text, JSON or Markdown",
                       _migrate_report_options),
    "explain": ("print a rule's documentation", lambda explain: explain.add_argument("code")),
    "rules": ("list every rule", lambda rules: rules.add_argument(
        "--format", "--output-format", dest="rules_format", choices=("text", "json"), default="text",
        help="text (a table, the default) or json (code, name, summary, fixable, default, url)")),
    "clean": ("remove the result cache", _clean_options),
    # --stdio: what LSP clients (vscode-languageclient) add to say the transport; stdio is the only one
    "server": ("run the language server (LSP, on stdin/stdout) for editors; needs flake8-xla[lsp]",
               lambda server: server.add_argument("--stdio", action="store_true", help="accepted; the default")),
}


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser of every command, or, given the ``command`` the arguments name, one where only that
    command has its options (argparse builds a help formatter per option: ~8 ms of each start)."""
    parser = ArgumentParser(prog="flake8-xla", description="Lint PyTorch/XLA code: deprecated and removed "
                            "torch_xla APIs and their replacements.")
    parser.add_argument("--version", action="version", version=f"flake8-xla {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (description, add_options) in SUBCOMMANDS.items():
        options = sub.add_parser(name, help=description)
        if command in (None, name):
            add_options(options)
    return parser


def _codes(value: Optional[str]) -> Optional[Tuple[str, ...]]:
    return tuple(c.strip() for c in value.replace(" ", ",").split(",") if c.strip()) if value else None


def _per_file_ignores(value: str) -> PerFileIgnores:
    pairs = parse_per_file_ignores(value, "--per-file-ignores")
    if not pairs or any(not glob or not codes for glob, codes in pairs):  # flake8's parser drops 'a.py:'
        raise UsageError(f"--per-file-ignores: {value.strip()!r} is not GLOB:CODES (e.g. \"tests/*.py:XLA101\")")
    return pairs


def _base_settings(args: argparse.Namespace) -> Settings:
    if args.isolated:
        return Settings(base_dir=os.getcwd())
    if args.config:
        if not os.path.isfile(args.config):
            raise ConfigError(f"{args.config}: no such config file")
        return load_file(args.config) or Settings(base_dir=os.path.dirname(os.path.abspath(args.config)))
    return discover(os.getcwd())


def resolve_settings(args: argparse.Namespace) -> Settings:
    base = _base_settings(args)
    pfi = _per_file_ignores(args.per_file_ignores) if args.per_file_ignores else None
    if args.target_version:  # a bad value is a usage error (exit 2); an unknown release a warning
        check_target_version(args.target_version, "--xla-target-version")
    return merge(base, select=_codes(args.select), extend_select=_codes(args.extend_select),
                 ignore=_codes(args.ignore), per_file_ignores=pfi, exclude=_codes(args.exclude),
                 extend_exclude=_codes(args.extend_exclude), target_version=args.target_version,
                 output_format=getattr(args, "output_format", None), assume_torch_xla=args.assume_torch_xla,
                 sync_functions=parse_sync_functions(args.sync_functions, "--sync-functions")
                 if args.sync_functions else None, migrate_to=getattr(args, "migrate_to", None))


def _note(message: str) -> None:
    emit(f"flake8-xla: note: {message}\n", sys.stderr)


def _prepare(args: argparse.Namespace) -> Tuple[Settings, CodeSelector, List[str], Optional[int]]:
    """Settings, selection and files; an exit status when the command ends here (--show-settings,
    no files)."""
    settings = resolve_settings(args)
    selector = build_selector(settings)  # unknown codes are a usage error even when no file is found
    if args.stdin_filename and "-" not in args.paths:
        raise UsageError("--stdin-filename names what `-` (stdin) stands for; pass `-` as the path")
    finder = FileFinder(settings, args.force_exclude, args.include_docs, args.respect_gitignore)
    files = finder.find(args.paths)
    if args.show_settings or args.verbose:
        report = settings_report(settings, args.paths, files, respect_gitignore=args.respect_gitignore,
                                 max_file_size=args.max_file_size, stdin_filename=args.stdin_filename)
        if args.show_settings:
            emit("".join(f"{line}\n" for line in report), sys.stdout)
            return settings, selector, files, 0
        for line in report:
            emit(f"flake8-xla: {line}\n", sys.stderr)
    if args.verbose:
        for note in finder.notes:
            _note(note)
    if not files and finder.excluded_named and len(finder.excluded_named) == len(args.paths):
        # pre-commit names the files and an exclude drops them all: that is the setting working
        _note("nothing to check: " + "; ".join(finder.excluded_named)
              + "; --force-exclude applies the excludes to named paths too")
    elif not files and not args.quiet:  # still a run: a report format CI uploads gets its empty report ([], a SARIF run)
        emit("flake8-xla: warning: no Python files found in " + ", ".join(args.paths) + "\n", sys.stderr)
    return settings, selector, files, None


class _Stopped(Exception):
    """Ctrl-C: what the run had done is said; main exits 130."""


def _run(job: Job, files: List[str], jobs: int) -> List[FileResult]:
    try:
        return run_files(job, files, jobs)
    except Interrupted as exc:
        if (job.fix and not job.diff) or job.add_noqa:
            said = (f"{plural(len(exc.rewritten), 'file was', 'files were')} rewritten before it (the others are "
                    "as they were):" + "".join(f"\n  {path}" for path in exc.rewritten)
                    if exc.rewritten else "no file was rewritten")
        else:
            said = f"{len(exc.results)} of {plural(len(files), 'file')} done; nothing was written"
        emit(f"flake8-xla: interrupted; {said}\n", sys.stderr)
        raise _Stopped() from None


def _print_notes(args: argparse.Namespace, results: Sequence[FileResult]) -> None:
    if args.verbose:
        for r in results:
            for note in r.notes:
                _note(note)


def _print_inferred_targets(settings: Settings, files: Sequence[str], stdin_filename: Optional[str]) -> None:
    """Beside the closing line: the release the run judged against when nobody chose it (on stderr,
    so no report format changes)."""
    for line in inferred_targets(settings, files, stdin_filename):
        emit(line + "\n", sys.stderr)


def _check_output_file(path: Optional[str]) -> None:
    """Fail before the run, not after it, when the report could not be written."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"--output-file: {printable(path)}: no such directory: "
                         f"{printable(os.path.dirname(path) or directory)}")
    if os.path.isdir(path):
        raise UsageError(f"--output-file: {printable(path)} is a directory")


def _write_report(report: str, output_file: Optional[str]) -> None:
    """The report to --output-file, else to stdout."""
    if output_file is None:
        emit(report, sys.stdout)
        return
    try:
        with open(output_file, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(report)
    except OSError as exc:
        raise UsageError(f"--output-file: cannot write {printable(output_file)}: {exc.strerror or exc}") from None


def cmd_check(args: argparse.Namespace) -> int:
    _check_output_file(args.output_file)
    if args.add_noqa and "-" in args.paths:
        raise UsageError("--add-noqa works on files, not stdin")
    if args.fix or args.diff:  # ruff's `check --fix`: the fix command, reporting what remains as check would
        if args.add_noqa:
            raise UsageError("--add-noqa and --fix/--diff each rewrite the files; run them one after the other")
        return cmd_fix(args)
    evidence = read_trace(args.trace) if args.trace else None
    settings, selector, files, done = _prepare(args)
    if done is not None:
        return done
    sarif = settings.output_format == "sarif"  # its fixes are computed per finding; the cache keeps none
    cache = None if args.no_cache or sarif else ResultCache(resolve_cache_dir(settings.base_dir, args.cache_dir))
    job = Job(settings, selector, unsafe=args.unsafe_fixes, cache=cache,
              max_file_size=args.max_file_size, stdin_filename=args.stdin_filename, add_noqa=args.add_noqa,
              # full shows each finding's line; SARIF hashes it into the finding's fingerprint
              show_source=args.show_source or settings.output_format in ("full", "sarif"), fix_edits=sarif)
    results = _run(job, files, args.jobs)
    _print_notes(args, results)
    if cache is not None:
        for r in results:
            if r.cache_update:
                cache.put(*r.cache_update)
        cache.save()
    findings = [f for r in results for f in r.findings]
    merged = None
    if evidence is not None:
        findings, merged = merge_trace(findings, evidence, files, selector)
    if args.statistics:  # the table alone, as ruff prints it (flake8's own --statistics is left as flake8 has it)
        report = statistics(findings, settings.output_format)
    elif settings.output_format in TEXT_FORMATS:
        stream = sys.stdout if not args.output_file else None
        color = stream is not None and wants_color(args.color, stream)
        report = (render_text(findings, show_source=args.show_source, color=color) if settings.output_format == "text"
                  else RENDERERS[settings.output_format](findings, color=color))
    else:
        report = RENDERERS[settings.output_format](findings)
    _write_report(report, args.output_file)
    for r in results:
        if r.error:
            emit(f"flake8-xla: {r.path}: {r.error}\n", sys.stderr)
    if args.add_noqa:
        added = sum(r.noqa_added for r in results)
        emit(f"Added {plural(added, 'noqa comment')} in {plural(sum(1 for r in results if r.noqa_added), 'file')}."
             "\n", sys.stderr)
    elif settings.output_format in TEXT_FORMATS and not args.quiet:
        if merged is not None:
            emit(trace_summary(merged) + "\n", sys.stderr)
        note = check_note(findings, results, fix_command(settings.migrate_to, args.unsafe_fixes))
        if note:
            emit(note + "\n", sys.stderr)
        elif files and not any(r.error for r in results):
            emit(f"All checks passed ({plural(len(files), 'file')}).\n", sys.stderr)
        _print_inferred_targets(settings, files, args.stdin_filename)
    failed = any(r.error for r in results)
    return 0 if args.exit_zero or not (findings or failed) else 1


def cmd_fix(args: argparse.Namespace) -> int:
    if "-" in args.paths and len(args.paths) > 1:
        raise UsageError("`fix -` fixes stdin alone; name no other paths with it")
    settings, selector, files, done = _prepare(args)
    if done is not None or not files:
        return done or 0
    output_format = getattr(args, "output_format", None) and settings.output_format  # check --fix --format
    job = Job(settings, selector, fix=True, unsafe=args.unsafe_fixes, diff=args.diff,
              max_file_size=args.max_file_size, stdin_filename=args.stdin_filename,
              show_source=args.show_source or output_format in ("full", "sarif"))
    results = _run(job, files, args.jobs)
    _print_notes(args, results)
    from_stdin = files == ["-"]
    for r in results:
        if r.diff:
            emit(r.diff, sys.stdout)
        elif from_stdin and not args.diff and r.stdout_bytes is not None:
            sys.stdout.flush()
            sys.stdout.buffer.write(r.stdout_bytes)
            sys.stdout.flush()
    remaining = [f for r in results for f in r.findings]
    output_file = getattr(args, "output_file", None)
    if not args.diff:
        if getattr(args, "statistics", False):  # check --fix --statistics: the table of what remains
            report = statistics(remaining, output_format or "text")
        elif output_format not in (None, *TEXT_FORMATS):
            report = RENDERERS[output_format](remaining)
        else:
            # with `fix -` stdout holds the fixed source, so what remains goes to stderr
            color = not output_file and wants_color(args.color, sys.stderr if from_stdin else sys.stdout)
            report = "".join(render_text([finding], show_source=args.show_source, color=color)
                             + (f"    needs a human: {printable(r.no_fix[finding.diagnostic])}\n"
                                if not finding.fixable and finding.diagnostic in r.no_fix else "")
                             for r in results for finding in r.findings)
        if from_stdin and not output_file:
            emit(report, sys.stderr)
        else:
            _write_report(report, output_file)
    if not args.quiet:
        fixed = [f for r in results for f in r.fixed_findings]
        if getattr(args, "show_fixes", False) and fixed:
            emit(("Would fix:\n" if args.diff else "Fixed:\n") + render_text(fixed), sys.stderr)
        emit(fix_summary(results, args.diff) + "\n", sys.stderr)
        _print_inferred_targets(settings, files, args.stdin_filename)
    for r in results:
        for note in r.fix_notes if not args.quiet else ():  # what an applied fix still asks (a companion's set-up)
            emit(f"flake8-xla: {r.path}: note: {note}\n", sys.stderr)
        if r.error:
            emit(f"flake8-xla: {r.path}: {r.error}\n", sys.stderr)
    if getattr(args, "exit_zero", False):
        return 0
    return 1 if remaining or any(r.error for r in results) else 0


def cmd_migrate_report(args: argparse.Namespace) -> int:
    """The check run of the XLA5xx rules under --migrate-to torchtpu, summed up with what the fix run
    leaves; exit 0 (a report)."""
    from ..migration import report as migration_report

    _check_output_file(args.output_file)
    args.migrate_to, args.select, args.extend_select = "torchtpu", "XLA5", None
    settings, selector, files, done = _prepare(args)
    if done is not None:
        return done
    job = Job(settings, selector, unsafe=args.unsafe_fixes, max_file_size=args.max_file_size,
              stdin_filename=args.stdin_filename)
    results = _run(job, files, args.jobs)
    _print_notes(args, results)
    paths = {display_name(path): path for path in files if path != "-"}  # stdin cannot be read twice
    after = {r.path: _after_fix(job, paths[r.path]) for r in results
             if r.path in paths and any(f.fixable for f in r.findings)}
    reports, checked = migration_report.build((f for r in results for f in r.findings), len(files),
                                              {path: left for path, left in after.items() if left is not None})
    render = migration_report.RENDERERS[args.report_format]
    text = render(reports, checked, fix_command(settings.migrate_to, args.unsafe_fixes),
                  sum(r.unsafe_available for r in results))
    errors = [f for r in results for f in r.findings if not f.diagnostic.code.startswith("XLA5")]
    for f in errors:  # unreadable files, syntax errors: the report would be silent about them
        emit(f"flake8-xla: {f.location}: {f.diagnostic.code} {f.diagnostic.message}\n", sys.stderr)
    _write_report(text, args.output_file)
    return 0


def _after_fix(job: Job, path: str) -> Optional[list]:
    """The XLA5xx findings `fix` leaves in the file, at the lines of the file as it is: the fix runs in
    memory, as `fix -` runs it, and writes nothing. It goes to a fixpoint, so what it uncovers (an
    import of torch_xla that its rewrites leave unused) is counted, as fix counts it. None when the
    file cannot be read again or the run fails: the report then counts the uses check marks fixable."""
    from ..migration import report as migration_report

    try:
        data = read_file_bytes(path, job.max_file_size)
        before = decode_source(data, is_document(path)).text
    except (OSError, ValueError):
        return None
    fixed = run_file(job._replace(fix=True, stdin_filename=path), "-", data)
    if fixed.stdout_bytes is None or any(not f.diagnostic.code.startswith("XLA5") for f in fixed.findings):
        return None  # an internal error (XLA000): not a file with nothing left
    after = decode_source(fixed.stdout_bytes, is_document(path)).text
    return migration_report.moved_back(before, after, fixed.findings, _cell_source)


def _cell_source(notebook: str, cell: int) -> str:
    import json  # notebooks only

    source = json.loads(notebook)["cells"][cell - 1].get("source", "")
    return "".join(source) if isinstance(source, list) else source


def cmd_explain(args: argparse.Namespace) -> int:
    from ..engine import all_rules  # the rules load for the commands that show them

    code = args.code.upper()
    for rule in all_rules():
        if rule.code == code or rule.name == args.code:
            from ..docs import render_rule_for_terminal  # explain only: not on every check's start-up

            emit(render_rule_for_terminal(rule), sys.stdout)
            return 0
    if code in FILE_CODES:
        emit(explain_file_code(code), sys.stdout)
        return 0
    raise UsageError(f"unknown rule {args.code!r}; `flake8-xla rules` lists them "
                     f"({', '.join(FILE_CODES)} are explained too)")


def rule_fixability(rule) -> str:
    if not hasattr(rule, "covers"):  # not a lifecycle rule: its examples say whether some uses get a fix
        return "some" if any(example.fixed is not None for example in rule.invalid) else "no"
    kinds = [row.fix for row in api_table().rows if rule.covers(row)]
    if not any(f.kind != "manual" for f in kinds):
        return "no"
    return "yes" if all(f.kind != "manual" for f in kinds) else "some"


def rule_default(rule) -> str:
    """on, off (opt-in), or the migration that runs it (``--migrate-to torchtpu``)."""
    return f"migrate-to {rule.migration}" if rule.migration else "off" if rule.off_by_default else "on"


def cmd_rules(args: argparse.Namespace) -> int:
    from ..engine import all_rules

    if args.rules_format == "json":
        import json  # `rules --format json` only

        records = [{"code": rule.code, "name": rule.name, "summary": rule.summary, "fixable": rule_fixability(rule),
                    "default": rule_default(rule), "level": rule.level,
                    "url": docs_url(rule.code)} for rule in all_rules()]
        emit(json.dumps(records, indent=2) + "\n", sys.stdout)
        return 0
    rows = [("CODE", "NAME", "FIXABLE", "DEFAULT")]
    for rule in all_rules():
        rows.append((rule.code, rule.name, rule_fixability(rule), rule_default(rule)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


CACHE_FILES = (".gitignore", "CACHEDIR.TAG")  # what ResultCache puts beside its results-*.json


def cmd_clean(args: argparse.Namespace) -> int:
    directory = resolve_cache_dir(_base_settings(args).base_dir, args.cache_dir)
    if not os.path.isdir(directory):
        emit(f"flake8-xla: no result cache at {display_name(directory)}\n", sys.stderr)
        return 0
    ours = all(name in CACHE_FILES or name.startswith(("results-", ".results-")) for name in os.listdir(directory))
    if not ours:  # --cache-dir naming a directory of other things: never delete those
        raise UsageError(f"{display_name(directory)} holds files that are not flake8-xla's result cache; not removed")
    try:
        import shutil  # `clean` only

        shutil.rmtree(directory)
    except OSError as exc:
        raise UsageError(f"cannot remove {display_name(directory)}: {exc.strerror or exc}") from None
    emit(f"flake8-xla: removed the result cache {display_name(directory)}\n", sys.stderr)
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    try:
        from ..lsp.server import serve  # `server` only: pygls is an optional extra
    except ImportError as exc:
        package = (exc.name or "pygls").split(".")[0]
        raise UsageError(f"the language server needs the lsp extra (cannot import {package}): "
                         "pip install 'flake8-xla[lsp]'") from None
    return serve()


COMMANDS = {"check": cmd_check, "fix": cmd_fix, "migrate-report": cmd_migrate_report, "explain": cmd_explain,
            "rules": cmd_rules, "clean": cmd_clean, "server": cmd_server}


def main(argv: Optional[List[str]] = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    forget_project_files()  # main() may run many times in one process (tests, editor servers)
    try:
        return COMMANDS[args.command](args)
    except (UsageError, ConfigError) as exc:
        emit(f"flake8-xla: error: {exc}\n", sys.stderr)
        return 2
    except _Stopped:
        return 130
    except KeyboardInterrupt:
        emit("flake8-xla: interrupted\n", sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
