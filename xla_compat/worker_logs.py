"""One log file per worker process, written by the kernel so that nothing is lost when it is killed.

:func:`log_worker` points the process's stdout and stderr (file descriptors 1 and 2, so native
code and child processes are captured too) at ``LOG_DIR/rank-N-HOST.log``, makes Python's
streams line-buffered, and enables ``faulthandler`` there: a fatal signal dumps every thread's
stack into the file, and ``SIGUSR1`` dumps them on demand (the launcher and the watchdog ask for
it). Uncaught exceptions reach the file through stderr like any other output.

``log_dir`` may be a URL (``gs://bucket/logs``, ``s3://...``; :mod:`xla_compat.storage`): the file is
then written in a local staging directory (:func:`staging_dir`) and a :class:`LogShipper` thread
uploads it every ``ship_every`` seconds (30 by default) and at exit, so that the log of a rank
survives its VM up to the last upload.
"""
from __future__ import annotations

import atexit
import faulthandler
import hashlib
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from . import storage
from .runtime import global_ordinal

STACKS_SIGNAL = signal.SIGUSR1
SHIP_EVERY = 30.0  # seconds between two uploads of a log to object storage
current_log_dir: Optional[str] = None  # set by log_worker: the LOCAL directory written (Watchdog reads it)
current_log_url: Optional[str] = None  # set by log_worker when log_dir is a URL: where the logs are shipped
current_shipper: Optional["LogShipper"] = None  # the thread shipping this process's log, if any
_early_exit_hook = False  # stop_shipping is registered with threading's exit hooks


def log_path(log_dir: str, rank: int, host: Optional[str] = None) -> str:
    return os.path.join(log_dir, f"rank-{rank}-{host or socket.gethostname()}.log")


def staging_dir(log_dir: str) -> str:
    """The local directory the log files of ``log_dir`` are written to: ``log_dir`` itself when it
    is local (a ``file://`` URL gives its path), else a directory of its own under the temporary
    directory, the same in every process of this host."""
    local = storage.local_path(log_dir)
    if local is not None:
        return local
    url = log_dir.rstrip("/")
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", url).strip("-")[:64]
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]  # two URLs that read alike stay apart
    return os.path.join(tempfile.gettempdir(), "xla_compat-logs", f"{readable}-{digest}")


def log_worker(log_dir: str, rank: Optional[int] = None, echo: bool = True, ship_every: float = SHIP_EVERY,
               storage_options: Optional[Dict[str, Any]] = None) -> str:
    """Send this process's output to its own file in ``log_dir`` and return the file's path.

    Call it first thing in a worker (under ``xmp.spawn``, ``torch_xla.launch``, ``torchrun`` or
    ``torch.multiprocessing``). ``rank`` defaults to the ``RANK`` environment variable, then to
    torch_xla's global ordinal. With ``echo`` the lines also reach the original console, prefixed
    with ``[rank N]`` (:func:`xla_compat.launch` echoes for its workers itself). ``log_dir`` may be
    a URL such as ``gs://bucket/logs`` (``storage_options`` go to fsspec): the file is written in
    :func:`staging_dir` and uploaded every ``ship_every`` seconds and at exit."""
    if rank is None:
        rank = int(os.environ["RANK"]) if "RANK" in os.environ else global_ordinal()
    global current_log_dir, current_log_url
    local_dir = staging_dir(log_dir)
    # before the output moves to the file: a bad URL is reported on the console
    destination = None if storage.local_path(log_dir) is not None else storage.location(log_dir, storage_options)
    os.makedirs(local_dir, exist_ok=True)
    current_log_dir = local_dir
    current_log_url = None if destination is None else destination.url
    path = log_path(local_dir, rank)
    console = os.dup(1) if echo else None
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True)
    print(f"[xla_compat] rank {rank}, pid {os.getpid()}, host {socket.gethostname()}", flush=True)
    if console is not None:
        Echo({path: f"[rank {rank}] "}, os.fdopen(console, "w", buffering=1)).start()
    if destination is not None:
        _ship(LogShipper(local_dir, destination.url, ship_every, storage_options, names=[os.path.basename(path)]))
    return path


def _ship(shipper: "LogShipper") -> None:
    global current_shipper
    stop_shipping()  # a second log_worker call replaces the first one's shipper
    current_shipper = shipper
    shipper.start()
    # gcsfs and s3fs close their HTTP session from weakref.finalize's exit hook, which weakref hands
    # to atexit with the first finalize made in the process: make one now, so that hook is registered
    # before this one, which then runs first (last in, first out) and ships while the session is open
    weakref.finalize(shipper, lambda: None)
    atexit.unregister(stop_shipping)
    atexit.register(stop_shipping)
    _ship_before_thread_pools_close()


def _ship_before_thread_pools_close() -> None:
    """Ship at interpreter shutdown before the thread pools refuse work: s3fs (aiobotocore) resolves
    names in asyncio's thread pool, and concurrent.futures closes every pool in threading's exit
    hooks, which run before atexit's. Those hooks run last registered first, so concurrent.futures
    is imported (its hook registered) before ours. ``stop_shipping`` ships once; atexit stays the
    fallback where threading has no such hooks."""
    global _early_exit_hook
    register = getattr(threading, "_register_atexit", None)
    if register is None or _early_exit_hook:
        return
    import concurrent.futures.thread  # noqa: F401

    try:
        register(stop_shipping)
    except RuntimeError:  # the interpreter is already shutting down
        return
    _early_exit_hook = True


def stop_shipping() -> None:
    """Ship this process's log a last time and stop its shipper (run at exit; call it before
    ``os._exit``, which skips exit handlers)."""
    global current_shipper
    if current_shipper is not None:
        shipper, current_shipper = current_shipper, None
        shipper.stop()


def last_lines(path: str, count: int = 20) -> List[str]:
    """The last ``count`` lines of a log file (an empty list when it does not exist)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            data = handle.read()
    except FileNotFoundError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-count:]


class Echo(threading.Thread):
    """Copies the lines appended to some log files to a console, each with its own prefix."""

    def __init__(self, prefixes: dict, console: TextIO, interval: float = 0.05) -> None:
        super().__init__(name="xla_compat-echo", daemon=True)
        self.prefixes = prefixes
        self.console = console
        self.interval = interval
        self._offsets = {path: 0 for path in prefixes}
        self._partial = {path: b"" for path in prefixes}
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.is_set():
            self.pump()
            self._stopped.wait(self.interval)
        self.pump()

    def pump(self) -> None:
        for path, prefix in self.prefixes.items():
            try:
                with open(path, "rb") as handle:
                    handle.seek(self._offsets[path])
                    data = handle.read()
            except FileNotFoundError:
                continue
            self._offsets[path] += len(data)
            *lines, self._partial[path] = (self._partial[path] + data).split(b"\n")
            for line in lines:
                self.console.write(prefix + line.decode("utf-8", "replace") + "\n")
        self.console.flush()

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=5)


class LogShipper(threading.Thread):
    """Uploads the files of a local log directory to a URL every ``interval`` seconds, each file
    whole (one object write) and only when it changed since its last upload; :meth:`stop` uploads
    a last time. ``names`` limits it to some files (default: every file in ``local_dir``). A failed
    upload is reported on stderr and tried again at the next interval."""

    def __init__(self, local_dir: str, url: str, interval: float = SHIP_EVERY,
                 storage_options: Optional[Dict[str, Any]] = None, names: Optional[Sequence[str]] = None) -> None:
        super().__init__(name="xla_compat-log-shipper", daemon=True)
        if interval <= 0:
            raise ValueError(f"the shipping interval must be positive, got {interval}")
        self.local_dir = local_dir
        self.url = url
        self.interval = interval
        self.names = None if names is None else list(names)
        self.destination = storage.location(url, storage_options)
        self.last_error: Optional[BaseException] = None
        self._shipped: Dict[str, Tuple[int, int]] = {}  # name -> (size, mtime) at its last upload
        self._lock = threading.Lock()  # the thread and stop() may ship at once
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            self.ship_now()

    def ship_now(self) -> List[str]:
        """Upload the files that changed since their last upload; returns their names."""
        with self._lock:
            shipped = []
            for name in self._candidates():
                try:
                    stat = os.stat(os.path.join(self.local_dir, name))
                except FileNotFoundError:
                    continue
                version = (stat.st_size, stat.st_mtime_ns)
                if self._shipped.get(name) == version:
                    continue
                try:
                    self.destination.upload(os.path.join(self.local_dir, name), name)
                except Exception as exc:  # the network may come back: try again next time
                    self._report(exc)
                    continue
                self._shipped[name] = version
                self.last_error = None
                shipped.append(name)
            return shipped

    def stop(self) -> None:
        """Stop the thread and ship a last time."""
        self._stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=60)  # an upload under way ends first
        self.ship_now()

    def _candidates(self) -> List[str]:
        if self.names is not None:
            return self.names
        try:
            return sorted(n for n in os.listdir(self.local_dir) if os.path.isfile(os.path.join(self.local_dir, n)))
        except FileNotFoundError:
            return []

    def _report(self, exc: BaseException) -> None:
        if repr(exc) != repr(self.last_error):  # once per outage, not every interval
            sys.stderr.write(f"[xla_compat] cannot ship logs to {self.url}: {exc}\n")
            sys.stderr.flush()
        self.last_error = exc
