"""Editor integrations, driven through the exact invocations the editors use.

* The VS Code flake8 extension (microsoft/vscode-flake8, ``bundled/tool/lsp_server.py``) runs
  ``python -m flake8 --format='%(row)d,%(col)d,%(code).1s,%(code)s:%(text)s' <flake8.args>
  --stdin-display-name <absolute path> -`` from the workspace folder when it lints a buffer through
  stdin (notebook cells; ``.py`` files are linted from disk, by path, on open and save). The single
  quotes are part of the argument (no shell removes them), so every output line is wrapped in them
  and the extension strips them before matching its regex. ``test_flake8_plugin.py`` already
  checks the unquoted format once; these tests add the quoted argv, an edited buffer that differs
  from the file on disk, ``# noqa`` in the buffer and target inference from the display path.
* python-lsp-server (pylsp) with its flake8 plugin: spoken to over stdio JSON-RPC, as an editor
  does. The plugin runs ``flake8 - --stdin-display-name <path relative to the root>`` in the
  workspace root with the buffer on stdin and maps every XLA code to severity Warning.
"""
import json
import os
import pathlib
import queue
import re
import subprocess
import sys
import threading
import time

IMPORT = "import torch_xla.core.xla_model as xm\n"
MARK_STEP_TEXT = ("xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)")
GET_ORDINAL_REMOVED = ("xm.get_ordinal() was removed in torch_xla 2.7; use torch_xla.runtime.global_ordinal() "
                       "(2.1+)")
GET_ORDINAL_DEPRECATED = ("xm.get_ordinal() is deprecated since torch_xla 2.5 (removed in 2.7); "
                          "use torch_xla.runtime.global_ordinal() (2.1+)")

# ---------------------------------------------------------------------------------------------
# VS Code flake8 extension
# ---------------------------------------------------------------------------------------------

# The extension's TOOL_ARGS, verbatim: the quotes are inside the argument.
VSCODE_FORMAT_ARG = "--format='%(row)d,%(col)d,%(code).1s,%(code)s:%(text)s'"
# The regex the extension parses each (unquoted) output line with.
VSCODE_DIAGNOSTIC_RE = re.compile(
    r"(?P<line>\d+),(?P<column>-?\d+),(?P<type>\w+),(?P<code>\w+\d+):(?P<message>[^\r\n]*)")


def vscode_flake8(workspace: pathlib.Path, document: pathlib.Path, buffer: str, *user_args: str):
    """Run flake8 the way the extension does for a buffer: user ``flake8.args`` before the stdin part."""
    argv = [sys.executable, "-m", "flake8", VSCODE_FORMAT_ARG, *user_args,
            "--stdin-display-name", str(document), "-"]
    return subprocess.run(argv, cwd=workspace, input=buffer, capture_output=True, text=True, timeout=120)


def vscode_parse(stdout: str) -> list:
    """The extension's parsing: strip the quotes, match the regex, keep 1-based row and column."""
    parsed = []
    for line in stdout.splitlines():
        if line.startswith("'") and line.endswith("'"):
            line = line[1:-1]
        match = VSCODE_DIAGNOSTIC_RE.match(line)
        assert match is not None, f"the extension would drop this line: {line!r}"
        parsed.append((int(match["line"]), int(match["column"]), match["type"], match["code"], match["message"]))
    return parsed


def test_vscode_lints_the_buffer_not_the_file_on_disk(tmp_path) -> None:
    """Unsaved edits: rows, codes and noqa all come from stdin; the disk copy is only the display name."""
    (tmp_path / ".git").mkdir()
    document = tmp_path / "train.py"
    document.write_text(IMPORT + "xm.mark_step()\n")  # saved version: one diagnostic on row 2
    buffer = (IMPORT + "\n\n"
              "xm.mark_step()  # noqa: XLA102\n"  # row 4: suppressed in the buffer only
              "xm.get_ordinal()\n"               # row 5
              "\n"
              "xm.mark_step()\n")                # row 7
    result = vscode_flake8(tmp_path, document, buffer, "--xla-target-version=2.9")
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    assert result.stdout == (f"'5,1,X,XLA101:{GET_ORDINAL_REMOVED}'\n"
                             f"'7,1,X,XLA102:{MARK_STEP_TEXT}'\n")
    assert vscode_parse(result.stdout) == [(5, 1, "X", "XLA101", GET_ORDINAL_REMOVED),
                                           (7, 1, "X", "XLA102", MARK_STEP_TEXT)]


def test_vscode_notebook_cell_buffer(tmp_path) -> None:
    """Notebook cells are the case the extension always sends on stdin, named after the .ipynb file."""
    notebook = tmp_path / "explore.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
    cell = IMPORT + "xm.mark_step()\n"
    result = vscode_flake8(tmp_path, notebook, cell, "--xla-target-version=2.9")
    assert result.stderr == ""
    assert vscode_parse(result.stdout) == [(2, 1, "X", "XLA102", MARK_STEP_TEXT)]


def test_vscode_noqa_in_the_buffer_leaves_nothing_and_exits_0(tmp_path) -> None:
    """The saved file would be reported; the buffer's ``# noqa: XLA102`` wins."""
    document = tmp_path / "train.py"
    document.write_text(IMPORT + "xm.mark_step()\n")
    result = vscode_flake8(tmp_path, document, IMPORT + "xm.mark_step()  # noqa: XLA102\n", "--xla-target-version=2.9")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_vscode_target_is_inferred_from_the_project_of_the_display_path(tmp_path) -> None:
    """The workspace folder (the cwd) pins torch_xla 2.9, the sub-project of the file pins 2.6.

    Judged against 2.6, ``xm.mark_step()`` is fine and ``xm.get_ordinal()`` is deprecated; judged against
    the cwd's 2.9 both would be reported and ``get_ordinal`` would be XLA101: the exact output shows
    the requirements file next to the display path won.
    """
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torch_xla>=2.9\n")
    sub = tmp_path / "trainer"
    sub.mkdir()
    (sub / "requirements.txt").write_text("torch_xla[tpu]~=2.6.0\n")
    document = sub / "loop.py"
    document.write_text("")  # on disk, as every document the extension lints through stdin is
    result = vscode_flake8(tmp_path, document, IMPORT + "xm.mark_step()\nxm.get_ordinal()\n")
    assert result.stderr == ""
    assert vscode_parse(result.stdout) == [(3, 1, "X", "XLA102", GET_ORDINAL_DEPRECATED)]

    at_root = tmp_path / "loop.py"
    at_root.write_text("")
    result = vscode_flake8(tmp_path, at_root, IMPORT + "xm.mark_step()\nxm.get_ordinal()\n")
    assert vscode_parse(result.stdout) == [(2, 1, "X", "XLA102", MARK_STEP_TEXT),
                                           (3, 1, "X", "XLA101", GET_ORDINAL_REMOVED)]


# ---------------------------------------------------------------------------------------------
# python-lsp-server
# ---------------------------------------------------------------------------------------------

LSP_TIMEOUT = 60.0


class LspClient:
    """A minimal LSP client over a subprocess's stdio: Content-Length framed JSON-RPC."""

    def __init__(self, proc: subprocess.Popen, log: pathlib.Path) -> None:
        self.proc = proc
        self.log = log
        self.error = None
        self.messages: "queue.Queue" = queue.Queue()
        self.next_id = 0
        self.reader = threading.Thread(target=self._read_loop, daemon=True)
        self.reader.start()

    def _read_loop(self) -> None:
        stream = self.proc.stdout
        try:
            while True:
                headers = {}
                while True:
                    line = stream.readline()
                    if not line:
                        return
                    line = line.decode("ascii").strip()
                    if not line:
                        break
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = stream.read(int(headers["content-length"]))
                self.messages.put(json.loads(body.decode("utf-8")))
        except (OSError, ValueError) as exc:  # a closed pipe, or a frame that is not JSON-RPC
            self.error = exc
        finally:
            self.messages.put(None)  # end of stream

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        request_id = self.next_id
        self.send({"id": request_id, "method": method, "params": params})
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m, f"response to {method}")

    def wait_for(self, predicate, what: str, timeout: float = LSP_TIMEOUT) -> dict:
        """The first message matching ``predicate``; requests from the server are answered with null."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {what} from pylsp within {timeout:.0f} s\n{self._log_tail()}")
            try:
                message = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            if message is None:
                raise AssertionError(f"pylsp stream ended ({self.error!r}) before {what}\n{self._log_tail()}")
            if "method" in message and "id" in message:  # a server->client request
                self.send({"id": message["id"], "result": None})
                continue
            if predicate(message):
                return message

    def _log_tail(self) -> str:
        return "pylsp stderr (tail):\n" + self.log.read_text(errors="replace")[-4000:]

    def diagnostics(self, uri: str, version: int) -> list:
        message = self.wait_for(
            lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                       and m["params"]["uri"] == uri and m["params"].get("version") == version),
            f"publishDiagnostics for version {version} of {uri}")
        return message["params"]["diagnostics"]


def test_pylsp_flake8_plugin_reports_and_clears_xla102(tmp_path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".git").mkdir()
    (workspace / ".flake8").write_text("[flake8]\nxla-target-version = 2.9\n")
    source = IMPORT + "\nxm.mark_step()\n"
    document = workspace / "train.py"
    document.write_text(source)  # the disk copy keeps the call after the buffer drops it
    uri = document.as_uri()
    log = tmp_path / "pylsp.stderr"

    env = dict(os.environ)
    # pylsp runs the ``flake8`` found on PATH: make it this interpreter's, as in an activated venv.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    with open(log, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "pylsp", "-v"], cwd=workspace, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    client = LspClient(proc, log)
    try:
        init = client.request("initialize", {"processId": os.getpid(), "rootUri": workspace.as_uri(),
                                             "capabilities": {}})
        assert init["result"]["serverInfo"]["name"] == "pylsp"
        client.notify("initialized", {})
        client.notify("workspace/didChangeConfiguration", {"settings": {"pylsp": {"plugins": {
            # select=XLA: once the call is gone the unused import (F401) must not fill the list
            "flake8": {"enabled": True, "select": ["XLA"]},
            "pycodestyle": {"enabled": False},
            "pyflakes": {"enabled": False},
            "mccabe": {"enabled": False},
        }}}})
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": source}})
        assert client.diagnostics(uri, 1) == [{
            "source": "flake8",
            "code": "XLA102",
            "range": {"start": {"line": 2, "character": 0},
                      # pylsp ends a flake8 range at the length of the line including its newline
                      "end": {"line": 2, "character": len("xm.mark_step()\n")}},
            "message": f"XLA102 {MARK_STEP_TEXT}",
            "severity": 2,  # Warning: pylsp raises only some pyflakes codes and E999 to Error
        }]

        # Delete line 3 in the buffer (unsaved: the file on disk still has the call).
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": {"line": 2, "character": 0}, "end": {"line": 3, "character": 0}},
                                "text": ""}]})
        assert client.diagnostics(uri, 2) == []
        assert document.read_text() == source

        shutdown = client.request("shutdown", None)
        assert "error" not in shutdown and shutdown["result"] is None
        client.notify("exit", None)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        client.reader.join(timeout=10)  # it stops at end of stream, before the pipes are closed
        proc.stdin.close()
        proc.stdout.close()
