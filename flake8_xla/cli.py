"""The standalone front-end: ``flake8-xla check|fix|explain|rules``.

The same engine, rules, columns and ``# noqa`` semantics as the flake8 plugin, without flake8's
other checkers, so it is fast enough for pre-commit and CI on large trees.
Exit status: 0 clean, 1 diagnostics remain, 2 usage or configuration error.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import os
import sys
import tempfile
import tokenize
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Tuple

from . import __version__
from .cache import CACHE_DIR_NAME, Entry, ResultCache, content_key
from .blocks import fix_document, lint_document
from .config import FORMATS, ConfigError, Settings, discover, load_file, merge
from .documents import DocumentError, is_document, read_document
from .engine import all_rules, fix_source, lint_fixable, might_match
from .formats import RENDERERS, Finding
from .lifecycle import api_table
from .noqa import file_is_exempt, filter_noqa
from .rule import Diagnostic
from .selection import CodeSelector
from .versions import forget_project_files, infer_target, parse_version

DEFAULT_EXCLUDES = (".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", ".eggs", "*.egg-info", "build", "dist",
                    "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages")
PARALLEL_MIN_FILES = 16  # below this, starting worker processes costs more than it saves


class UsageError(Exception):
    pass


# --- files -----------------------------------------------------------------------------------

def _excluded(path: str, patterns: Sequence[str], base_dir: str) -> bool:
    from .selection import _matches

    return any(_matches(path, p, base_dir) for p in patterns)


def _excluded_with_parents(path: str, patterns: Sequence[str], base_dir: str) -> bool:
    """Whether ``path`` or a directory above it (up to the working directory) is excluded."""
    current, stop = os.path.abspath(path), os.getcwd()
    while True:
        if _excluded(current, patterns, base_dir):
            return True
        parent = os.path.dirname(current)
        if current == stop or parent == current:
            return False
        current = parent


PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
DOC_SUFFIXES = (".md", ".markdown", ".rst")  # searched in directories only with --include-docs


def discover_files(paths: Sequence[str], settings: Settings, force_exclude: bool,
                   include_docs: bool = False) -> List[str]:
    excludes = tuple(settings.exclude if settings.exclude is not None else DEFAULT_EXCLUDES) + settings.extend_exclude
    found: List[str] = []
    for path in paths:
        if path == "-":
            found.append(path)
            continue
        if not os.path.exists(path):
            raise UsageError(f"{path}: no such file or directory")
        if os.path.isfile(path):
            if not (force_exclude and _excluded_with_parents(path, excludes, settings.base_dir)):
                found.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not _excluded(os.path.join(root, d), excludes, settings.base_dir)
                             and not os.path.exists(os.path.join(root, d, "pyvenv.cfg")))
            for name in sorted(files):
                full = os.path.join(root, name)
                wanted = PYTHON_SUFFIXES + (DOC_SUFFIXES if include_docs else ())
                if name.endswith(wanted) and not _excluded(full, excludes, settings.base_dir):
                    found.append(full)
    return found


def display_path(path: str) -> str:
    if path == "-":
        return "stdin"
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


@dataclass
class Source:
    text: str
    encoding: str
    newline_crlf: bool


def read_source(path: str, stdin_bytes: Optional[bytes] = None) -> Source:
    """Decode like Python does (PEP 263 cookie, BOM), a notebook or document as UTF-8; raise
    ValueError with a clear reason."""
    data = stdin_bytes if path == "-" else open(path, "rb").read()
    document = path != "-" and is_document(path)
    if b"\0" in data:
        raise ValueError("binary file (contains NUL bytes)" + ("" if document else ", not Python source"))
    if document:
        encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
    else:
        try:
            encoding, _ = tokenize.detect_encoding(iter(data.splitlines(True)).__next__)
        except SyntaxError as exc:
            raise ValueError(f"bad encoding declaration: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise ValueError(f"cannot decode as {encoding}: {exc.reason if hasattr(exc, 'reason') else exc}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return Source(text, encoding, "\r\n" in text)


# --- one file ----------------------------------------------------------------------------------

@dataclass
class FileResult:
    path: str
    findings: List[Finding] = field(default_factory=list)
    fixed: Counter = field(default_factory=Counter)
    diff: str = ""
    error: Optional[str] = None  # a fix that could not be completed (the file is left as it was)
    unsafe_available: int = 0  # diagnostics that --unsafe-fixes would fix
    cache_update: Optional[Tuple[str, str, Entry]] = None  # (path, key, raw diagnostics) to remember
    notes: List[str] = field(default_factory=list)  # documents: blocks not linted, and why (--verbose)


@dataclass(frozen=True)
class Job:
    settings: Settings
    selector: CodeSelector
    fix: bool = False
    unsafe: bool = False
    diff: bool = False
    cache: Optional[ResultCache] = None  # check only; read by workers (inherited on fork)


def _target(job: Job, path: str):
    return infer_target(path if path != "-" else "stdin", job.settings.target_version, api_table().latest)


def _assume_xla(job: Job, path: str) -> bool:
    """Whether ``assume-torch-xla`` makes this file torch_xla code whatever it imports."""
    setting = job.settings.assume_torch_xla
    if isinstance(setting, bool):
        return setting
    from .selection import _matches

    return any(_matches(path, pattern, job.settings.base_dir) for pattern in setting)


def _file_error(display: str, code: str, message: str, line: int = 1, col: int = 0) -> Finding:
    return Finding(display, Diagnostic(line, col, code, message))


# run_file judges the pre-filter (and assume-torch-xla) once, on the file as read: what follows
# lints it whatever it mentions, also after a fix removed its last torch_xla import.

def _raw_diagnostics(job: Job, path: str, text: str, tree: ast.Module) -> Entry:
    pairs, _ = lint_fixable(text, tree, path, _target(job, path), assume_xla=True)
    return [(d, None if f is None else f.safe) for d, f in pairs]


def _findings(job: Job, path: str, display: str, text: str, raw: Entry) -> Tuple[List[Finding], int]:
    """Selection and `# noqa` over the raw diagnostics (with their fix safety)."""
    lines = text.splitlines(True)
    if not raw or file_is_exempt(lines):
        return [], 0
    wanted = job.selector.for_file(path)
    pairs = [(d, safe) for d, safe in raw if wanted(d.code)]
    kept = set(filter_noqa(lines, [d for d, _ in pairs]))
    findings = [Finding(display, d, safe is not None and (safe or job.unsafe)) for d, safe in pairs if d in kept]
    unsafe_only = sum(1 for d, safe in pairs if d in kept and safe is False and not job.unsafe)
    return findings, unsafe_only


def run_file(job: Job, path: str, stdin_bytes: Optional[bytes] = None) -> FileResult:
    """One file's findings (and fixes). A bug of ours in one file is reported there as XLA000, as
    the flake8 plugin does, instead of ending the whole run."""
    try:
        return _run_file(job, path, stdin_bytes)
    except Exception as exc:  # noqa: BLE001 - any bug, reported where the user will see it
        return FileResult(display_path(path), [_file_error(
            display_path(path), "XLA000", f"flake8-xla internal error, please report: {type(exc).__name__}: {exc}")])


def _run_file(job: Job, path: str, stdin_bytes: Optional[bytes] = None) -> FileResult:
    display = display_path(path)
    result = FileResult(display)
    try:
        source = read_source(path, stdin_bytes)
    except OSError as exc:
        result.findings.append(_file_error(display, "E902", f"{type(exc).__name__}: {exc.strerror or exc}"))
        return result
    except ValueError as exc:
        result.findings.append(_file_error(display, "E902", str(exc)))
        return result
    text = source.text
    assume_xla = _assume_xla(job, path)
    if path != "-" and is_document(path):
        return _run_document(job, path, display, source, assume_xla, result)
    if not assume_xla and not might_match(text):
        return result
    key = None
    if job.cache is not None and not job.fix and path != "-":
        key = content_key(text, str(_target(job, path).version), assume_xla)
        raw = job.cache.get(path, key)
        if raw is not None:
            result.findings, result.unsafe_available = _findings(job, path, display, text, raw)
            return result
    try:
        tree = ast.parse(text, display)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        col = max((getattr(exc, "offset", None) or 1) - 1, 0)
        result.findings.append(_file_error(display, "E999", f"SyntaxError: {getattr(exc, 'msg', exc)}", line, col))
        return result
    if job.fix and not file_is_exempt(text.splitlines(True)):
        text, tree = _fix_file(job, path, display, source, tree, result)
    raw = _raw_diagnostics(job, path, text, tree)
    if key is not None:
        result.cache_update = (path, key, raw)
    result.findings, result.unsafe_available = _findings(job, path, display, text, raw)
    return result


def _fix_file(job: Job, path: str, display: str, source: Source, tree: ast.Module, result: FileResult):
    text = source.text.replace("\r\n", "\n") if source.newline_crlf else source.text
    outcome = fix_source(text, path, _target(job, path), job.selector.for_file(path), job.unsafe, assume_xla=True)
    result.error = outcome.error
    if outcome.source == text:
        return source.text, tree
    new_text = outcome.source.replace("\n", "\r\n") if source.newline_crlf else outcome.source
    if not _apply_fix(job, path, display, source, new_text, outcome.fixed, result):
        return source.text, tree  # not written (--diff, or the write failed): report against the file as it is
    return new_text, ast.parse(new_text)


def _apply_fix(job: Job, path: str, display: str, source: Source, new_text: str, fixed: Counter,
               result: FileResult) -> bool:
    """Show the fixed text as a diff (--diff) or write it; True when the file now holds it."""
    if job.diff:
        result.diff = "".join(difflib.unified_diff(source.text.splitlines(True), new_text.splitlines(True),
                                                   f"a/{display}", f"b/{display}"))
        result.fixed = fixed
        return False
    try:
        write_atomically(path, new_text, source.encoding)
    except OSError as exc:
        result.error = f"could not write the fixed file: {exc}"
        return False
    result.fixed = fixed
    return True


# --- documents: notebooks, Markdown, reStructuredText ----------------------------------------------

def _run_document(job: Job, path: str, display: str, source: Source, assume_xla: bool,
                  result: FileResult) -> FileResult:
    """Lint (and fix) the Python blocks of a document as one program; no result cache."""
    text = source.text
    try:
        document = read_document(path, text)
    except DocumentError as exc:
        result.findings.append(_file_error(display, "E902", str(exc)))
        return result
    target = _target(job, path)
    if job.fix and (assume_xla or might_match(text)) and document.blocks:
        try:
            fixed = fix_document(document, text, target, job.selector.for_file(path), job.unsafe)
        except DocumentError as exc:
            result.error = f"not fixed: {exc}"
        else:
            result.error = fixed.error
            if fixed.text != text and _apply_fix(job, path, display, source, fixed.text, fixed.fixed, result):
                text, document = fixed.text, read_document(path, fixed.text)
    where = "cell" if document.kind == "notebook" else "line"
    result.notes = [f"{display}: {where} {at}: not linted: {reason}" if at else f"{display}: not linted: {reason}"
                    for at, reason in document.skipped]
    for program, raw in lint_document(document, text, target, assume_xla):
        findings, unsafe = _findings(job, path, display, program.source, raw)
        result.unsafe_available += unsafe
        for finding in findings:
            located = program.locate(document, finding.diagnostic)
            if located is not None:
                result.findings.append(Finding(display, located.diagnostic, finding.fixable, located.cell,
                                               located.file_line))
    result.findings.sort(key=lambda f: (f.cell or 0, f.diagnostic))
    return result


def write_atomically(path: str, text: str, encoding: str) -> None:
    """Write a temporary file beside ``path`` and rename it over: the file is never half-written."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".flake8-xla-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_JOB: Optional[Job] = None


def _init_worker(job: Job) -> None:
    global _JOB
    _JOB = job


def _run_in_worker(path: str) -> FileResult:
    assert _JOB is not None
    return run_file(_JOB, path)


def run_files(job: Job, files: Sequence[str], jobs: int) -> Iterator[FileResult]:
    stdin_bytes = sys.stdin.buffer.read() if "-" in files else None
    if jobs > 1 and len(files) >= PARALLEL_MIN_FILES and "-" not in files:
        import multiprocessing

        api_table()  # load the rule data once, before forking, instead of once per worker
        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        with ProcessPoolExecutor(min(jobs, len(files)), context, _init_worker, (job,)) as pool:
            yield from pool.map(_run_in_worker, files, chunksize=max(1, len(files) // (jobs * 32)))
        return
    for path in files:
        yield run_file(job, path, stdin_bytes)


# --- commands ------------------------------------------------------------------------------------

def _add_selection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories (- for stdin)")
    parser.add_argument("--select", help="comma-separated codes or prefixes to report (replaces the default set)")
    parser.add_argument("--extend-select", help="codes or prefixes to report in addition (e.g. XLA9 opt-in rules)")
    parser.add_argument("--ignore", help="codes or prefixes not to report")
    parser.add_argument("--per-file-ignores", help="GLOB:CODES pairs, as in flake8")
    parser.add_argument("--exclude", help="replace the default excludes (comma-separated glob patterns)")
    parser.add_argument("--extend-exclude", help="more glob patterns to exclude")
    parser.add_argument("--force-exclude", action="store_true", help="apply excludes to paths given explicitly too")
    parser.add_argument("--xla-target-version", "--target-version", dest="target_version", metavar="VERSION",
                        help="torch_xla release the code must run on, e.g. 2.8 (default: inferred per file)")
    parser.add_argument("--assume-torch-xla", action=argparse.BooleanOptionalAction, default=None,
                        help="lint files that never mention torch_xla too (model code that runs on XLA); "
                             "overrides assume-torch-xla in the config")
    parser.add_argument("--include-docs", action="store_true",
                        help="in directories, also lint the Python blocks of Markdown and reStructuredText files "
                             "(notebooks are always included; files named on the command line always are)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="say which notebook cells and document blocks were not linted, and why")
    parser.add_argument("--config", metavar="FILE", help="read settings from this file only")
    parser.add_argument("--isolated", action="store_true", help="ignore configuration files")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help="also apply (fix) or count as fixable (check) fixes that may change behaviour")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help=f"where to keep the result cache (default: {CACHE_DIR_NAME} in the project directory)")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flake8-xla", description="Lint PyTorch/XLA code: deprecated and removed "
                                     "torch_xla APIs and their replacements.")
    parser.add_argument("--version", action="version", version=f"flake8-xla {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = sub.add_parser("check", help="report diagnostics")
    _add_selection_options(check)
    check.add_argument("--format", "--output-format", dest="output_format", choices=FORMATS, help="output format")
    check.add_argument("--output-file", help="write the report here instead of stdout")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are diagnostics")
    check.add_argument("--statistics", action="store_true", help="print a count per code")
    fix = sub.add_parser("fix", help="apply fixes in place (review with --diff first)")
    _add_selection_options(fix)
    fix.add_argument("--diff", action="store_true", help="print the changes as a unified diff; write nothing")
    explain = sub.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("code")
    sub.add_parser("rules", help="list every rule")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    if args.isolated:
        base = Settings(base_dir=os.getcwd())
    elif args.config:
        if not os.path.isfile(args.config):
            raise ConfigError(f"{args.config}: no such config file")
        base = load_file(args.config) or Settings(base_dir=os.path.dirname(os.path.abspath(args.config)))
    else:
        base = discover(os.getcwd())

    def codes(value: Optional[str]) -> Optional[Tuple[str, ...]]:
        return tuple(c.strip() for c in value.replace(" ", ",").split(",") if c.strip()) if value else None

    pfi = None
    if args.per_file_ignores:
        from .config import _parse_per_file_ignores

        pfi = _parse_per_file_ignores(args.per_file_ignores)
    if args.target_version:
        try:
            parse_version(args.target_version)
        except ValueError as exc:
            raise UsageError(f"--xla-target-version: {exc}") from None
    return merge(base, select=codes(args.select), extend_select=codes(args.extend_select), ignore=codes(args.ignore),
                 per_file_ignores=pfi, exclude=codes(args.exclude), extend_exclude=codes(args.extend_exclude),
                 target_version=args.target_version, output_format=getattr(args, "output_format", None),
                 assume_torch_xla=args.assume_torch_xla)


def _selector(settings: Settings) -> CodeSelector:
    """flake8's defaults: the plugin's prefix is selected; off-by-default codes only when a
    select or extend-select prefix longer than that names them (``--extend-select XLA9``)."""
    rules = all_rules()
    known = sorted(r.code for r in rules)
    off = tuple(r.code for r in rules if r.off_by_default)
    return CodeSelector(settings, known, ("XLA",), off)


def _stats(results: Sequence[FileResult]) -> str:
    counts = Counter(f.diagnostic.code for r in results for f in r.findings)
    names = {r.code: r.name for r in all_rules()}
    return "".join(f"{n:<6}{code} {names.get(code, '')}\n" for code, n in sorted(counts.items()))


def _print_notes(args: argparse.Namespace, results: Sequence[FileResult]) -> None:
    if args.verbose:
        for r in results:
            for note in r.notes:
                print(f"flake8-xla: note: {note}", file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    settings = _settings(args)
    cache = None if args.no_cache else ResultCache(args.cache_dir or os.path.join(settings.base_dir, CACHE_DIR_NAME))
    job = Job(settings, _selector(settings), unsafe=args.unsafe_fixes, cache=cache)
    files = discover_files(args.paths, settings, args.force_exclude, args.include_docs)
    if not files:
        print("flake8-xla: warning: no Python files found in " + ", ".join(args.paths), file=sys.stderr)
        return 0
    results = list(run_files(job, files, args.jobs))
    _print_notes(args, results)
    if cache is not None:
        for r in results:
            if r.cache_update:
                cache.put(*r.cache_update)
        cache.save()
    findings = [f for r in results for f in r.findings]
    report = RENDERERS[settings.output_format](findings)
    if args.output_file:
        with open(args.output_file, "w", encoding="utf-8") as out:
            out.write(report)
    else:
        sys.stdout.write(report)
    if args.statistics:
        sys.stdout.write(_stats(results))
    if settings.output_format == "text" and findings:
        fixable = sum(f.fixable for f in findings)
        unsafe = sum(r.unsafe_available for r in results)
        note = f"Found {len(findings)} diagnostic{'s' * (len(findings) != 1)}"
        if fixable:
            note += f"; {fixable} fixable with `flake8-xla fix` (marked [*])"
        if unsafe:
            note += f"; {unsafe} more with `flake8-xla fix --unsafe-fixes`"
        print(note + ".", file=sys.stderr)
    return 0 if args.exit_zero or not findings else 1


def cmd_fix(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if "-" in args.paths:
        raise UsageError("fix works on files, not stdin")
    job = Job(settings, _selector(settings), fix=True, unsafe=args.unsafe_fixes, diff=args.diff)
    files = discover_files(args.paths, settings, args.force_exclude, args.include_docs)
    if not files:
        print("flake8-xla: warning: no Python files found in " + ", ".join(args.paths), file=sys.stderr)
        return 0
    results = list(run_files(job, files, args.jobs))
    _print_notes(args, results)
    for r in results:
        if r.diff:
            sys.stdout.write(r.diff)
    remaining = [f for r in results for f in r.findings]
    if not args.diff:
        sys.stdout.write(RENDERERS["text"](remaining))
    fixed = sum((r.fixed for r in results), Counter())
    changed = sum(1 for r in results if r.fixed)
    verb = "Would fix" if args.diff else "Fixed"
    summary = f"{verb} {sum(fixed.values())} issue{'s' * (sum(fixed.values()) != 1)} in {changed} file" \
              f"{'s' * (changed != 1)}"
    if fixed:
        summary += " (" + ", ".join(f"{code} x{n}" for code, n in sorted(fixed.items())) + ")"
    needs_human = [f for f in remaining if not f.fixable] if not args.diff else []
    if needs_human:
        summary += f"; {len(needs_human)} need a human (listed above)"
    unsafe = sum(r.unsafe_available for r in results)
    if unsafe:
        summary += f"; {unsafe} more fixable with --unsafe-fixes"
    print(summary + ".", file=sys.stderr)
    for r in results:
        if r.error:
            print(f"flake8-xla: {r.path}: {r.error}", file=sys.stderr)
    return 1 if remaining or any(r.error for r in results) else 0


def cmd_explain(args: argparse.Namespace) -> int:
    from .docs import render_rule

    code = args.code.upper()
    for rule in all_rules():
        if rule.code == code or rule.name == args.code:
            sys.stdout.write(render_rule(rule))
            return 0
    raise UsageError(f"unknown rule {args.code!r}; `flake8-xla rules` lists them")


def rule_fixability(rule) -> str:
    kinds = [row.fix for row in api_table().rows if hasattr(rule, "covers") and rule.covers(row)]
    if not any(f.kind != "manual" for f in kinds):
        return "no"
    return "yes" if all(f.kind != "manual" for f in kinds) else "some"


def cmd_rules(args: argparse.Namespace) -> int:
    rows = [("CODE", "NAME", "FIXABLE", "DEFAULT")]
    for rule in all_rules():
        rows.append((rule.code, rule.name, rule_fixability(rule), "off" if rule.off_by_default else "on"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


COMMANDS = {"check": cmd_check, "fix": cmd_fix, "explain": cmd_explain, "rules": cmd_rules}


def main(argv: Optional[List[str]] = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    forget_project_files()  # main() may run many times in one process (tests, editor servers)
    try:
        return COMMANDS[args.command](args)
    except (UsageError, ConfigError) as exc:
        print(f"flake8-xla: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
