"""A scripted editor for the language-server tests: it starts `flake8-xla server` as a subprocess
and speaks LSP to it over stdio through pytest-lsp's client (pygls, lsprotocol types), keeps the
documents it opened, applies the workspace edits the server returns, and queues every
notification the server sends. Waits are bounded (hang guards), never timed assertions."""
from __future__ import annotations

import asyncio
import pathlib
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, LanguageClient, register_lsp_features

SERVER = (sys.executable, "-m", "flake8_xla", "server")
WAIT = 120  # seconds: a hang guard only


def apply_text_edits(text: str, edits: Sequence[lsp.TextEdit]) -> str:
    """Apply LSP text edits (ASCII test texts: characters are UTF-16 units) as an editor does."""
    lines = text.splitlines(True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: lsp.Position) -> int:
        if position.line >= len(lines):
            return len(text)
        return starts[position.line] + min(position.character, len(lines[position.line]))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


class Editor:
    def __init__(self, root: pathlib.Path, command: Sequence[str] = SERVER, initialization_options=None,
                 client: str = "visual-studio-code") -> None:
        self.root = root
        self.command = command
        self.initialization_options = initialization_options
        self.capabilities = client_capabilities(client)
        self.client = LanguageClient(converter_factory=default_converter)
        self.texts: Dict[str, str] = {}
        self.versions: Dict[str, int] = {}
        self.notebooks: Dict[str, List[str]] = {}  # notebook uri -> its cell uris
        self.published: List[lsp.PublishDiagnosticsParams] = []  # every publishDiagnostics, in order
        self.registrations: List[lsp.Registration] = []
        self._seen: Dict[str, int] = {}  # uri -> publications of it already returned by diagnostics()
        self._arrived = asyncio.Event()

        def published(params: lsp.PublishDiagnosticsParams) -> None:
            self.client.diagnostics[params.uri] = params.diagnostics
            self.published.append(params)
            self._arrived.set()

        def register(params: lsp.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

        # pytest-lsp's handlers (messages, logs, configuration), with these two of an editor's
        register_lsp_features(self.client, {**DEFAULT_CLIENT_FEATURES, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: published,
                                            lsp.CLIENT_REGISTER_CAPABILITY: register})

    async def __aenter__(self) -> "Editor":
        await self.client.start_io(*self.command, cwd=str(self.root))
        self.initialize_result = await asyncio.wait_for(self.client.initialize_session(lsp.InitializeParams(
            capabilities=self.capabilities, root_uri=self.root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(self.root.as_uri(), self.root.name)],
            initialization_options=self.initialization_options)), WAIT)
        return self

    async def __aexit__(self, *exc) -> None:
        if exc[0] is None:
            await asyncio.wait_for(self.client.shutdown_session(), WAIT)
        elif self.process is not None and self.process.returncode is None:
            self.process.kill()  # a failed test: its assertion, not a hang in stopping, is the report
        await asyncio.wait_for(self.client.stop(), WAIT)

    @property
    def process(self):
        return self.client._server

    # --- documents ------------------------------------------------------------------------------

    def open(self, name: str, text: str, language: str = "python") -> str:
        uri = (self.root / name).as_uri()
        self.texts[uri], self.versions[uri] = text, 1
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, language, 1, text)))
        return uri

    def change(self, uri: str, text: str) -> None:
        """Send the whole new text (a cell's change goes in a notebook change)."""
        self.texts[uri] = text
        for notebook, cells in self.notebooks.items():
            if uri in cells:
                self.versions[notebook] += 1
                self.client.notebook_document_did_change(lsp.DidChangeNotebookDocumentParams(
                    lsp.VersionedNotebookDocumentIdentifier(self.versions[notebook], notebook),
                    lsp.NotebookDocumentChangeEvent(cells=lsp.NotebookDocumentCellChanges(text_content=[
                        lsp.NotebookDocumentCellContentChanges(
                            lsp.VersionedTextDocumentIdentifier(uri=uri, version=self._bump(uri)),
                            [lsp.TextDocumentContentChangeWholeDocument(text)])]))))
                return
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=self._bump(uri)),
            [lsp.TextDocumentContentChangeWholeDocument(text)]))

    def _bump(self, uri: str) -> int:
        self.versions[uri] += 1
        return self.versions[uri]

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))

    def open_notebook(self, name: str, cells: Sequence[Tuple[str, str]]) -> List[str]:
        """Open a notebook of (kind "code"/"markdown", text) cells; returns the cell URIs."""
        uri = (self.root / name).as_uri()
        cell_uris = [f"vscode-notebook-cell:{(self.root / name).as_posix()}#C{n}" for n in range(len(cells))]
        self.notebooks[uri], self.versions[uri] = cell_uris, 1
        for cell_uri, (_, text) in zip(cell_uris, cells):
            self.texts[cell_uri], self.versions[cell_uri] = text, 1
        self.client.notebook_document_did_open(lsp.DidOpenNotebookDocumentParams(
            lsp.NotebookDocument(uri, "jupyter-notebook", 1, [
                lsp.NotebookCell(lsp.NotebookCellKind.Code if kind == "code" else lsp.NotebookCellKind.Markup, cell_uri)
                for cell_uri, (kind, _) in zip(cell_uris, cells)]),
            [lsp.TextDocumentItem(cell_uri, "python" if kind == "code" else "markdown", 1, text)
             for cell_uri, (kind, text) in zip(cell_uris, cells)]))
        return cell_uris

    # --- what the server sends --------------------------------------------------------------------

    async def diagnostics(self, uri: str, version: Optional[int] = None) -> List[lsp.Diagnostic]:
        """The next diagnostics published for ``uri`` (after those already seen), for ``version``
        if given (a notebook cell's are published without one)."""
        seen = self._seen.get(uri, 0)

        async def arrive() -> List[lsp.Diagnostic]:
            while True:
                mine = [p for p in self.published if p.uri == uri]
                for index in range(seen, len(mine)):
                    if version is None or mine[index].version == version:
                        self._seen[uri] = index + 1
                        return list(mine[index].diagnostics)
                self._arrived.clear()
                await self._arrived.wait()

        return await asyncio.wait_for(arrive(), WAIT)

    async def code_actions(self, uri: str, line: int, character: int = 0, end_character: Optional[int] = None,
                           only: Optional[List[str]] = None) -> List[lsp.CodeAction]:
        end = lsp.Position(line, character if end_character is None else end_character)
        actions = await asyncio.wait_for(self.client.text_document_code_action_async(lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(line, character), end),
            lsp.CodeActionContext(diagnostics=list(self.client.diagnostics.get(uri, [])), only=only))), WAIT)
        return list(actions or [])

    def apply(self, edit: lsp.WorkspaceEdit) -> None:
        """Apply a workspace edit to the open documents and tell the server, as an editor does."""
        for uri, edits in (edit.changes or {}).items():
            self.change(uri, apply_text_edits(self.texts[uri], edits))

    async def hover(self, uri: str, line: int, character: int) -> Optional[lsp.Hover]:
        return await asyncio.wait_for(self.client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, character))), WAIT)


def summary(diagnostics: Sequence[lsp.Diagnostic]) -> List[Tuple]:
    """(start line, start char, end char, code, severity name, message) of each diagnostic."""
    return [(d.range.start.line, d.range.start.character, d.range.end.character, d.code,
             lsp.DiagnosticSeverity(d.severity).name, d.message) for d in diagnostics]


def run(scenario) -> None:
    asyncio.run(asyncio.wait_for(scenario, WAIT * 3))
