"""The server's end of the wire: LSP base-protocol framing on stdio, and the JSON-RPC rules pygls
2.1 leaves out.

pygls 2.1's reader stays deaf after one malformed frame, drops a request whose params do not
structure without answering it, answers nothing after ``shutdown``, and keeps a future per
notification for ever. Here a malformed frame is reported on stderr and skipped (the reader finds
the next ``Content-Length`` header), a request gets its JSON-RPC error, and finished futures are
dropped.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from typing import BinaryIO, List, NamedTuple, Optional, Union

import cattrs
from lsprotocol import types as lsp
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, RPCRequest

HEADER_LIMIT = 64 * 1024  # a header block this long is not a header: resynchronise
CHUNK = 64 * 1024
EARLY_LIMIT = 1024 * 1024  # a message shorter than its Content-Length is looked for up to this size
MARKER = b"content-length:"
HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*")
JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002


class Malformed(NamedTuple):
    """Bytes from the client that are no message; the reader has skipped them."""

    reason: str


class MessageReader:
    """Splits the client's bytes into JSON messages (``feed``). After a malformed frame it skips to
    the next ``Content-Length`` header, so one bad message costs that message only."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._lost = False  # skipping to the next header

    def feed(self, chunk: bytes) -> List[Union[object, Malformed]]:
        self._data += chunk
        out: List[Union[object, Malformed]] = []
        while True:
            items = self._next()
            if not items:
                return out
            out.extend(items)

    def _next(self) -> List[Union[object, Malformed]]:
        if self._lost and not self._resynchronise():
            return []
        while self._data[:1] in (b" ", b"\t", b"\r", b"\n"):  # between messages: not a header
            del self._data[:1]
        end = self._data.find(b"\r\n\r\n")
        if end < 0:
            if len(self._data) <= HEADER_LIMIT:
                return []
            return [self._skip(f"no end of headers in {len(self._data)} bytes")]
        length, problem = _content_length(bytes(self._data[:end]))
        if problem:
            return [self._skip(problem)]
        start = end + 4
        if len(self._data) < start + length:
            # a Content-Length too large: the message may be complete, the client waiting for the answer
            used = self._complete_object(start) if len(self._data) - start < EARLY_LIMIT else None
            if used is None:
                return []
            body = bytes(self._data[start:start + used])
            del self._data[:start + used]
            return [json.loads(body), _too_large(length, used)]
        body = bytes(self._data[start:start + length])
        del self._data[:start + length]
        return self._decode(body, length)

    def _complete_object(self, start: int) -> Optional[int]:
        """The length of the JSON object that is all of the buffer from ``start``, if it is one."""
        tail = bytes(self._data[start:])
        if not tail.rstrip().endswith(b"}"):
            return None  # cheap: a message still arriving rarely ends at a brace
        try:
            text = tail.decode("utf-8")
            _, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return None
        return len(tail) if not text[end:].strip() else None

    def _decode(self, body: bytes, length: int) -> List[Union[object, Malformed]]:
        try:
            return [json.loads(body)]
        except ValueError as exc:
            problem = f"the body is not JSON ({exc})"
        # a Content-Length too large swallows the start of the next message: give that back
        try:
            text = body.decode("utf-8")
            value, end = json.JSONDecoder().raw_decode(text)
            rest = text[end:].lstrip()
        except ValueError:
            rest = ""
        if rest.lower().startswith(MARKER.decode()):
            self._data[:0] = rest.encode("utf-8")
            used = len(text[:end].encode("utf-8"))
            return [value, _too_large(length, used)]
        self._lost = True  # a Content-Length too small leaves the rest of the body in front of the next header
        return [Malformed(problem)]

    def _skip(self, problem: str) -> Malformed:
        del self._data[:1]  # the next header may sit inside what was read as this one
        self._lost = True
        return Malformed(problem)

    def _resynchronise(self) -> bool:
        at = self._data.lower().find(MARKER)
        if at < 0:
            del self._data[:max(len(self._data) - len(MARKER) + 1, 0)]
            return False
        del self._data[:at]
        self._lost = False
        return True


def _too_large(length: int, used: int) -> Malformed:
    return Malformed(f"Content-Length {length} is larger than its message ({used} bytes)")


def _content_length(header: bytes):
    """The body length a header block declares, or the reason it declares none."""
    length = None
    for line in header.split(b"\r\n"):
        match = HEADER_LINE.fullmatch(line)
        if match is None:
            return 0, f"not a header line: {line[:80]!r}"
        if match.group(1).lower() == b"content-length":
            if not match.group(2).isdigit():
                return 0, f"Content-Length is not a byte count: {match.group(2)[:40]!r}"
            length = int(match.group(2))
    if length is None:
        return 0, "no Content-Length header"
    return length, None


class XlaProtocol(LanguageServerProtocol):
    loop: Optional[asyncio.AbstractEventLoop] = None  # the loop serve_stream runs on

    def receive(self, data: object) -> None:
        """Handle one decoded message; answer a request that cannot be handled with its error."""
        if not isinstance(data, dict):
            kind = JSON_KINDS.get(type(data), "value")
            self._refuse(None, INVALID_REQUEST, f"not a JSON-RPC 2.0 message: a JSON {kind}")
            return
        request_id, method = data.get("id"), data.get("method")
        if data.get("jsonrpc") != "2.0" or not (method is None or isinstance(method, str)):
            self._refuse(request_id, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
            return
        try:
            message = self._converter.structure(data, self._message_type(data))
        except cattrs.BaseValidationError as exc:  # pygls' own structuring would log a traceback too
            self._refuse(request_id if method else None, INVALID_PARAMS,
                         f"invalid params for {method}: {_explain(exc)}")
            return
        except Exception as exc:  # noqa: BLE001 - the server goes on with the next message
            self._refuse(request_id if method else None, INVALID_REQUEST,
                         f"cannot read {method or 'the message'}: {exc}")
            return
        self.handle_message(message)

    def _message_type(self, data: dict) -> type:
        """The lsprotocol type of a message (pygls' choice in ``structure_message``)."""
        method = data.get("method")
        if "id" not in data:
            return self.get_message_type(method or "") or JsonRPCNotification
        if "error" in data:
            return lsp.ResponseErrorMessage
        if method is not None:
            return self.get_message_type(method) or JsonRPCRequestMessage
        return self._result_types.pop(data["id"], None) or JsonRPCResponseMessage

    def handle_message(self, message) -> None:
        method = getattr(message, "method", None)
        if self._workspace is None and method not in (None, lsp.INITIALIZE, lsp.EXIT):
            if isinstance(message, RPCRequest):  # LSP: a notification before initialize is dropped
                self._refuse(message.id, SERVER_NOT_INITIALIZED, f"{method} before initialize")
            return
        if self._shutdown and isinstance(message, RPCRequest) and method != lsp.EXIT:
            self._refuse(message.id, INVALID_REQUEST, f"{method} after shutdown: only exit is accepted")
            return
        super().handle_message(message)

    def _refuse(self, request_id, code: int, message: str) -> None:
        """A request gets the error as its response; anything else is reported on stderr."""
        if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
            self._send_response(request_id, error=lsp.ResponseError(code, message))
        else:
            report(f"ignored a message: {message}")

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:  # pygls keeps it for cancellation; drop it once it is done
            future.add_done_callback(lambda done: self._forget(msg_id, done))

    def _forget(self, msg_id, future) -> None:
        # later, on the loop: a future is done in a worker thread, or while shutdown walks the map
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._drop, msg_id, future)
        else:
            self._drop(msg_id, future)

    def _drop(self, msg_id, future) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]


def _explain(error: Optional[BaseException]) -> str:
    """What is wrong with a message's fields, by their JSON names (``params.textDocument``)."""
    if not isinstance(error, cattrs.BaseValidationError):
        return str(error) or type(error).__name__
    problems = []
    for line in cattrs.transform_error(error, path="$"):
        problem, _, path = line.rpartition(" @ $.")
        problems.append(f"{problem} @ {re.sub(r'_([a-z])', lambda m: m.group(1).upper(), path)}" if problem else line)
    return "; ".join(problems)


def report(message: str) -> None:
    sys.stderr.write(f"flake8-xla server: {message}\n")
    sys.stderr.flush()


def _raw_reader(stream: BinaryIO):
    """Read what has arrived, up to ``n`` bytes. On a file descriptor, past the buffered reader: a
    daemon thread blocked inside it would hold its lock when the interpreter finalizes stdin."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return getattr(stream, "read1", stream.read)
    return lambda n: os.read(descriptor, n)


async def serve_stream(stream: BinaryIO, protocol: XlaProtocol) -> None:
    """Read messages from ``stream`` until it ends (or a handler exits)."""
    loop = protocol.loop = asyncio.get_running_loop()
    chunks: "asyncio.Queue[bytes]" = asyncio.Queue()

    def pump() -> None:  # a daemon thread: a blocked read never holds up the exit
        read = _raw_reader(stream)
        while True:
            try:
                chunk = read(CHUNK)
            except (OSError, ValueError):  # a closed stdin ends the input as EOF does
                chunk = b""
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, chunk)
            except RuntimeError:  # the loop is closed: the server has exited
                return
            if not chunk:
                return

    threading.Thread(target=pump, name="flake8-xla-stdin", daemon=True).start()
    reader = MessageReader()
    while True:
        chunk = await chunks.get()
        if not chunk:
            return
        for item in reader.feed(chunk):
            if isinstance(item, Malformed):
                report(f"skipped a malformed message: {item.reason}; reading on from the next Content-Length header")
            else:
                protocol.receive(item)


__all__ = ["Malformed", "MessageReader", "XlaProtocol", "report", "serve_stream"]
