"""``flake8-xla server``: the language server (stdio, pygls).

Linting runs in worker threads, so the server keeps answering while a large file is analysed; a
result is published only if its document has not changed meanwhile, and a buffer has one lint at a
time (an edit during a lint is linted after it). Edits are linted after a short
pause (``DEBOUNCE_SECONDS``); opening and saving lint at once. Hover reads the last result; code
actions are computed on the current text.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from .. import __version__
from ..engine import all_rules
from ..output.formats import ERROR_CODES, docs_url, level_of
from .buffers import Buffer, Cell, Linter, Reported, line_edits, noqa_texts
from .settings import SECTION, WATCHED_GLOBS, ProjectSettings, client_settings, is_project_file
from .transport import XlaProtocol, report, serve_stream

DEBOUNCE_SECONDS = 0.15  # a burst of keystrokes is linted once, after it
WORKERS = 4
FIX_ALL = f"{lsp.CodeActionKind.SourceFixAll.value}.{SECTION}"  # source.fixAll.flake8-xla
INTERNAL_ERROR = "XLA000"
# one severity per finding in every front-end: the level SARIF, GitHub annotations and JSON report
SEVERITIES = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning,
              "note": lsp.DiagnosticSeverity.Information}
PYTHON_SUFFIXES = (".py", ".pyi")
logger = logging.getLogger(__name__)


class Shown(NamedTuple):
    """A published diagnostic, and the finding it shows (code-point positions on ``lines``)."""

    diagnostic: lsp.Diagnostic
    reported: Reported
    start: Tuple[int, int]  # (0-based line, code-point column)
    end: Tuple[int, int]


class Result(NamedTuple):
    buffer: Buffer
    shown: Dict[str, List[Shown]]  # document or cell URI -> its diagnostics


def uri_to_path(uri: str) -> str:
    path = to_fs_path(uri)
    if path is not None:
        return path
    parsed = urlparse(uri)
    # an untitled buffer: a name in the working directory (the workspace root) keeps its suffix
    return os.path.join(os.getcwd(), os.path.basename(unquote(parsed.path)) or "untitled")


# --- positions: the engine counts code points, the client counts what it negotiated (UTF-16 by default)

def to_client(line: str, column: int, encoding: str) -> int:
    head = line[:column]
    if encoding == lsp.PositionEncodingKind.Utf8:
        return len(head.encode("utf-8"))
    if encoding == lsp.PositionEncodingKind.Utf32:
        return len(head)
    return len(head.encode("utf-16-le")) // 2


def from_client(line: str, units: int, encoding: str) -> int:
    if encoding == lsp.PositionEncodingKind.Utf32 or line.isascii():
        return min(units, len(line))
    count = 0
    for index, char in enumerate(line):
        if encoding == lsp.PositionEncodingKind.Utf8:
            width = len(char.encode("utf-8"))
        else:
            width = 2 if ord(char) > 0xFFFF else 1
        if count + width > units:
            return index
        count += width
    return len(line)


def _word_end(line: str, column: int) -> int:
    """Where a diagnostic's range ends: its dotted name (``xm.mark_step``) or string literal
    (``"XRT_TPU_CONFIG"``), else one character."""
    if column < len(line) and line[column] in "'\"":
        closing = line.find(line[column], column + 1)
        if closing > column:
            return closing + 1
    end = column
    while end < len(line) and (line[end].isalnum() or line[end] in "_."):
        end += 1
    return end if end > column else min(column + 1, len(line.rstrip("\r\n")))


def _line_text(lines: Sequence[str], number: int) -> str:
    return lines[number].rstrip("\r\n") if 0 <= number < len(lines) else ""


class XlaLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            SECTION, __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            notebook_document_sync=lsp.NotebookDocumentSyncOptions(
                notebook_selector=[lsp.NotebookDocumentFilterWithCells(
                    cells=[lsp.NotebookCellLanguage(language="python")], notebook="*")],
                save=True),
            protocol_cls=XlaProtocol)
        self.projects = ProjectSettings()
        self.workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="flake8-xla-lint")
        self.results: Dict[str, Result] = {}  # buffer URI -> its last published result
        self.pending: Dict[str, asyncio.Task] = {}  # buffer URI -> its lint, scheduled or running
        self.linting: Dict[str, Future] = {}  # buffer URI -> its last lint in a worker
        self.reported_problems: set = set()
        self.debounce = DEBOUNCE_SECONDS
        self.shut_down = False  # a shutdown request came: exit with status 0
        self.busy = 0  # analyses running in the workers
        self._busy_lock = threading.Lock()
        self._rules: Optional[Dict[str, object]] = None

    # --- buffers -----------------------------------------------------------------------------------

    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or lsp.PositionEncodingKind.Utf16)

    def buffer(self, uri: str) -> Optional[Buffer]:
        """The buffer ``uri`` names as it is now: an open Python file, or a notebook (by its URI or a
        cell's)."""
        notebook = self.workspace.get_notebook_document(notebook_uri=uri) or \
            self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            cells = []
            for cell in notebook.cells:
                document = self.workspace.text_documents.get(unquote(cell.document))
                cells.append(Cell(cell.document, cell.kind == lsp.NotebookCellKind.Code,
                                  document.language_id or "python" if document else "python",
                                  document.source if document else ""))
            return Buffer.notebook(notebook.uri, uri_to_path(notebook.uri), notebook.version, tuple(cells))
        document = self.workspace.text_documents.get(unquote(uri))
        if document is None or not self._is_python(document.uri, document.language_id):
            return None
        return Buffer(uri, uri_to_path(uri), document.version or 0, document.source)

    @staticmethod
    def _is_python(uri: str, language: Optional[str]) -> bool:
        return language == "python" or uri_to_path(uri).endswith(PYTHON_SUFFIXES)

    def open_buffers(self) -> List[str]:
        notebooks = list(self.workspace.notebook_documents)
        cells = {cell.document for uri in notebooks for cell in self.workspace.notebook_documents[uri].cells}
        return notebooks + [uri for uri in self.workspace.text_documents if uri not in cells]

    # --- linting ---------------------------------------------------------------------------------------

    def linter(self, path: str) -> Linter:
        resolved = self.projects.for_path(path)
        if resolved.problem and resolved.problem not in self.reported_problems:
            self.reported_problems.add(resolved.problem)
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"flake8-xla: {resolved.problem}"))
        return Linter(resolved.settings, resolved.selector)

    def schedule(self, uri: str, delay: float = 0.0) -> None:
        """Lint the buffer ``uri`` after ``delay`` seconds, replacing a run not yet published."""
        earlier = self.pending.pop(uri, None)
        if earlier is not None:
            earlier.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self._lint_later(uri, delay))

    async def _lint_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        await self._lint_finished(uri)  # one lint per buffer at a time: edits to a slow file do not pile up
        buffer = self.buffer(uri)
        if buffer is None:
            return
        linter = self.linter(buffer.path)
        future = self.workers.submit(self._counted, self.analyse, linter, buffer)
        self.linting[uri] = future
        result = await asyncio.wrap_future(future)  # a cancelled task cancels a run not yet started
        current = self.buffer(uri)
        if self.shut_down or current is None or current.version != buffer.version or current.text != buffer.text:
            return  # edited meanwhile: the run scheduled by that edit publishes
        self.publish(result)
        if self.pending.get(uri) is asyncio.current_task():
            del self.pending[uri]

    async def _lint_finished(self, uri: str) -> None:
        """Return once no lint of the buffer ``uri`` runs (without cancelling one)."""
        loop = asyncio.get_running_loop()
        while (future := self.linting.get(uri)) is not None and not future.done():
            finished = asyncio.Event()
            future.add_done_callback(lambda _: loop.call_soon_threadsafe(finished.set))
            await finished.wait()

    def analyse(self, linter: Linter, buffer: Buffer) -> Result:
        try:
            reported = linter.lint(buffer)
        except Exception as exc:  # noqa: BLE001 - a bug of ours is shown in the file, the server goes on
            logger.exception("linting %s failed", buffer.uri)
            reported = [buffer.whole_file(INTERNAL_ERROR, f"flake8-xla internal error, please report: "
                                                          f"{type(exc).__name__}: {exc}")]
        return self.result(buffer, reported)

    def result(self, buffer: Buffer, reported: Iterable[Reported]) -> Result:
        uris = [cell.uri for cell in buffer.cells] or [buffer.uri]
        shown: Dict[str, List[Shown]] = {uri: [] for uri in uris}
        lines = {uri: (buffer.text_of(uri) or "").splitlines(True) for uri in uris}
        for item in reported:
            shown.setdefault(item.uri, []).append(self._shown(item, lines.get(item.uri, [])))
        return Result(buffer, shown)

    def _shown(self, item: Reported, lines: Sequence[str]) -> Shown:
        d = item.finding.diagnostic
        number = max(d.line - 1, 0)
        text = _line_text(lines, number)
        column = min(d.col, len(text))
        end = _word_end(text, column)
        rule = self.rules().get(d.code)
        client_range = lsp.Range(lsp.Position(number, to_client(text, column, self.encoding)),
                                 lsp.Position(number, to_client(text, end, self.encoding)))
        message = f"{d.message} ({rule.name})" if rule is not None else d.message
        level = level_of(d)
        # the help under the message, where editors list related information (VS Code: an indented line)
        related = [lsp.DiagnosticRelatedInformation(lsp.Location(item.uri, client_range), d.help)] if d.help else None
        diagnostic = lsp.Diagnostic(
            client_range, message, severity=SEVERITIES[level], code=d.code, source=SECTION,
            code_description=lsp.CodeDescription(docs_url(d.code)) if rule is not None else None,
            related_information=related, data={"fixable": item.finding.fixable})
        return Shown(diagnostic, item, (number, column), (number, end))

    def rules(self) -> Dict[str, object]:
        if self._rules is None:
            self._rules = {rule.code: rule for rule in all_rules()}
        return self._rules

    def publish(self, result: Result) -> None:
        before = self.results.get(result.buffer.uri)
        self.results[result.buffer.uri] = result
        gone = set(before.shown) - set(result.shown) if before is not None else set()
        for uri in gone:  # a deleted cell
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, []))
        for uri, shown in result.shown.items():
            if result.buffer.cells and before is not None and _same_cell(before, result, uri):
                continue  # the client shows these already: a notebook edit republishes what it changed
            version = None if result.buffer.cells else result.buffer.version
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri, [s.diagnostic for s in shown], version))

    def forget(self, uri: str) -> None:
        self.linting.pop(uri, None)
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        result = self.results.pop(uri, None)
        for shown_uri in (result.shown if result is not None else [uri]):
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(shown_uri, []))

    def relint_all(self) -> None:
        for uri in self.open_buffers():
            self.schedule(uri)

    # --- settings and project files ---------------------------------------------------------------

    def set_client_settings(self, raw: object) -> None:
        client, problems = client_settings(raw)
        for problem in problems:
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, f"flake8-xla: {problem}; ignored"))
        if client is not None:
            self.projects.set_client(client)

    def project_files_changed(self) -> None:
        self.projects.forget()
        self.reported_problems.clear()
        self.relint_all()

    async def watch_project_files(self) -> None:
        """Ask the client to tell us when a configuration or requirements file changes (if it can)."""
        capabilities = self.client_capabilities.workspace
        watching = capabilities.did_change_watched_files if capabilities else None
        if not (watching and watching.dynamic_registration):
            return
        options = lsp.DidChangeWatchedFilesRegistrationOptions(
            watchers=[lsp.FileSystemWatcher(glob_pattern=glob) for glob in WATCHED_GLOBS])
        try:
            await self.client_register_capability_async(lsp.RegistrationParams(registrations=[lsp.Registration(
                id="flake8-xla-project-files", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=options)]))
        except Exception:  # noqa: BLE001 - without watchers a saved config file still reloads (didSave)
            logger.warning("the client did not accept the file watchers", exc_info=True)

    async def in_worker(self, function: Callable, *args):
        return await asyncio.get_running_loop().run_in_executor(self.workers, self._counted, function, *args)

    def _counted(self, function: Callable, *args):
        with self._busy_lock:
            self.busy += 1
        try:
            return function(*args)
        finally:
            with self._busy_lock:
                self.busy -= 1

    def start_io(self, stdin=None, stdout=None) -> None:
        """Serve on stdio (pygls' reader replaced: see transport.py)."""
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(serve_stream(stdin or sys.stdin.buffer, self.protocol))
        except BrokenPipeError:
            report("the client closed its end of the connection")
        except (KeyboardInterrupt, SystemExit):
            pass

    # --- code actions and hover ------------------------------------------------------------------

    async def current_result(self, uri: str) -> Optional[Result]:
        """The result for the buffer ``uri`` belongs to, linted again if it is older than the text."""
        buffer = self.buffer(uri)
        if buffer is None:
            return None
        result = self.results.get(buffer.uri)
        if result is not None and result.buffer.version == buffer.version and result.buffer.text == buffer.text:
            return result
        return await self.in_worker(self.analyse, self.linter(buffer.path), buffer)

    def code_actions(self, linter: Linter, result: Result, uri: str, wanted: lsp.Range,
                     only: Optional[Sequence[str]]) -> List[lsp.CodeAction]:
        """Runs in a worker thread: sends nothing to the client itself."""
        buffer = result.buffer
        actions: List[lsp.CodeAction] = []
        lines = (buffer.text_of(uri) or "").splitlines(True)
        start = self._from_client(lines, wanted.start)
        end = self._from_client(lines, wanted.end)
        if _wants(only, lsp.CodeActionKind.QuickFix.value):
            for shown in result.shown.get(uri, []):
                if not (shown.start <= end and start <= shown.end):
                    continue
                code = shown.reported.finding.diagnostic.code
                if code in ERROR_CODES:  # unreadable, unparsable, or our internal error (XLA000): nothing to fix
                    continue
                fix = linter.quick_fix(buffer, shown.reported)
                if fix is not None:
                    title = fix.title if fix.safe else f"{fix.title} (unsafe fix: review the change)"
                    actions.append(lsp.CodeAction(
                        f"{code}: {title}", kind=lsp.CodeActionKind.QuickFix, diagnostics=[shown.diagnostic],
                        is_preferred=fix.safe, edit=self.workspace_edit(buffer, fix.texts)))
                texts = noqa_texts(buffer, shown.reported)
                if texts:
                    actions.append(lsp.CodeAction(
                        f"{code}: add `# noqa: {code}` to this line", kind=lsp.CodeActionKind.QuickFix,
                        diagnostics=[shown.diagnostic], edit=self.workspace_edit(buffer, texts)))
        offered = only is not None and any(FIX_ALL.startswith(kind) for kind in only)
        if _wants(only, FIX_ALL) and (offered or any(s.reported.finding.fixable for ss in result.shown.values()
                                                     for s in ss)):
            texts = linter.fix_all(buffer)
            if texts or offered:
                actions.append(lsp.CodeAction("Fix all safe flake8-xla issues in this file", kind=FIX_ALL,
                                              edit=self.workspace_edit(buffer, texts)))
        return actions

    def _from_client(self, lines: Sequence[str], position: lsp.Position) -> Tuple[int, int]:
        text = _line_text(lines, position.line)
        return position.line, from_client(text, position.character, self.encoding)

    def workspace_edit(self, buffer: Buffer, texts: Dict[str, str]) -> lsp.WorkspaceEdit:
        changes = {}
        for uri, new in texts.items():
            old = buffer.text_of(uri) or ""
            changes[uri] = [lsp.TextEdit(lsp.Range(lsp.Position(first, 0), self._line_start(old, last)), replacement)
                            for first, last, replacement in line_edits(old, new)]
        return lsp.WorkspaceEdit(changes=changes)

    def _line_start(self, text: str, number: int) -> lsp.Position:
        """The start of line ``number``; past a last line without a newline, that line's end."""
        lines = text.splitlines(True)
        if number < len(lines) or not lines or lines[-1].endswith(("\n", "\r")):
            return lsp.Position(number, 0)
        return lsp.Position(len(lines) - 1, to_client(lines[-1], len(lines[-1]), self.encoding))

    def hover(self, result: Result, uri: str, position: lsp.Position) -> Optional[lsp.Hover]:
        lines = (result.buffer.text_of(uri) or "").splitlines(True)
        at = self._from_client(lines, position)
        here = [s for s in result.shown.get(uri, []) if s.start <= at <= s.end]
        parts = [hover_text(self.rules().get(s.reported.finding.diagnostic.code), s) for s in here]
        if not parts:
            return None
        contents = lsp.MarkupContent(lsp.MarkupKind.Markdown, "\n\n---\n\n".join(parts))
        return lsp.Hover(contents, here[0].diagnostic.range)


def _same_cell(before: Result, after: Result, uri: str) -> bool:
    """Whether a notebook cell has the text and diagnostics it had when last published."""
    return (uri in before.shown and before.buffer.text_of(uri) == after.buffer.text_of(uri)
            and [s.diagnostic for s in before.shown[uri]] == [s.diagnostic for s in after.shown[uri]])


def hover_text(rule, shown: Shown) -> str:
    d = shown.reported.finding.diagnostic
    if rule is None:
        return f"**{d.code}** {d.message}"
    instead = rule.valid[0].source.rstrip("\n") if rule.valid else ""
    parts = [f"**{rule.code}** `{rule.name}`: {rule.summary}.", d.message]
    if d.help:
        parts.append(f"**Help:** {d.help}")
    parts.append(f"**Why:** {rule.why_bad}")
    if instead:
        parts.append(f"**Instead:**\n\n```python\n{instead}\n```")
    parts.append(f"[{rule.code} documentation]({docs_url(rule.code)})")
    return "\n\n".join(parts)


def _wants(only: Optional[Sequence[str]], kind: str) -> bool:
    """Whether a code action of ``kind`` answers a request for the kinds ``only`` (None: any)."""
    return only is None or any(kind == k or kind.startswith(k + ".") for k in only)


# --- the protocol ------------------------------------------------------------------------------------

def build_server() -> XlaLanguageServer:
    server = XlaLanguageServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: XlaLanguageServer, params: lsp.InitializeParams) -> None:
        ls.set_client_settings(params.initialization_options)

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: XlaLanguageServer, params: lsp.InitializedParams) -> None:
        await ls.watch_project_files()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: XlaLanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: XlaLanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: XlaLanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
        if is_project_file(uri_to_path(params.text_document.uri)):
            ls.project_files_changed()
        elif ls.buffer(params.text_document.uri) is not None:
            ls.schedule(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: XlaLanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def notebook_open(ls: XlaLanguageServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    async def notebook_change(ls: XlaLanguageServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, ls.debounce)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def notebook_save(ls: XlaLanguageServer, params: lsp.DidSaveNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    async def notebook_close(ls: XlaLanguageServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
        ls.forget(params.notebook_document.uri)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration(ls: XlaLanguageServer, params: lsp.DidChangeConfigurationParams) -> None:
        ls.set_client_settings(params.settings)
        ls.relint_all()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched(ls: XlaLanguageServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        if any(is_project_file(uri_to_path(change.uri)) for change in params.changes):
            ls.project_files_changed()

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]))
    async def code_action(ls: XlaLanguageServer, params: lsp.CodeActionParams) -> Optional[List[lsp.CodeAction]]:
        uri = params.text_document.uri
        result = await ls.current_result(uri)
        if result is None:
            return None
        only = [str(kind) for kind in params.context.only] if params.context.only else None
        linter = ls.linter(result.buffer.path)  # on the event loop: it may show a configuration error
        return await ls.in_worker(ls.code_actions, linter, result, uri, params.range, only)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: XlaLanguageServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        buffer = ls.buffer(params.text_document.uri)
        result = ls.results.get(buffer.uri) if buffer is not None else None
        return ls.hover(result, params.text_document.uri, params.position) if result is not None else None

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: XlaLanguageServer, params: None) -> None:
        ls.shut_down = True
        for task in ls.pending.values():
            task.cancel()
        ls.pending.clear()
        ls.workers.shutdown(wait=False, cancel_futures=True)

    return server


def serve() -> int:
    """Serve on stdin/stdout until the client says exit: status 0 after a shutdown request, else 1
    (the protocol's rule; also when the client went away without one)."""
    server = build_server()
    server.start_io()
    status = 0 if server.shut_down else 1
    if server.busy:  # a lint still runs in a worker thread; the interpreter would wait for it to end
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # stdout is closed after exit
                pass
        os._exit(status)
    return status


__all__ = ["DEBOUNCE_SECONDS", "FIX_ALL", "SEVERITIES", "XlaLanguageServer", "build_server", "hover_text", "serve"]
