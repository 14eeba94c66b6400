"""The language server's wire (flake8_xla/lsp/transport.py): framing that survives a malformed
message, JSON-RPC errors for requests it cannot handle, shutdown and exit, and what it keeps per
notification. The reader is tested on bytes; the rest on the real server over its stdio."""
import asyncio
import json
import pathlib
import queue
import subprocess
import sys
import threading
import time
from typing import List

import pytest
from lsprotocol import types as lsp

from flake8_xla.lsp.transport import Malformed, MessageReader
from lsp_editor import Editor, run

WAIT = 120  # seconds: a hang guard only


def frame(message, length=None, headers=b"") -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    declared = str(len(body) if length is None else length).encode()
    return headers + b"Content-Length: " + declared + b"\r\n\r\n" + body


PING = {"jsonrpc": "2.0", "method": "ping", "params": {"n": 1}}
PONG = {"jsonrpc": "2.0", "method": "pong", "params": {"text": "Content-Length: 3"}}


def read_all(data: bytes, chunk: int = 0) -> List:
    reader = MessageReader()
    if not chunk:
        return reader.feed(data)
    return [item for start in range(0, len(data), chunk) for item in reader.feed(data[start:start + chunk])]


@pytest.mark.parametrize("chunk", [0, 1, 7])
def test_messages_split_anywhere_are_read_whole(chunk) -> None:
    data = frame(PING) + frame(PONG, headers=b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n")
    assert read_all(data, chunk) == [PING, PONG]


@pytest.mark.parametrize("bad, reason", [
    (frame(PING, length="abc"), "Content-Length is not a byte count: b'abc'"),
    (b"Content-Lenght: 40\r\n\r\n" + json.dumps(PING).encode(), "no Content-Length header"),
    (b"garbage\r\n\r\n{}", "not a header line: b'garbage'"),
    (frame(b"{not json"), "the body is not JSON (Expecting property name enclosed in double quotes: "
                          "line 1 column 2 (char 1))"),
    (frame(PING, length=10), "the body is not JSON (Expecting ':' delimiter: line 1 column 11 (char 10))"),
])
@pytest.mark.parametrize("chunk", [0, 1])
def test_a_malformed_message_is_skipped_and_the_next_one_read(bad, reason, chunk) -> None:
    assert read_all(frame(PING) + bad + frame(PONG), chunk) == [PING, Malformed(reason), PONG]


def test_a_content_length_too_large_gives_back_the_next_message() -> None:
    first = json.dumps(PING).encode()
    larger = Malformed(f"Content-Length {len(first) + 30} is larger than its message ({len(first)} bytes)")
    assert read_all(frame(first, length=len(first) + 30) + frame(PONG) + frame(PING)) == [PING, larger, PONG, PING]


def test_a_message_shorter_than_its_content_length_is_read_without_waiting_for_more() -> None:
    """The client may send nothing more until it is answered (initialize)."""
    first = json.dumps(PING).encode()
    reader = MessageReader()
    assert reader.feed(frame(first, length=len(first) + 30)) == [
        PING, Malformed(f"Content-Length {len(first) + 30} is larger than its message ({len(first)} bytes)")]
    assert reader.feed(frame(PONG)) == [PONG]
    # a message still arriving is not mistaken for one that ended
    assert reader.feed(frame(PONG)[:-2]) == []
    assert reader.feed(frame(PONG)[-2:]) == [PONG]


def test_blank_lines_between_messages_are_skipped() -> None:
    assert read_all(frame(PING) + b"\r\n\n " + frame(PONG)) == [PING, PONG]


def test_a_header_block_that_never_ends_is_dropped_in_bounded_memory() -> None:
    reader = MessageReader()
    assert reader.feed(b"x" * 70000) == [Malformed("no end of headers in 70000 bytes")]
    assert reader.feed(b"y" * 70000) == []
    assert len(reader._data) < 100  # what it keeps while it looks for the next header
    assert reader.feed(frame(PING)) == [PING]


# --- the real server over stdio ----------------------------------------------------------------

class Wire:
    """The server as a subprocess, spoken to in raw bytes; its messages and stderr lines queued."""

    def __init__(self, cwd: pathlib.Path, command=(sys.executable, "-m", "flake8_xla", "server")) -> None:
        self.proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.messages: "queue.Queue" = queue.Queue()
        self.stderr: "queue.Queue" = queue.Queue()
        self.received: List[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.stderr_reader = threading.Thread(
            target=lambda: [self.stderr.put(line.decode()) for line in self.proc.stderr], daemon=True)
        self.stderr_reader.start()
        self.stderr_seen: List[str] = []
        self.next_id = 0

    def _read(self) -> None:
        reader = MessageReader()
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            for message in reader.feed(chunk):
                self.messages.put(message)
        self.messages.put(None)

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def notify(self, method: str, params) -> None:
        self.send(frame({"jsonrpc": "2.0", "method": method, "params": params}))

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        self.send(frame({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        return self.response(self.next_id)

    def response(self, request_id) -> dict:
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m)

    def wait_for(self, predicate) -> dict:
        while True:
            message = self.messages.get(timeout=WAIT)
            assert message is not None, "the server closed its output"
            self.received.append(message)
            if "method" in message and "id" in message:  # a request from the server
                self.send(frame({"jsonrpc": "2.0", "id": message["id"], "result": None}))
            elif predicate(message):
                return message

    def stderr_line(self, containing: str) -> str:
        while True:
            line = self.stderr.get(timeout=WAIT)
            self.stderr_seen.append(line)
            if containing in line:
                return line.rstrip("\n")

    def all_stderr(self) -> List[str]:
        """Every line the server wrote to stderr, once it has exited."""
        self.stderr_reader.join(timeout=WAIT)
        return self.stderr_seen + list(self.stderr.queue)

    def initialize(self, root: pathlib.Path) -> dict:
        result = self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}})
        self.notify("initialized", {})
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=WAIT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()


@pytest.fixture
def wire(tmp_path):
    (tmp_path / ".flake8").write_text("[flake8]\nxla-target-version = 2.9\n")
    opened = []

    def start(command=None) -> Wire:
        opened.append(Wire(tmp_path, *([command] if command else [])))
        return opened[-1]

    yield start
    for each in opened:
        each.close()


def test_a_bad_content_length_is_reported_and_the_server_reads_on(wire, tmp_path) -> None:
    server = wire()
    server.send(b"Content-Length: twelve\r\n\r\n" + json.dumps(PING).encode())
    assert server.initialize(tmp_path)["result"]["serverInfo"]["name"] == "flake8-xla"
    assert server.stderr_line("malformed") == (
        "flake8-xla server: skipped a malformed message: Content-Length is not a byte count: b'twelve'; "
        "reading on from the next Content-Length header")
    shutdown = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "shutdown"}).encode()
    server.send(frame(shutdown, length=len(shutdown) + 50))  # then waits for the answer
    assert server.response(9) == {"jsonrpc": "2.0", "id": 9, "result": None}
    assert server.stderr_line("malformed") == (
        f"flake8-xla server: skipped a malformed message: Content-Length {len(shutdown) + 50} is larger than "
        f"its message ({len(shutdown)} bytes); reading on from the next Content-Length header")
    server.send(frame(b"[1, 2"))
    assert server.stderr_line("malformed").startswith("flake8-xla server: skipped a malformed message: "
                                                      "the body is not JSON (")
    server.send(frame(b"[1, 2]"))  # a batch: LSP has none
    assert server.stderr_line("ignored") == \
        "flake8-xla server: ignored a message: not a JSON-RPC 2.0 message: a JSON array"
    server.notify("exit", None)
    assert server.proc.wait(timeout=WAIT) == 0


def test_requests_the_server_cannot_take_get_their_json_rpc_error(wire, tmp_path) -> None:
    server = wire()
    server.notify("textDocument/didOpen", {"textDocument": {  # before initialize: dropped
        "uri": (tmp_path / "early.py").as_uri(), "languageId": "python", "version": 1,
        "text": "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"}})
    server.send(frame({"jsonrpc": "2.0", "id": 0, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": (tmp_path / "early.py").as_uri()}, "position": {"line": 1, "character": 0}}}))
    assert server.response(0) == {"jsonrpc": "2.0", "id": 0, "error": {
        "code": -32002, "message": "textDocument/hover before initialize"}}
    server.initialize(tmp_path)
    # bad params: -32602, naming what is wrong
    assert server.request("textDocument/hover", {"position": {"line": 0}}) == {
        "jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": (
            "invalid params for textDocument/hover: required field missing @ params.textDocument; "
            "required field missing @ params.position.character")}}
    # a notification with bad params gets no response (JSON-RPC), only a line on stderr
    server.notify("textDocument/didOpen", {"textDocument": {"uri": 3}})
    assert server.stderr_line("didOpen").startswith(
        "flake8-xla server: ignored a message: invalid params for textDocument/didOpen: ")
    # not JSON-RPC 2.0: -32600
    server.send(frame({"id": 7, "method": "textDocument/hover", "params": {}}))
    assert server.response(7) == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32600, "message": "not a JSON-RPC 2.0 message"}}
    # an unknown method: -32601 (pygls)
    assert server.request("flake8-xla/unknown", {})["error"]["code"] == -32601

    assert server.request("shutdown", None)["result"] is None
    assert server.request("textDocument/hover", {
        "textDocument": {"uri": (tmp_path / "a.py").as_uri()}, "position": {"line": 0, "character": 0}}) == {
        "jsonrpc": "2.0", "id": 5, "error": {
            "code": -32600, "message": "textDocument/hover after shutdown: only exit is accepted"}}
    server.notify("exit", None)
    assert server.proc.wait(timeout=WAIT) == 0
    assert not [m for m in server.received if m.get("method") == "textDocument/publishDiagnostics"]
    assert not [line for line in server.all_stderr() if "Traceback" in line]  # one line per problem


BLOCKING = """\
import sys, threading
from flake8_xla.engine import all_rules
rule = next(r for r in all_rules() if r.code == "XLA101")
check_fixable = type(rule).check_fixable
def blocking(self, ctx):
    if any("block" in line for line in ctx.lines):
        sys.stderr.write("lint blocked\\n"); sys.stderr.flush()
        threading.Event().wait()  # a lint that never ends
    return check_fixable(self, ctx)
type(rule).check_fixable = blocking
from flake8_xla.cli import main
sys.exit(main(["server"]))
"""


@pytest.mark.parametrize("shut_down, status", [(True, 0), (False, 1)])
def test_shutdown_and_exit_do_not_wait_for_a_running_lint(wire, tmp_path, shut_down, status) -> None:
    """The lint never ends: shutdown is answered while it runs, its diagnostics are never sent,
    and exit ends the process (before, the interpreter waited for the worker thread)."""
    server = wire((sys.executable, "-c", BLOCKING))
    server.initialize(tmp_path)
    server.notify("textDocument/didOpen", {"textDocument": {
        "uri": (tmp_path / "big.py").as_uri(), "languageId": "python", "version": 1,
        "text": "import torch_xla.core.xla_model as xm  # block\nxm.mark_step()\n"}})
    assert server.stderr_line("lint") == "lint blocked"
    if shut_down:
        assert server.request("shutdown", None) == {"jsonrpc": "2.0", "id": 2, "result": None}
    server.notify("exit", None)
    assert server.proc.wait(timeout=WAIT) == status
    assert [m.get("id") for m in server.received] == ([1, 2] if shut_down else [1])


GATED = """\
import os, sys, threading, time
from flake8_xla.engine import all_rules
rule = next(r for r in all_rules() if r.code == "XLA101")
check_fixable = type(rule).check_fixable
running = []
lock = threading.Lock()
def gated(self, ctx):
    if any("slow" in line for line in ctx.lines):
        with lock:
            running.append(1)
            sys.stderr.write(f"lint started, {len(running)} running\\n"); sys.stderr.flush()
        while not os.path.exists("release"):  # the test lets the lint end by creating the file
            time.sleep(0.01)
        with lock:
            running.pop()
    return check_fixable(self, ctx)
type(rule).check_fixable = gated
from flake8_xla.cli import main
sys.exit(main(["server"]))
"""


def test_edits_to_a_file_being_linted_wait_for_that_lint(wire, tmp_path) -> None:
    """Each pause in typing used to start another lint of a slow file next to the running ones (each
    as large in memory); now the next lint starts when the running one ends, on the latest text."""
    server = wire((sys.executable, "-c", GATED))
    server.initialize(tmp_path)
    uri = (tmp_path / "slow.py").as_uri()
    text = "import torch_xla.core.xla_model as xm  # slow\nxm.mark_step()\n"
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": text}})
    assert server.stderr_line("lint") == "lint started, 1 running"
    for version in (2, 3):
        text += "xm.mark_step()\n"
        server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [{"text": text}]})
        time.sleep(0.5)  # past the pause after an edit (DEBOUNCE_SECONDS): a lint of it could start
    (tmp_path / "release").write_text("")
    published = server.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")["params"]
    assert (published["version"], len(published["diagnostics"])) == (3, 3)
    assert server.stderr_line("lint") == "lint started, 1 running"  # version 3's, after version 1's ended


RETAINED = """\
import asyncio, gc, sys
from concurrent.futures import Future
import flake8_xla.lsp.server as server_module
build = server_module.build_server
def counting():
    server = build()
    @server.command("test.retained")
    def retained(ls, *args):
        gc.collect()
        futures = sum(isinstance(o, (Future, asyncio.Future)) for o in gc.get_objects())
        return {"request_futures": len(ls.protocol._request_futures), "pending": len(ls.pending),
                "tasks": len(asyncio.all_tasks()), "futures": futures}
    return server
server_module.build_server = counting
from flake8_xla.cli import main
sys.exit(main(["server"]))
"""


def test_what_the_server_keeps_does_not_grow_with_the_number_of_edits(tmp_path) -> None:
    (tmp_path / ".flake8").write_text("[flake8]\nxla-target-version = 2.9\n")
    text = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"

    async def scenario():
        async with Editor(tmp_path, command=(sys.executable, "-c", RETAINED)) as editor:
            editor.open("open.py", "import torch_xla\n")
            uri = editor.open("train.py", text)
            await editor.diagnostics(uri, version=1)

            async def after(edits: int) -> dict:
                for _ in range(edits):
                    editor.change(uri, text)
                await editor.diagnostics(uri, version=editor.versions[uri])
                return await asyncio.wait_for(editor.client.workspace_execute_command_async(
                    lsp.ExecuteCommandParams("test.retained")), WAIT)

            first = await after(200)
            second = await after(400)
            assert second == first
            assert first["request_futures"] <= 1  # the command's own

    run(scenario())
