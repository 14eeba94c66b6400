"""A per-project result cache for `flake8-xla check`, so an unchanged file is not parsed again.

An entry is keyed by a hash of everything its diagnostics depend on: the file's content, the
torch_xla target it was judged against, the options that change what is reported before
selection (``assume-torch-xla``), and a fingerprint of flake8-xla's own code and rule data. The
path is not part of the key, so a cache committed or copied to another checkout stays right, and
changed content is never served; the path only lets a file's new entry replace its old one. It stores every diagnostic with its fix applicability, before selection
and `# noqa`, so changing ``--select`` or a comment never needs a re-lint of other files. An
entry also lists the other files of the project its lint read summaries of (a helper in
``utils.py``), each with a hash of its content: it is served only while they are unchanged.

The file is read as untrusted input: anything of the wrong shape is dropped (and rewritten on
save) instead of failing each lint.
"""
from __future__ import annotations

import functools
import json
import os
import re
from stat import S_ISREG
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, Optional, Tuple

import flake8_xla

from .. import __version__, ruledata, stash
from ..rule import APPLICABILITIES, LEVELS, Diagnostic

if TYPE_CHECKING:  # what a check run makes of a fix for SARIF; the cache stores none
    from ..output.formats import SuggestedFix

try:
    from _blake2 import blake2b  # what hashlib would give, without loading OpenSSL (~3 ms a start)
except ImportError:  # another Python implementation
    from hashlib import blake2b

CACHE_DIR_NAME = ".flake8_xla_cache"
# the layout of a results file; another number is another layout (4: diagnostics keep end, level and
# help; 5: a diagnostic's fix applicability, "safe"/"unsafe"/null, instead of true/false/null)
FORMAT = 5
MAX_ENTRIES = 20000  # least recently used entries beyond this are dropped on save
# each diagnostic (its fix applicability set) and the fix's edits when the run asked for them (SARIF).
# Edits cost two parses per fix and are not stored: entries hold None, and a run that wants edits
# does not use the cache.
Entry = List[Tuple[Diagnostic, Optional["SuggestedFix"]]]

# what flake8-xla's behaviour is made of: its code and the rule data shipped beside it
_FINGERPRINTED = (".py", ".yaml", ".yml", ".json")
_PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "tox.ini", ".flake8", ".git")
_RESULTS_RE = re.compile(r"results-[0-9a-f]+\.json")
_GITIGNORE = "# created by flake8-xla\n*\n"
# https://bford.info/cachedir/ : backup and archiving tools skip a directory holding this file
_CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                 "# This file is a cache directory tag created by flake8-xla.\n"
                 "# For information about cache directory tags, see https://bford.info/cachedir/\n")


def _package_roots() -> List[str]:
    # the package's folder and the rule data's; in a wheel the data sits inside the package, so a
    # root inside another is not walked twice
    roots = sorted({os.path.realpath(flake8_xla.__path__[0]), os.path.realpath(ruledata.DATA_DIR)})
    return [root for root in roots if not any(root.startswith(other + os.sep) for other in roots)]


def _files_under(root: str) -> List[str]:
    return [path for path, _ in _listing(root)]


def _listing(root: str) -> List[Tuple[str, os.stat_result]]:
    """The code and data files under ``root`` with their stat, sorted by path (os.walk's choice of
    files: symlinked folders are not entered). Hidden folders (a cache directory, editor state) and
    bytecode are not flake8-xla's behaviour: pruned, not walked and filtered."""
    found = []
    pending = [os.fspath(root)]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if entry.is_dir():
                if name != "__pycache__" and not name.startswith(".") and not entry.is_symlink():
                    pending.append(entry.path)
            elif os.path.splitext(name)[1] in _FINGERPRINTED and not name.startswith("."):
                try:
                    st = entry.stat()
                except OSError:
                    continue
                if S_ISREG(st.st_mode):
                    found.append((entry.path, st))
    found.sort(key=lambda pair: pair[0])
    return found


def fingerprint_files() -> List[str]:
    """Every file the fingerprint covers: flake8-xla's modules (subpackages too) and rule data."""
    return [path for root in _package_roots() for path in _files_under(root)]


def fingerprint_of(roots: Iterable[str], version: str) -> str:
    """Hash of ``version`` and every code / rule data file under ``roots`` (names and bytes)."""
    digest = blake2b(version.encode(), digest_size=12)
    for root in map(os.fspath, roots):
        digest.update(b"\0root\0" + os.path.basename(root).encode("utf-8", "surrogateescape"))
        for path in _files_under(root):
            with open(path, "rb") as handle:
                data = handle.read()
            name = os.path.relpath(path, root).replace(os.sep, "/").encode("utf-8", "surrogateescape")
            # lengths make the stream unambiguous: no file's bytes can pose as the next file's name
            digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
            digest.update(data)
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """Hash of flake8-xla's version, code and rule data. Hashing the ~140 files (1.4 MB) cost 7 ms of
    every run, a tenth of a run over cached files, so the hash is kept in the user's cache under a stamp
    of the files' names, sizes, inodes and modification and change times: a file rewritten in any way (an
    upgrade, an edit, a checkout) gets a new change time, hence a new stamp and a new hash."""
    return remembered_fingerprint(_package_roots(), __version__)


def remembered_fingerprint(roots: List[str], version: str) -> str:
    """:func:`fingerprint_of`, read from the user's cache when the files' stamp is the one it was made for."""
    stamp = _stamp(roots, version)
    memo = os.path.join(stash.user_stash_dir(), f"fingerprint-{stamp}")
    known = stash.read(memo)
    if known is not None and _FINGERPRINT_RE.fullmatch(known):
        return known.decode("ascii")
    value = fingerprint_of(roots, version)
    # one memo per install (named by its location): a new stamp replaces the install's older ones
    stash.write(memo, value.encode("ascii"), stale_prefix=f"fingerprint-{stamp[:_PLACE * 2]}")
    return value


_PLACE = 6  # bytes of a stamp that name the install's location, the rest its files' state
_FINGERPRINT_RE = re.compile(rb"[0-9a-f]{24}")


def _stamp(roots: List[str], version: str) -> str:
    # (on Windows the change time is the creation time: there, a rewrite that kept a file's size and
    # modification time to the nanosecond would go unseen; every ordinary write sets the latter)
    roots = [os.fspath(root) for root in roots]
    place = stash.digest("\0".join([version, *roots]).encode("utf-8", "surrogateescape"), _PLACE)
    state = [f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}"
             for root in roots for path, st in _listing(root)]
    return place + stash.digest("\n".join(state).encode("utf-8", "surrogateescape"), 12)


def content_key(text: str, target: str, assume_xla: bool = False,
                options: Optional[Mapping[str, object]] = None) -> str:
    """The cache key of one file's raw diagnostics: its content, the target, the options that
    change what is reported (``assume_xla``, and any ``options``), and the tool fingerprint."""
    extra = json.dumps(dict(options or {}), sort_keys=True, default=str)
    payload = f"{fingerprint()}\0{target}\0{int(assume_xla)}\0{extra}\0{text}"
    return blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _position(line: object, col: object) -> bool:
    return type(line) is int and line >= 1 and type(col) is int and col >= 0


def _diagnostics(raw: object) -> Optional[Entry]:
    """A stored diagnostics list, or None when any part has the wrong shape."""
    if not isinstance(raw, list):
        return None
    out: Entry = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 9):
            return None
        line, col, code, message, end_line, end_col, level, help, applicability = item
        if not (_position(line, col) and isinstance(code, str) and isinstance(message, str)
                and (_position(end_line, end_col) or end_line is end_col is None)
                and (level is None or level in LEVELS) and (help is None or isinstance(help, str))
                and (applicability is None or applicability in APPLICABILITIES)):
            return None
        out.append((Diagnostic(line, col, code, message, end_line, end_col, level, help,
                               applicability=applicability), None))
    return out


_DIGESTS: Dict[Tuple[str, int, int], str] = {}  # (path, mtime_ns, size) -> digest: one read per file and run


def file_digest(path: str) -> str:
    """A hash of a file's bytes ("" when it cannot be read), for the entries that depend on it."""
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        known = _DIGESTS.get(key)
        if known is None:
            with open(path, "rb") as f:
                known = _DIGESTS[key] = blake2b(f.read(), digest_size=16).hexdigest()
        return known
    except OSError:
        return ""


class ResultCache:
    """The results file of one cache directory (``resolve_cache_dir`` chooses the directory)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"results-{fingerprint()}.json")
        self.entries: Dict[str, dict] = {}
        self.keys: Dict[str, str] = {}  # path -> the key of its latest entry
        self.run = 1
        self.dirty = False
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError, RecursionError):
            data = None  # damaged (or hostile: nested past the parser's limit): start over
        self._load(data)

    def _load(self, data: object) -> None:
        if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("fingerprint") == fingerprint()
                and type(data.get("run")) is int and isinstance(data.get("entries"), dict)):
            self.dirty = True  # the wrong shape: rewrite it on save
            return
        self.run = data["run"] + 1
        for key, entry in data["entries"].items():
            if (isinstance(entry, dict) and type(entry.get("used")) is int and isinstance(entry.get("path"), str)
                    and _diagnostics(entry.get("diagnostics")) is not None):
                self.entries[key] = entry
                self.keys[entry["path"]] = key
            else:
                self.dirty = True

    def get(self, path: str, key: str) -> Optional[Entry]:
        """The diagnostics stored under ``key`` (``path`` is not part of the key: kept for callers),
        unless a project file its lint depended on changed since."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        deps = entry.get("deps")
        if deps and not all(isinstance(d, str) and isinstance(h, str) and file_digest(d) == h
                            for d, h in deps.items()):
            return None
        # recorded for eviction; a run of hits alone does not rewrite the file for it
        entry["used"] = self.run
        return _diagnostics(entry["diagnostics"])

    def put(self, path: str, key: str, diagnostics: Entry, deps: Optional[Mapping[str, str]] = None) -> None:
        """``deps``: path -> :func:`file_digest` of the project files the lint read summaries of."""
        path = os.path.abspath(path)
        old = self.keys.get(path)
        if old is not None and old != key:
            self.entries.pop(old, None)  # the file changed (or its target/options did): one entry per file
        self.keys[path] = key
        # the fields _diagnostics reads: not Diagnostic.data
        stored = [[*d[:8], d.applicability] for d, _ in diagnostics]
        self.entries[key] = {"used": self.run, "path": path, "diagnostics": stored}
        if deps:
            self.entries[key]["deps"] = dict(deps)
        self.dirty = True

    def save(self) -> None:
        """Write atomically; a cache that cannot be written is only a missed speed-up."""
        if not self.dirty:
            return
        if len(self.entries) > MAX_ENTRIES:
            newest = sorted(self.entries.items(), key=lambda item: item[1]["used"], reverse=True)[:MAX_ENTRIES]
            self.entries = dict(newest)
            self.keys = {entry["path"]: key for key, entry in self.entries.items()}
        data = {"format": FORMAT, "fingerprint": fingerprint(), "run": self.run, "entries": self.entries}
        try:
            _prepare(self.directory)
            for stale in os.listdir(self.directory):  # caches of other flake8-xla builds
                full = os.path.join(self.directory, stale)
                if _RESULTS_RE.fullmatch(stale) and full != self.path:
                    os.unlink(full)
            # named by our pid (not tempfile: random and hashlib, ~4 ms of a start); replaced atomically
            tmp = os.path.join(self.directory, f".results-{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(data, f, separators=(",", ":"))
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
            self.dirty = False
        except OSError:
            pass


def _prepare(directory: str) -> None:
    """Create the cache directory; one we create (or created before) is tagged as a cache and
    ignored by git. A directory the user named that exists already is left as it is."""
    ours = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    ignore = os.path.join(directory, ".gitignore")
    if not ours:
        try:
            with open(ignore, encoding="utf-8") as f:
                ours = f.read() == _GITIGNORE
        except OSError:
            return
    if not ours:
        return
    for name, text in ((".gitignore", _GITIGNORE), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)


def _inside_installed_packages(path: str) -> bool:
    parts = path.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def resolve_cache_dir(base_dir: str, explicit: Optional[str] = None) -> str:
    """Where the result cache of the project at ``base_dir`` lives.

    ``explicit`` (``--cache-dir``) wins. Otherwise ``<base_dir>/.flake8_xla_cache`` when
    ``base_dir`` is a project root (it holds pyproject.toml, setup.cfg, tox.ini, .flake8 or .git)
    that is writable and neither ``/`` nor inside an installed environment; else a directory per
    project in the user's cache (``$XDG_CACHE_HOME/flake8-xla/<hash>`` or ``~/.cache/...``), so a
    run from ``/`` or from site-packages writes nothing there.
    """
    if explicit:
        return os.path.abspath(explicit)
    root = os.path.realpath(base_dir)  # judged (and hashed) where it really is
    if (os.path.dirname(root) != root and not _inside_installed_packages(root)
            and any(os.path.exists(os.path.join(root, marker)) for marker in _PROJECT_MARKERS)
            and os.access(root, os.W_OK)):
        return os.path.join(os.path.abspath(base_dir), CACHE_DIR_NAME)
    digest = blake2b(root.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
    return os.path.join(stash.user_cache_home(), "flake8-xla", digest)
