"""Reading a file's bytes safely (regular files only, size capped) and decoding them as Python does."""
from __future__ import annotations

import math
import os
import re
import stat
import sys
import tokenize
from typing import NamedTuple, Optional

MIB = 1024 * 1024
DEFAULT_MAX_FILE_SIZE = 10 * MIB  # far above any hand-written module; stops /dev/zero-like input early
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": MIB, "g": 1024 * MIB}


def parse_size(text: str) -> int:
    """``10M``, ``512K``, ``1G`` or a number of bytes (binary units)."""
    match = _SIZE.match(text)
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"not a size: {text!r} (expected a positive number of bytes, or e.g. 512K, 10M, 1G)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def format_size(size: int) -> str:
    for unit, factor in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


class NotRead(ValueError):
    """A file that is not read at all (not a regular file, or over the size cap); the message says why."""


def _too_large(max_size: int, size: Optional[int]) -> NotRead:
    suggested = max(math.ceil((size or max_size + 1) / MIB), max_size // MIB + 1)
    return NotRead(f"larger than the {format_size(max_size)} size cap; not read "
                   f"(raise the cap with --max-file-size, e.g. --max-file-size {suggested}M)")


def describe_file_type(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def read_file_bytes(path: str, max_size: int) -> bytes:
    """The bytes of a regular file (or a link to one), at most ``max_size``. Opened without
    blocking, so a FIFO is refused instead of waiting for a writer forever."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRead(f"not a regular file ({describe_file_type(mode)}); not read")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as f:
        info = os.fstat(fd)  # the file actually opened (the path may have been replaced since the stat)
        if not stat.S_ISREG(info.st_mode):
            raise NotRead(f"not a regular file ({describe_file_type(info.st_mode)}); not read")
        if info.st_size > max_size:
            raise _too_large(max_size, info.st_size)
        data = f.read(max_size + 1)
    if len(data) > max_size:  # it grew while we read it
        raise _too_large(max_size, None)
    return data


def read_stdin_bytes(max_size: int) -> bytes:
    data = sys.stdin.buffer.read(max_size + 1)
    if len(data) > max_size:
        raise _too_large(max_size, None)
    return data


class Source(NamedTuple):
    text: str
    encoding: str


def decode_source(data: bytes, document: bool) -> Source:
    """Decode like Python does (PEP 263 cookie, BOM); a notebook or document as UTF-8. Raise
    ValueError with a clear reason."""
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
    return Source(text, encoding)
