"""Where checkpoints and logs go: a local directory, or a URL in object storage through fsspec.

:func:`location` turns a directory or URL into a small object: a :class:`LocalDirectory` for a
path or a ``file://`` URL, a :class:`RemoteDirectory` for any other URL fsspec knows (``gs://``
through gcsfs, ``s3://`` through s3fs, ``memory://``, ...). Both write a file whole or not at all.
A local file is written beside its target, then renamed over it (``os.replace``). Object stores
have no rename, but one object upload is atomic (the object appears whole or not at all), so a
remote file is written to a local temporary file and uploaded in one go. What needs several files
to be consistent (a checkpoint step) writes a marker last, and readers ignore what has none.

fsspec (a dependency of torch) is imported on first use, not with xla_compat.
"""
from __future__ import annotations

import abc
import contextlib
import os
import re
import shutil
import tempfile
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Tuple, Union

_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_LOCAL_SCHEMES = ("file", "local")  # fsspec's names for the local filesystem
# makedirs on these may create a bucket, and objects need no parent directory there
_BUCKET_STORES = frozenset({"gs", "gcs", "s3", "s3a", "abfs", "abfss", "az", "adl", "oci", "oss"})
# the backends the `storage` extra installs
_EXTRA_PACKAGES = {"gcsfs", "s3fs"}
PathOrUrl = Union[str, "os.PathLike[str]"]


def local_path(path_or_url: PathOrUrl) -> Optional[str]:
    """The local path of a path or a ``file://`` URL; None for any other URL."""
    text = os.fspath(path_or_url)
    if "::" in text and "://" in text:
        raise ValueError(f"{text!r}: chained fsspec URLs are not supported; give the URL of the storage itself "
                         "(gs://bucket/run)")
    match = _URL.match(text)
    if match is None:
        return text
    if match.group(1).lower() not in _LOCAL_SCHEMES:
        return None
    path = text[match.end():]
    return path[len("localhost"):] if path.startswith("localhost/") else path


def location(path_or_url: PathOrUrl, storage_options: Optional[Dict[str, Any]] = None) -> "Directory":
    """The directory at a path or URL. ``storage_options`` go to the fsspec filesystem (a
    ``token``, an ``endpoint_url``, a ``project``, ...); they are ignored for local paths. An
    unknown scheme raises ValueError, a known one whose fsspec backend is not installed ImportError;
    both say what to do."""
    path = local_path(path_or_url)
    if path is not None:
        return LocalDirectory(path)
    text = os.fspath(path_or_url)
    scheme = _URL.match(text)
    url = text[:scheme.end()] + text[scheme.end():].rstrip("/")  # memory:// stays a URL
    protocol = scheme.group(1).lower()
    _check_backend(url, protocol)
    import fsspec

    fs, fs_path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    return RemoteDirectory(fs, fs_path, url, dict(storage_options or {}))


def split(path_or_url: PathOrUrl, storage_options: Optional[Dict[str, Any]] = None) -> Tuple["Directory", str]:
    """The directory holding a file, and the file's name."""
    text = os.fspath(path_or_url)
    path = local_path(text)
    if path is not None:
        return LocalDirectory(os.path.dirname(path) or "."), os.path.basename(path)
    parent, _, name = text.rstrip("/").rpartition("/")
    if not name or parent.endswith(":/"):
        raise ValueError(f"{text!r} names no file: give a path inside a bucket, like gs://bucket/run/file.pt")
    return location(parent, storage_options), name


def _check_backend(url: str, protocol: str) -> None:
    import fsspec
    from fsspec.registry import known_implementations

    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise ValueError(f"unknown storage scheme {protocol}:// in {url!r}: use a local path, a file:// URL or a "
                         "URL scheme fsspec knows (gs://, s3://, az://, memory://, ...: "
                         "fsspec.available_protocols() lists them)") from None
    except ImportError as exc:
        package = known_implementations[protocol]["class"].split(".")[0]
        missing = getattr(exc.__cause__, "name", None) or package
        if package == "fsspec":  # a filesystem of fsspec's own that needs another package (sftp: paramiko)
            package = missing
        extra = "  (or: pip install 'flake8-xla[storage]')" if package in _EXTRA_PACKAGES else ""
        state = "is not installed" if missing == package else f"cannot be imported ({exc.__cause__})"
        raise ImportError(f"{url!r} needs {package}, the fsspec filesystem for {protocol}://, which {state}: "
                          f"pip install {package}{extra}") from exc


class PendingFile:
    """A file being written: nothing is visible at its destination before :meth:`commit`."""

    def __init__(self, file: BinaryIO, temporary: str, publish) -> None:
        self.file = file
        self._temporary = temporary
        self._publish = publish

    def commit(self) -> None:
        self.file.close()
        try:
            self._publish(self._temporary)
        finally:
            if os.path.exists(self._temporary):
                os.unlink(self._temporary)

    def discard(self) -> None:
        self.file.close()
        if os.path.exists(self._temporary):
            os.unlink(self._temporary)


class Directory(abc.ABC):
    """A directory of checkpoint or log files, local or remote; names are relative to it."""

    is_local: bool
    url: str  # as the user named it, for messages

    @abc.abstractmethod
    def join(self, name: str) -> str:
        """The path or URL of ``name`` inside."""

    @abc.abstractmethod
    def child(self, name: str) -> "Directory":
        """The subdirectory ``name``."""

    @abc.abstractmethod
    def names(self) -> List[str]:
        """The names directly inside (files and directories); empty when it does not exist."""

    @abc.abstractmethod
    def exists(self, name: str) -> bool:
        """Whether the file or subdirectory ``name`` exists (as written by another process too)."""

    @abc.abstractmethod
    def makedirs(self) -> None:
        """Create the directory where the storage has directories."""

    @abc.abstractmethod
    def begin_write(self, name: str, suffix: str = "") -> PendingFile:
        """Start writing ``name``; it appears only when the returned file is committed."""

    @abc.abstractmethod
    def write_bytes(self, name: str, data: bytes) -> None:
        """Write a small file whole and durably (a commit marker)."""

    @abc.abstractmethod
    def open_read(self, name: str) -> BinaryIO:
        """The file ``name``, open for reading in binary."""

    @abc.abstractmethod
    def remove(self, name: str) -> None:
        """Remove a file or a whole subdirectory; a missing one is no error."""

    @contextlib.contextmanager
    def writing(self, name: str, suffix: str = "") -> Iterator[BinaryIO]:
        """A binary file that reaches ``name`` whole when the block ends, and never if it raises."""
        pending = self.begin_write(name, suffix)
        try:
            yield pending.file
        except BaseException:
            pending.discard()
            raise
        pending.commit()

    def upload(self, source: str, name: str) -> None:
        """Copy the local file ``source`` to ``name``, whole."""
        with open(source, "rb") as original, self.writing(name) as copy:
            shutil.copyfileobj(original, copy)

    def __str__(self) -> str:
        return self.url


class LocalDirectory(Directory):
    is_local = True

    def __init__(self, path: str) -> None:
        self.path = path
        self.url = path

    def join(self, name: str) -> str:
        return os.path.join(self.path, name)

    def child(self, name: str) -> "LocalDirectory":
        return LocalDirectory(self.join(name))

    def names(self) -> List[str]:
        try:
            return os.listdir(self.path)
        except FileNotFoundError:
            return []

    def exists(self, name: str) -> bool:
        return os.path.exists(self.join(name))

    def makedirs(self) -> None:
        os.makedirs(self.path, exist_ok=True)

    def begin_write(self, name: str, suffix: str = "") -> PendingFile:
        # beside the target, so that the rename stays on one filesystem
        fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=self.path)
        target = self.join(name)
        return PendingFile(os.fdopen(fd, "wb"), temporary, lambda written: os.replace(written, target))

    def write_bytes(self, name: str, data: bytes) -> None:
        target = self.join(name)
        with open(target + ".tmp", "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(target + ".tmp", target)

    def open_read(self, name: str) -> BinaryIO:
        return open(self.join(name), "rb")

    def remove(self, name: str) -> None:
        target = self.join(name)
        if os.path.isdir(target):
            shutil.rmtree(target, ignore_errors=True)
        elif os.path.exists(target):
            os.unlink(target)


class RemoteDirectory(Directory):
    is_local = False

    def __init__(self, fs: Any, path: str, url: str, storage_options: Dict[str, Any]) -> None:
        self.fs = fs
        self.path = path.rstrip("/")
        self.url = url
        self.storage_options = storage_options

    def join(self, name: str) -> str:
        return f"{self.url}/{name}"

    def child(self, name: str) -> "RemoteDirectory":
        return RemoteDirectory(self.fs, self._path(name), self.join(name), self.storage_options)

    def _path(self, name: str) -> str:
        return f"{self.path}/{name}"

    def names(self) -> List[str]:
        self.fs.invalidate_cache(self.path)  # other processes write here: a cached listing goes stale
        try:
            entries = self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return []
        own = self.path.strip("/")
        return sorted({entry.rstrip("/").rsplit("/", 1)[-1] for entry in entries if entry.strip("/") != own})

    def exists(self, name: str) -> bool:
        self.fs.invalidate_cache(self._path(name))
        return self.fs.exists(self._path(name))

    def makedirs(self) -> None:
        if not _BUCKET_STORES & set(_protocols(self.fs)):
            self.fs.makedirs(self.path, exist_ok=True)

    def begin_write(self, name: str, suffix: str = "") -> PendingFile:
        fd, temporary = tempfile.mkstemp(prefix=".tmp-xla_compat-", suffix=suffix)
        target = self._path(name)
        return PendingFile(os.fdopen(fd, "wb"), temporary, lambda written: self.fs.put_file(written, target))

    def write_bytes(self, name: str, data: bytes) -> None:
        self.fs.pipe_file(self._path(name), data)

    def open_read(self, name: str) -> BinaryIO:
        return self.fs.open(self._path(name), "rb")

    def upload(self, source: str, name: str) -> None:
        self.fs.put_file(source, self._path(name))  # one object upload: no local copy needed

    def remove(self, name: str) -> None:
        try:
            self.fs.rm(self._path(name), recursive=True)
        except FileNotFoundError:
            pass


def _protocols(fs: Any) -> Tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
