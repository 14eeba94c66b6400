"""How text reaches a terminal: names that stay on one line and survive any output encoding, whether to
colour, and writes that never crash on an ASCII stdout."""
from __future__ import annotations

import os
from typing import Optional, TextIO

COLOR_CHOICES = ("auto", "always", "never")


def printable(text: str) -> str:
    """``text`` with bytes that are not UTF-8 (a file name read through surrogateescape) as
    ``\\xff`` and control characters as ``\\n``, ``\\x1b``, ...: one diagnostic stays one line,
    and every encoding (JSON, SARIF, an ASCII terminal) can carry it."""
    if text.isprintable():
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that did not come from a file name's bytes
        raw = text.encode("utf-8", "backslashreplace")
    decoded = raw.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in decoded)


def display_name(path: str, stdin_name: Optional[str] = None) -> str:
    """A path as shown to the user: relative to the working directory when inside it."""
    if path == "-":
        if not stdin_name:
            return "stdin"
        path = stdin_name
    relative = os.path.relpath(path)
    return printable(path if relative.startswith("..") else relative)


def emit(text: str, stream: TextIO) -> None:
    """Write ``text``; what the stream's encoding cannot carry is written as backslash escapes."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))


def wants_color(choice: str, stream: TextIO) -> bool:
    """--color: ``always`` and ``never`` are the user's word; ``auto`` colours a terminal unless
    NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
