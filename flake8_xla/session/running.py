"""Running the engine on one file (check, fix, add-noqa), and on many in worker processes."""
from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from typing import TYPE_CHECKING, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .cache import Entry, ResultCache, content_key
from ..config import Settings
from ..documents import is_document
# the engine (and, through it, the rules and their analyses) loads when a file is linted: not on a
# run whose files fail the pre-filter or hit the result cache
from ..prefilter import TOO_DEEP, collector_paused, concerns_xla, too_deep_message
from ..output.formats import Finding, suggested_fix
from ..lifecycle.table import api_table, latest_release
from ..fixing.lines import split_lines
from ..noqa import UNUSED_NOQA, file_is_exempt, filter_noqa, unknown_codes
from ..rule import Diagnostic
from ..rules import rule_index
from .selection import CodeSelector, path_matches
from ..versions import Target, infer_target
from .adding_noqa import add_noqa
from ..output.terminal import display_name, emit
from .sources import DEFAULT_MAX_FILE_SIZE, Source, decode_source, read_file_bytes, read_stdin_bytes
from .writing import WriteRefused, unified_diff, write_preserving

if TYPE_CHECKING:  # annotations; the module loads where a file is parsed
    import ast

PARALLEL_MIN_FILES = 16  # below this, starting worker processes costs more than it saves


class FileResult:
    """What running a job on one file gave; filled in as the run goes."""

    __slots__ = ("path", "findings", "fixed", "diff", "error", "unsafe_available", "cache_update", "notes",
                 "stdout_bytes", "noqa_added", "fix_notes", "no_fix", "warnings", "fixed_findings")

    def __init__(self, path: str, findings: Optional[List[Finding]] = None) -> None:
        self.path = path  # as shown
        self.findings: List[Finding] = findings if findings is not None else []
        self.fixed: Counter = Counter()
        self.diff = ""
        self.error: Optional[str] = None  # a fix that could not be completed (the file is left as it was)
        self.unsafe_available = 0  # diagnostics that --unsafe-fixes would fix
        # (path, key, raw diagnostics, project files used) to remember
        self.cache_update: Optional[Tuple[str, str, Entry, Dict[str, str]]] = None
        self.notes: List[str] = []  # documents: blocks not linted, and why (--verbose)
        self.stdout_bytes: Optional[bytes] = None  # `fix -`: the (fixed) source, for stdout
        self.noqa_added = 0  # --add-noqa: diagnostics given a noqa comment
        self.fix_notes: List[str] = []  # what the applied fixes still ask of the user
        self.no_fix: Dict[Diagnostic, str] = {}  # fix: why each remaining diagnostic without a fix has none
        self.warnings: List[str] = []  # printed on stderr by check and fix: `# noqa` codes no rule has
        # fix --show-fixes: what the fixes fixed, where it was in the file as read (a fix that only
        # became possible after another is counted in ``fixed``, not listed)
        self.fixed_findings: List[Finding] = []

    def __getstate__(self) -> tuple:  # back from a worker process
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)


class Job(NamedTuple):
    settings: Settings
    selector: CodeSelector
    fix: bool = False
    unsafe: bool = False
    diff: bool = False
    cache: Optional[ResultCache] = None  # check only; read by workers (inherited on fork)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    stdin_filename: Optional[str] = None  # the path `-` stands for: selection, target, document kind
    add_noqa: bool = False
    show_source: bool = False  # findings carry the line they are on
    # fixable findings carry their fix's edits (SARIF); the cache stores none, so such a run goes without it
    fix_edits: bool = False


def _logical_path(job: Job, path: str) -> str:
    """The path that rules, per-file-ignores and the target see ('-' is stdin without a name)."""
    return job.stdin_filename if path == "-" and job.stdin_filename else path


def target_for(job: Job, path: str) -> Target:
    settings = job.settings
    return infer_target(path if path != "-" else "stdin", settings.target_version, latest_release(),
                        settings.target_origin)._replace(migrate_to=settings.migrate_to)


def assumes_torch_xla(settings: Settings, path: str) -> bool:
    """Whether ``assume-torch-xla`` makes this file torch_xla code whatever it imports."""
    setting = settings.assume_torch_xla
    if isinstance(setting, bool):
        return setting
    return any(path_matches(path, pattern, settings.base_dir) for pattern in setting)


def _file_error(display: str, code: str, message: str, line: int = 1, col: int = 0) -> Finding:
    return Finding(display, Diagnostic(line, col, code, message))


# run_file judges the pre-filter (and assume-torch-xla) once, on the file as read: what follows
# lints it whatever it mentions, also after a fix removed its last torch_xla import.

def _raw_diagnostics(job: Job, path: str, text: str, tree: ast.Module, hooks_only: bool = False,
                     entry_functions: Optional[frozenset] = None
                     ) -> Tuple[Entry, Dict[str, str], Dict[Diagnostic, str]]:
    """The diagnostics (their fix applicability set), and the project files whose summaries they used.
    ``hooks_only``: the file is XLA code only through its framework hooks; ``entry_functions``: only
    through these functions, which the project's XLA code calls (see _run_file)."""
    from ..engine import lint_fixable
    from .project_index import project_index

    project = project_index() if path != "-" else None
    if project is not None:
        project.begin(hooks_only, entry_functions)
    pairs, site = lint_fixable(text, tree, path, target_for(job, path), assume_xla=True,
                               sync_functions=job.settings.sync_functions, project=project)
    raw = [(d, suggested_fix(text, site, d.code, f) if job.fix_edits and _fixed_by(job, d) else None)
           for d, f in pairs]
    return raw, project.consulted() if project else {}, site.no_fix


def _fixed_by(job: Job, diagnostic: Diagnostic) -> bool:
    """Whether the job's fix run (with its --unsafe-fixes choice) fixes the diagnostic."""
    return diagnostic.applicability == "safe" or (diagnostic.applicability == "unsafe" and job.unsafe)


def _findings(job: Job, path: str, display: str, text: str, raw: Entry, whole: bool = True
              ) -> Tuple[List[Finding], int]:
    """Selection and `# noqa` over the raw diagnostics (with their suggested fix), and
    the `# noqa` codes they leave unused (XLA001). ``whole``: the rules ran on the whole file (not only
    on its framework hooks or the functions the project's XLA code calls)."""
    lines = split_lines(text)
    if (not raw and not (whole and "noqa" in text)) or file_is_exempt(lines):
        return [], 0
    wanted = job.selector.for_file(path)
    chosen = [item for item in raw if wanted(item[0].code)]
    kept = set(filter_noqa(lines, [d for d, _ in chosen]))
    findings = [Finding(display, d, job.unsafe, fix=fix if _fixed_by(job, d) else None)
                for d, fix in chosen if d in kept]
    unsafe_only = sum(1 for d, _ in chosen if d in kept and d.applicability == "unsafe" and not job.unsafe)
    if whole and wanted(UNUSED_NOQA):
        from ..engine import unused_noqa
        from ..fixing import FixSite
        from .project_index import project_index

        project = project_index() if path != "-" else None
        if project is not None:
            project.begin()
        for d, fix in unused_noqa(text, path, target_for(job, path), [d for d, _ in chosen], wanted,
                                  sync_functions=job.settings.sync_functions, project=project, reported=True):
            suggested = suggested_fix(text, FixSite(text, None, None, None), d.code, fix) if job.fix_edits else None
            findings.append(Finding(display, d, job.unsafe, fix=suggested))
        findings.sort(key=lambda f: f.diagnostic)
    return findings, unsafe_only


def run_file(job: Job, path: str, stdin_bytes: Optional[bytes] = None, text: Optional[str] = None) -> FileResult:
    """One file's findings (and fixes). A bug of ours in one file is reported there as XLA000, as
    the flake8 plugin does, instead of ending the whole run. ``text``: the content of ``-`` as
    text already (an editor's buffer), instead of ``stdin_bytes``."""
    try:
        with collector_paused():  # parsing and analysing one file: reference counting frees it
            return _run_file(job, path, stdin_bytes, text)
    except TOO_DEEP as exc:  # nesting past what Python's parser or our walks can recurse into
        display = display_name(path, job.stdin_filename)
        return FileResult(display, [_file_error(display, "E999", too_deep_message(exc))])
    except Exception as exc:  # noqa: BLE001 - any bug, reported where the user will see it
        display = display_name(path, job.stdin_filename)
        return FileResult(display, [_file_error(
            display, "XLA000", f"flake8-xla internal error, please report: {type(exc).__name__}: {exc}")])


def _read(job: Job, path: str, name: str, stdin_bytes: Optional[bytes]) -> Source:
    data = stdin_bytes if path == "-" else read_file_bytes(path, job.max_file_size)
    return decode_source(data or b"", name != "-" and is_document(name))


def _run_file(job: Job, path: str, stdin_bytes: Optional[bytes] = None, text: Optional[str] = None) -> FileResult:
    name = _logical_path(job, path)
    display = display_name(path, job.stdin_filename)
    result = FileResult(display)
    try:
        source = Source(text, "utf-8") if text is not None else _read(job, path, name, stdin_bytes)
    except OSError as exc:
        result.findings.append(_file_error(display, "E902", f"{type(exc).__name__}: {exc.strerror or exc}"))
        return result
    except ValueError as exc:
        result.findings.append(_file_error(display, "E902", str(exc)))
        return result
    if path == "-" and job.fix:
        result.stdout_bytes = source.text.encode(source.encoding)  # unchanged unless a fix applies
    text = source.text
    assume_xla = assumes_torch_xla(job.settings, name)
    if name != "-" and is_document(name):
        return _run_document(job, path, name, display, source, assume_xla, result)
    if "XLA" in text:
        result.warnings = _unknown_noqa_codes(display, text)
    hooks_only, through_project, entry_functions = False, False, None
    if not concerns_xla(text, assume_xla, job.settings.migrate_to):
        if name == "-":
            return result
        from .project_index import may_hold_framework_hooks, project_index

        if may_hold_framework_hooks(text) and project_index().trains_on_xla(name):
            assume_xla = hooks_only = True  # a LightningModule / Trainer subclass of a project that trains on XLA
        else:
            through_project = True  # XLA code only through what other modules of the project hand it
    key = None
    if job.cache is not None and not job.fix and not job.add_noqa and path != "-":
        options = {"sync_functions": sorted(job.settings.sync_functions)}
        if hooks_only:  # not the result of `assume-torch-xla`, which lints the whole file
            options["hooks_only"] = True
        if through_project:  # kept with the project files the decision read: they invalidate it
            options["through_project"] = True
        if job.settings.migrate_to:
            options["migrate_to"] = job.settings.migrate_to
        key = content_key(text, str(target_for(job, name).version), assume_xla, options)
        raw = job.cache.get(path, key)
        if raw is not None:
            result.findings, result.unsafe_available = _findings(job, name, display, text, raw,
                                                                 not (hooks_only or through_project))
            _keep_source_lines(job, result, text)
            return result
    scanned: Dict[str, str] = {}
    if through_project:
        from .project_index import project_index

        project = project_index()
        project.begin()
        if project.gives_xla_modules(name, text) or project.gives_xla_values(name, text):
            # xm, pl = import_xla(), device = xla_utils.get_device(): the project's helpers hand it torch_xla
            assume_xla = True
        else:
            # an engine.py whose train_one_epoch(model, loader, optimizer, device) the XLA script calls
            entry_functions = project.entry_points(name) or None
        scanned = project.consulted()
        if not assume_xla and entry_functions is None:
            if key is not None:  # kept until the file or a caller it read changes (a new caller: see README)
                result.cache_update = (path, key, [], scanned)
            return result
        assume_xla = True
    try:
        import ast  # here: a file served from the cache or skipped is never parsed (no ast module loaded)

        tree = ast.parse(text, display)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        col = max((getattr(exc, "offset", None) or 1) - 1, 0)
        result.findings.append(_file_error(display, "E999", f"SyntaxError: {getattr(exc, 'msg', exc)}", line, col))
        _keep_source_lines(job, result, text)
        return result
    if job.fix and not file_is_exempt(split_lines(text)):
        text, tree = _fix_file(job, path, name, display, source, tree, result)
    raw, deps, no_fix = _raw_diagnostics(job, name, text, tree, hooks_only, entry_functions)
    if job.fix:
        result.no_fix = no_fix
    if key is not None:
        result.cache_update = (path, key, raw, {**scanned, **deps})
    whole = not (hooks_only or through_project)
    result.findings, result.unsafe_available = _findings(job, name, display, text, raw, whole)
    if job.add_noqa and result.findings:
        text = _add_noqa(job, path, name, display, source, text, raw, result, whole)
    _keep_source_lines(job, result, text)
    return result


def _unknown_noqa_codes(display: str, text: str) -> List[str]:
    """A warning for each `# noqa` comment that names XLA codes no rule has (ruff warns so too)."""
    known = [code for code, _, _ in rule_index()]
    return [f"{display}:{line}: unknown code{'s' if len(codes) > 1 else ''} in `# noqa`: {', '.join(codes)}"
            for line, codes in unknown_codes(split_lines(text), known)]


def _keep_source_lines(job: Job, result: FileResult, text: str) -> None:
    if not job.show_source or not result.findings:
        return
    lines = split_lines(text)
    result.findings = [f._replace(source_line=lines[f.diagnostic.line - 1])
                       if 0 < f.diagnostic.line <= len(lines) else f for f in result.findings]


def _fix_file(job: Job, path: str, name: str, display: str, source: Source, tree: ast.Module,
              result: FileResult):
    from ..engine import fix_source

    # the text as read, each line's ending included: the fix engine keeps every line's own ending
    wanted = job.selector.for_file(name)
    outcome = fix_source(source.text, name, target_for(job, name), wanted, job.unsafe,
                         assume_xla=True, sync_functions=job.settings.sync_functions, selected=wanted)
    result.error = outcome.error
    if outcome.source == source.text:
        return source.text, tree
    written = _apply_fix(job, path, display, source, outcome.source, outcome.fixed, result)
    if written or job.diff:
        result.fix_notes = list(outcome.notes)
        result.fixed_findings = [_fixed(display, d) for d, first in outcome.fixed_diagnostics if first]
    if not written:
        return source.text, tree  # not written (--diff, or the write failed): report against the file as it is
    import ast

    return outcome.source, ast.parse(outcome.source)


def _fixed(display: str, diagnostic: Diagnostic, **where) -> Finding:
    """A finding a fix has fixed: nothing is left to fix (no `[*]`)."""
    return Finding(display, diagnostic._replace(applicability=None), **where)


def _apply_fix(job: Job, path: str, display: str, source: Source, new_text: str, fixed: Counter,
               result: FileResult) -> bool:
    """Show the fixed text as a diff (--diff) or write it; True when the file now holds it."""
    if job.diff:
        result.diff = unified_diff(split_lines(source.text), split_lines(new_text), f"a/{display}", f"b/{display}")
        result.fixed = fixed
        return False
    if path == "-":
        result.stdout_bytes = new_text.encode(source.encoding)
    elif not _write(path, new_text, source.encoding, result):
        return False
    result.fixed = fixed
    return True


# the files this process rewrote in this run: on Ctrl-C the user is told which
_REWRITTEN: List[str] = []


@contextlib.contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """Ctrl-C waits until the block ends: a file is rewritten and counted, or neither."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # Windows: the rename is atomic all the same
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _write(path: str, text: str, encoding: str, result: FileResult) -> bool:
    try:
        with _ctrl_c_deferred():
            write_preserving(path, text, encoding)
            _REWRITTEN.append(path)
    except WriteRefused as exc:
        result.error = str(exc)
        return False
    except (OSError, UnicodeEncodeError) as exc:
        result.error = f"could not write the fixed file: {exc}"
        return False
    return True


def _add_noqa(job: Job, path: str, name: str, display: str, source: Source, text: str, raw: Entry,
              result: FileResult, whole: bool) -> str:
    # unused noqa codes are removed, not silenced by one more code in the same comment
    new_text, annotated = add_noqa(text, [f.diagnostic for f in result.findings if f.diagnostic.code != UNUSED_NOQA])
    if not annotated:
        return text
    if not _write(path, new_text, source.encoding, result):
        return text
    result.noqa_added = len(annotated)
    result.findings, result.unsafe_available = _findings(job, name, display, new_text, raw, whole)
    return new_text


# --- documents: notebooks, Markdown, reStructuredText ----------------------------------------------

def _run_document(job: Job, path: str, name: str, display: str, source: Source, assume_xla: bool,
                  result: FileResult) -> FileResult:
    """Lint (and fix) the Python blocks of a document as one program; no result cache."""
    from ..documents.programs import fix_document, lint_document
    from ..documents.reading import DocumentError, read_document

    text = source.text
    try:
        document = read_document(name, text)
    except DocumentError as exc:
        result.findings.append(_file_error(display, "E902", str(exc)))
        return result
    target = target_for(job, name)
    if job.fix and concerns_xla(text, assume_xla, target.migrate_to) and document.blocks:
        try:
            fixed = fix_document(document, text, target, job.selector.for_file(name), job.unsafe, assume_xla,
                                 job.settings.sync_functions)
        except DocumentError as exc:
            result.error = f"not fixed: {exc}"
        else:
            result.error = fixed.error
            written = fixed.text != text and _apply_fix(job, path, display, source, fixed.text, fixed.fixed, result)
            if written or (job.diff and result.diff):
                result.fix_notes = list(fixed.notes)
                result.fixed_findings = [_fixed(display, at.diagnostic, cell=at.cell, file_line=at.file_line)
                                         for at in fixed.fixed_findings]
            if written:
                text, document = fixed.text, read_document(name, fixed.text)
    where = "cell" if document.kind == "notebook" else "line"
    result.notes = [f"{display}: {where} {at}: not linted: {reason}" if at else f"{display}: not linted: {reason}"
                    for at, reason in document.skipped]
    if job.add_noqa:
        result.notes.append(f"{display}: --add-noqa leaves notebooks and documents alone")
    file_lines = split_lines(text)
    for program, diagnostics in lint_document(document, text, target, assume_xla, job.settings.sync_functions):
        # a document's fixes are edits of its blocks, not of the file: none is suggested
        findings, unsafe = _findings(job, name, display, program.source, [(d, None) for d in diagnostics])
        result.unsafe_available += unsafe
        program_lines = split_lines(program.source)
        for finding in findings:
            located = _located_with_end(document, program, finding.diagnostic)
            if located is None:
                continue
            source_line = None
            if job.show_source:  # a notebook line from its cell (the program); a Markdown/rst line from the file
                lines, number = ((program_lines, finding.diagnostic.line) if located.cell is not None
                                 else (file_lines, located.diagnostic.line))
                source_line = lines[number - 1] if 0 < number <= len(lines) else None
            result.findings.append(Finding(display, located.diagnostic, job.unsafe, located.cell,
                                           located.file_line, source_line))
    result.findings.sort(key=lambda f: (f.cell or 0, f.diagnostic))
    return result


def _located_with_end(document, program, diagnostic: Diagnostic):
    """The diagnostic in document coordinates, its end too when it lies in the same block (locate
    moves the start only; an end in another block, or in no block, is dropped)."""
    located = program.locate(document, diagnostic)
    if located is None or diagnostic.end_line is None:
        return located
    same_block = program.block_of(diagnostic.end_line) == program.block_of(diagnostic.line)
    end = program.locate(document, diagnostic._replace(line=diagnostic.end_line, col=diagnostic.end_col)) \
        if same_block else None
    moved = located.diagnostic._replace(end_line=end.diagnostic.line if end else None,
                                        end_col=end.diagnostic.col if end else None)
    return located._replace(diagnostic=moved)


# --- many files: worker processes ---------------------------------------------------------------------

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WORKER_JOB: Optional[Job] = None
_PARENT_PID: Optional[int] = None


def die_with_parent(parent_pid: int) -> None:
    """Make this worker end when the process that started it ends, even by SIGKILL: on Linux the
    kernel sends SIGKILL (prctl PR_SET_PDEATHSIG); everywhere the worker checks its parent before
    each file. The check right after arming also covers a parent that died before it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes  # workers only
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl (another libc): the check before each file still applies
    if os.getppid() != parent_pid:
        os._exit(1)


def _init_worker(job: Job, parent_pid: int) -> None:
    global _WORKER_JOB, _PARENT_PID
    import signal

    # Ctrl-C is the parent's to handle: a worker finishes its chunk, so the parent learns every
    # file that was rewritten before it stops
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)
    _WORKER_JOB, _PARENT_PID = job, parent_pid


def _run_in_worker(paths: Sequence[str]) -> List[FileResult]:
    assert _WORKER_JOB is not None
    results = []
    for path in paths:
        if os.getppid() != _PARENT_PID:  # orphaned: nobody will read the result, and fixes must stop
            os._exit(1)
        results.append(run_file(_WORKER_JOB, path))
    return results


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the results of the files finished before it, and the files rewritten
    (as shown), in order."""

    def __init__(self, results: List[FileResult], rewritten: List[str]) -> None:
        super().__init__()
        self.results = results
        self.rewritten = rewritten


def run_files(job: Job, files: Sequence[str], jobs: int) -> List[FileResult]:
    """Every file's result, in order; :class:`Interrupted` with those finished on Ctrl-C."""
    results: List[FileResult] = []
    del _REWRITTEN[:]
    try:
        _run_files(job, files, jobs, results)
        for result in results:
            for warning in result.warnings:
                emit(f"flake8-xla: warning: {warning}\n", sys.stderr)
    except KeyboardInterrupt as exc:
        finished = exc.results if isinstance(exc, Interrupted) else results
        # by this process (one file after another), or by workers (their results say so)
        rewritten = [display_name(path) for path in _REWRITTEN]
        if not job.diff and "-" not in files:
            rewritten += [r.path for r in finished if (r.fixed or r.noqa_added) and r.path not in rewritten]
        raise Interrupted(finished, rewritten) from None
    return results


def _run_files(job: Job, files: Sequence[str], jobs: int, results: List[FileResult]) -> None:
    project = sys.modules.get(f"{__package__}.project_index")  # imported by the first file linted, not by a cached run
    if project is not None:
        project.reset_project_index()  # one view of the project per run (workers inherit it on fork, then fill their own)
    stdin_bytes = None
    if "-" in files:
        try:
            stdin_bytes = read_stdin_bytes(job.max_file_size)
        except ValueError as exc:
            display = display_name("-", job.stdin_filename)
            results.append(FileResult(display, [_file_error(display, "E902", str(exc))]))
            files = [f for f in files if f != "-"]
    if jobs > 1 and len(files) >= PARALLEL_MIN_FILES and "-" not in files:
        from ..engine import all_rules

        api_table()  # load the rule data and the rules once, before forking, instead of once per worker
        all_rules()
        for path in {os.path.dirname(os.path.abspath(f)): f for f in files}.values():
            target_for(job, path)  # read each project's pins here: a warning about one is printed once
        # worker machinery only when workers start: not on every single-file run's start-up
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        size = max(1, len(files) // (jobs * 32))
        with ProcessPoolExecutor(min(jobs, len(files)), context, _init_worker, (job, os.getpid())) as pool:
            futures = [pool.submit(_run_in_worker, files[i:i + size]) for i in range(0, len(files), size)]
            try:
                results.extend(r for future in futures for r in future.result())
            except KeyboardInterrupt:
                # the chunks under way finish (a rewrite is never cut short); the others never start. A
                # second Ctrl-C would leave the workers running and the list of rewritten files unknown.
                import signal

                previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
                try:
                    pool.shutdown(wait=True, cancel_futures=True)
                finally:
                    signal.signal(signal.SIGINT, previous)
                raise Interrupted([r for f in futures if f.done() and not f.cancelled() and f.exception() is None
                                   for r in f.result()], []) from None
        return
    for path in files:
        results.append(run_file(job, path, stdin_bytes))


__all__ = ["FileResult", "Interrupted", "Job", "PARALLEL_MIN_FILES", "assumes_torch_xla", "die_with_parent", "run_file",
           "run_files", "target_for"]
