"""A per-project result cache for `flake8-xla check`, so an unchanged file is not parsed again.

An entry is keyed by the file's content hash, the torch_xla target it was judged against and
whether it was linted as torch_xla code whatever it imports (``assume-torch-xla``), and the whole
cache by a fingerprint of flake8-xla's own code and rule data: any change to either starts a
fresh cache. It stores every diagnostic with its fix safety, before selection and
`# noqa`, so changing ``--select`` or a comment never needs a re-lint of other files.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import tempfile
from typing import Dict, List, Optional, Tuple

from . import __version__
from .rule import Diagnostic

CACHE_DIR_NAME = ".flake8_xla_cache"
Entry = List[Tuple[Diagnostic, Optional[bool]]]  # fix safety: True safe, False unsafe, None no fix


@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """Hash of flake8-xla's version, code and rule data."""
    digest = hashlib.blake2b(__version__.encode(), digest_size=12)
    import flake8_xla
    import flake8_xla.rules

    roots = {pathlib.Path(p) for package in (flake8_xla, flake8_xla.rules) for p in package.__path__}
    for root in sorted(roots):
        for path in sorted(root.glob("*.py")) + sorted(root.glob("*.yaml")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def content_key(text: str, target: str, assume_xla: bool = False) -> str:
    return hashlib.blake2b(f"{target}\0{int(assume_xla)}\0{text}".encode("utf-8", "surrogatepass"),
                           digest_size=16).hexdigest()


class ResultCache:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"results-{fingerprint()}.json")
        self.entries: Dict[str, dict] = {}
        self.dirty = False
        try:
            with open(self.path, encoding="utf-8") as f:
                self.entries = json.load(f)
        except (OSError, ValueError):
            self.entries = {}  # no cache yet, or a damaged one: start over

    def get(self, path: str, key: str) -> Optional[Entry]:
        entry = self.entries.get(os.path.abspath(path))
        if entry is None or entry.get("key") != key:
            return None
        return [(Diagnostic(*d[:4]), d[4]) for d in entry["diagnostics"]]

    def put(self, path: str, key: str, diagnostics: Entry) -> None:
        self.entries[os.path.abspath(path)] = {
            "key": key, "diagnostics": [[*d, safe] for d, safe in diagnostics]}
        self.dirty = True

    def save(self) -> None:
        """Write atomically; a cache that cannot be written is only a missed speed-up."""
        if not self.dirty:
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
            ignore = os.path.join(self.directory, ".gitignore")
            if not os.path.exists(ignore):
                with open(ignore, "w", encoding="utf-8") as f:
                    f.write("# created by flake8-xla\n*\n")
            for stale in os.listdir(self.directory):  # caches of other flake8-xla versions
                if stale.startswith("results-") and os.path.join(self.directory, stale) != self.path:
                    os.unlink(os.path.join(self.directory, stale))
            fd, tmp = tempfile.mkstemp(prefix=".results-", dir=self.directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.entries, f, separators=(",", ":"))
            os.replace(tmp, self.path)
        except OSError:
            pass
