"""Small files flake8-xla keeps between runs to start faster: derived data only (the rule data as
parsed, the fingerprint of the installed code), so a missing, unreadable, damaged or stale one is
ignored and rebuilt, never trusted. Each holds a checksum of its payload, checked on every read.

They live in the user's cache directory (``$XDG_CACHE_HOME/flake8-xla/startup``); the rule data's
copies first beside the data, in ``rules/__pycache__`` like .pyc files, when that can be written.
"""
from __future__ import annotations

import marshal
import os
from typing import Callable, Optional, Sequence, Tuple

try:
    from _blake2 import blake2b  # what hashlib would give, without loading OpenSSL (~3 ms a start)
except ImportError:  # another Python implementation
    from hashlib import blake2b

_MAGIC = b"flake8-xla stash 1\n"
_CHECK = 16  # bytes of blake2b over the payload, after the magic


def user_cache_home() -> str:
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative one
        return xdg
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return os.environ["LOCALAPPDATA"]
    return os.path.join(os.path.expanduser("~"), ".cache")


def user_stash_dir() -> str:
    return os.path.join(user_cache_home(), "flake8-xla", "startup")


def digest(data: bytes, size: int = 16) -> str:
    return blake2b(data, digest_size=size).hexdigest()


def read(path: str) -> Optional[bytes]:
    """The payload stored at ``path``, or None when there is none or it is not intact."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    head = len(_MAGIC) + _CHECK
    if not data.startswith(_MAGIC) or len(data) < head:
        return None
    payload = data[head:]
    if blake2b(payload, digest_size=_CHECK).digest() != data[len(_MAGIC):head]:
        return None  # damaged: a torn write by another tool, a disk error, an edit
    return payload


def write(path: str, payload: bytes, stale_prefix: Optional[str] = None) -> bool:
    """Store ``payload`` at ``path`` atomically (a concurrent reader sees the old file or the whole new
    one); then remove the files of the same directory whose names start with ``stale_prefix`` (earlier
    versions of the same thing). False when the directory cannot be written."""
    folder = os.path.dirname(path)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(_MAGIC + blake2b(payload, digest_size=_CHECK).digest() + payload)
        os.replace(temporary, path)
    except OSError:
        try:
            os.remove(temporary)
        except OSError:
            pass
        return False
    if stale_prefix:
        name = os.path.basename(path)
        try:
            for other in os.listdir(folder):
                if other.startswith(stale_prefix) and other != name and not other.endswith(".tmp"):
                    os.remove(os.path.join(folder, other))
        except OSError:
            pass  # another run removed it first
    return True


def load_or_parse(copies: Sequence[Tuple[str, str]], parse: Callable[[], object]) -> Tuple[object, Optional[bytes]]:
    """Parsed data and its marshal form: from the first intact copy of ``copies`` ((path, stale prefix)
    pairs, the preferred place first), else ``parse()``'s, then kept in the first place that can be
    written. Data marshal cannot hold (dates, times) has no copy and is parsed every time."""
    for path, _ in copies:
        payload = read(path)
        if payload is not None:
            try:
                return marshal.loads(payload), payload
            except (EOFError, ValueError, TypeError):
                pass  # intact but not this Python's marshal data: parse again
    data = parse()
    try:
        payload = marshal.dumps(data)
    except ValueError:
        return data, None
    for path, stale_prefix in copies:
        if write(path, payload, stale_prefix=stale_prefix):
            break
    return data, payload
