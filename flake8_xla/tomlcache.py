"""A project's TOML files (pyproject.toml) as parsed data, without importing the TOML parser on
every run: importing tomllib costs more than the rest of a run over cached files (its patterns
compile at import). The parsed data is kept as a checked marshal copy in the user's cache, named by
a hash of the file's bytes (see flake8_xla.stash), so changed text is always parsed again, and a file
that does not parse raises as tomllib does, every time (a failure is never kept).
"""
from __future__ import annotations

import marshal
import os
import sys
from typing import Dict, Optional, Tuple

from . import stash

# the parser's version is part of a copy's name: another Python may read TOML (a little) differently
_PARSER = f"{sys.implementation.cache_tag}-{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
_LOADED: Dict[str, Tuple[bytes, Optional[bytes]]] = {}  # path -> its bytes and their data's marshal form


def load(path: str) -> dict:
    """``tomllib.load`` of ``path`` (OSError when it cannot be read, ValueError when it is not TOML);
    each call returns tables of its own, as its own parse would."""
    with open(path, "rb") as handle:
        raw = handle.read()
    known = _LOADED.get(path)  # the config and the target read the same file in one run
    if known is not None and known[0] == raw and known[1] is not None:
        return marshal.loads(known[1])
    place = stash.digest(os.path.realpath(path).encode("utf-8", "surrogateescape"), 6)
    copy = os.path.join(stash.user_stash_dir(), f"toml-{place}-{stash.digest(raw + _PARSER.encode(), 12)}")
    data, payload = stash.load_or_parse([(copy, f"toml-{place}-")], lambda: _parse(raw))
    _LOADED[path] = (raw, payload)
    return data


def _parse(raw: bytes) -> dict:
    try:
        import tomllib  # type: ignore[import-not-found]
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(raw.decode())  # what tomllib.load does with the bytes it reads
