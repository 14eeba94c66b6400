"""A Watchdog's heartbeat on its own host, for the launcher: the one process that can stop a worker
frozen whole.

A frozen worker (SIGSTOP, a native call that holds the GIL, a hung driver) runs no Python, so its
own Watchdog cannot act; the Watchdogs of the other ranks notice it, but cannot stop a process on
another host, whose launcher would wait for it forever. So the launchers of xla_compat
(``launch(log_dir=...)``, ``python -m xla_compat.torchrun``) give their workers a directory
(``XLA_COMPAT_EXIT_DIR``), each Watchdog rewrites its record there every interval, and the launcher
kills a worker whose record stopped changing for its timeout plus two intervals: later than the
other ranks' Watchdogs, whose report then already names it.
"""
from __future__ import annotations

import json
import os
import signal
import time
from typing import Dict, List, Optional, Tuple

from .exits import EXIT_DIR_VARIABLE, WATCHDOG_EXIT_CODE, record_exit

_NAME = "heartbeat-rank-{rank}.json"


def publish(record: dict) -> None:
    """Write a Watchdog's record (``rank``, ``pid``, ``host``, ``step``, ``tick``, ``timeout``,
    ``interval``) where this host's launcher reads it; nothing without an xla_compat launcher."""
    directory = os.environ.get(EXIT_DIR_VARIABLE)
    if not directory:
        return
    path = os.path.join(directory, _NAME.format(rank=record["rank"]))
    try:
        with open(f"{path}.{os.getpid()}.tmp", "w") as handle:
            json.dump(record, handle)
        os.replace(f"{path}.{os.getpid()}.tmp", path)
    except OSError:  # the launcher is gone with its directory: nobody to tell
        pass


def withdraw(rank: int) -> None:
    """A closed Watchdog: its rank is finished, not frozen."""
    directory = os.environ.get(EXIT_DIR_VARIABLE)
    if directory:
        try:
            os.unlink(os.path.join(directory, _NAME.format(rank=rank)))
        except OSError:
            pass


def gone(rank: int, record: dict, silent: float) -> str:
    """The report's words for a rank whose heartbeat stopped ``silent`` seconds ago."""
    return (f"rank {rank} (pid {record['pid']}, host {record['host']}) sent no heartbeat for {silent:.0f} s "
            f"after step {record['step']}: the process is gone or frozen")


class FrozenWorkers:
    """The launcher's side: which of this host's workers stopped beating. Silence is measured on
    the launcher's own clock from the last change it saw, as the Watchdog measures its peers."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._seen: Dict[int, Tuple[int, float]] = {}  # rank -> (tick, when it last changed)
        self._stopped: set = set()

    def check(self) -> List[Tuple[dict, float]]:
        """(record, seconds of silence) of each live worker frozen since the last check; a worker
        that exited without closing its Watchdog is not frozen."""
        now = time.monotonic()
        frozen = []
        for rank, record in self._records().items():
            tick, since = self._seen.get(rank, (None, now))
            if record.get("tick") != tick:
                self._seen[rank] = (record.get("tick"), now)
            elif (rank not in self._stopped and now - since > record["timeout"] + 2 * record["interval"]
                  and _running(record["pid"])):
                frozen.append((record, now - since))
        return frozen

    def stop(self, record: dict, silent: float) -> str:
        """Kill a frozen worker (only SIGKILL reaches it) and record the watchdog's status for it;
        returns the reason."""
        self._stopped.add(record["rank"])
        record_exit(WATCHDOG_EXIT_CODE, rank=record["rank"], directory=self.directory)
        try:
            os.kill(record["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
        return gone(record["rank"], record, silent)

    def _records(self) -> Dict[int, dict]:
        records = {}
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return {}
        for name in names:
            if name.startswith("heartbeat-rank-") and name.endswith(".json"):
                record = _read(os.path.join(self.directory, name))
                if record is not None:
                    records[record["rank"]] = record
        return records


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (or is stopped), not exited: an exited child stays a zombie until its
    parent reaps it, and signal 0 reaches a zombie."""
    if not os.path.isdir("/proc"):  # macOS: whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _read(path: str) -> Optional[dict]:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):  # withdrawn meanwhile
        return None
