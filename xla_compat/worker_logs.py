"""One log file per worker process, written by the kernel so that nothing is lost when it is killed.

:func:`log_worker` points the process's stdout and stderr (file descriptors 1 and 2, so native
code and child processes are captured too) at ``LOG_DIR/rank-N-HOST.log``, makes Python's
streams line-buffered, and enables ``faulthandler`` there: a fatal signal dumps every thread's
stack into the file, and ``SIGUSR1`` dumps them on demand (the launcher and the watchdog ask for
it). Uncaught exceptions reach the file through stderr like any other output.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import socket
import sys
import threading
from typing import List, Optional, TextIO

from .runtime import global_ordinal

STACKS_SIGNAL = signal.SIGUSR1
current_log_dir: Optional[str] = None  # set by log_worker, the default of Watchdog(log_dir=)


def log_path(log_dir: str, rank: int, host: Optional[str] = None) -> str:
    return os.path.join(log_dir, f"rank-{rank}-{host or socket.gethostname()}.log")


def log_worker(log_dir: str, rank: Optional[int] = None, echo: bool = True) -> str:
    """Send this process's output to its own file in ``log_dir`` and return the file's path.

    Call it first thing in a worker (under ``xmp.spawn``, ``torch_xla.launch``, ``torchrun`` or
    ``torch.multiprocessing``). ``rank`` defaults to the ``RANK`` environment variable, then to
    torch_xla's global ordinal. With ``echo`` the lines also reach the original console, prefixed
    with ``[rank N]`` (:func:`xla_compat.launch` echoes for its workers itself)."""
    if rank is None:
        rank = int(os.environ["RANK"]) if "RANK" in os.environ else global_ordinal()
    global current_log_dir
    os.makedirs(log_dir, exist_ok=True)
    current_log_dir = log_dir
    path = log_path(log_dir, rank)
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
    return path


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
