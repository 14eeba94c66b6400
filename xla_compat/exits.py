"""The exit statuses of a job's processes and what each means: shared by the launcher, the
checkpoint manager and the watchdog, which sit at different layers."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

PREEMPTED_EXIT_CODE = 75  # EX_TEMPFAIL: the job stopped to be restarted, not because it failed
WATCHDOG_EXIT_CODE = 124  # as timeout(1): the job was stopped because a rank died or stalled
_MEANINGS = {PREEMPTED_EXIT_CODE: "preempted: restart the job to resume",
             WATCHDOG_EXIT_CODE: "stopped by the watchdog"}


# the directory a launcher that cannot see why its workers exit (torchrun) reads their statuses from
EXIT_DIR_VARIABLE = "XLA_COMPAT_EXIT_DIR"


def record_exit(code: int, rank: Optional[int] = None, directory: Optional[str] = None) -> None:
    """Record, for such a launcher, the status this process is about to exit with (or, from the
    launcher, the status of ``rank``, which it stops)."""
    directory = directory or os.environ.get(EXIT_DIR_VARIABLE)
    if not directory:
        return
    path = os.path.join(directory, f"rank-{os.environ.get('RANK', os.getpid()) if rank is None else rank}")
    try:
        with open(f"{path}.{os.getpid()}.tmp", "w") as handle:
            handle.write(f"{code} {time.monotonic()}\n")  # the clock every process of the host shares
        os.replace(f"{path}.{os.getpid()}.tmp", path)
    except OSError:  # the launcher is gone with its directory: nobody to tell
        pass


def recorded_exits(directory: str) -> Dict[int, int]:
    """Rank -> the status recorded with :func:`record_exit` in ``directory``."""
    return {rank: code for rank, (code, _) in _records(directory).items()}


def recorded_exit_times(directory: str) -> Dict[int, float]:
    """Rank -> when it recorded its status (``time.monotonic()``, comparable across this host's
    processes): of two ranks that fail together, the one that recorded first failed first."""
    return {rank: when for rank, (_, when) in _records(directory).items()}


def _records(directory: str) -> Dict[int, Tuple[int, float]]:
    records = {}
    for name in os.listdir(directory):
        if name.startswith("rank-") and name[5:].isdigit():
            with open(os.path.join(directory, name)) as handle:
                code, when = handle.read().split()
            records[int(name[5:])] = (int(code), float(when))
    return records


# Set by a Watchdog that is stopping this process: a collective failing in the main thread
# meanwhile is a consequence, and the watchdog's status, not that failure's, is the exit status.
watchdog_stopping = threading.Event()


def defer_to_watchdog(timeout: float = 60.0) -> None:
    """When a Watchdog is stopping this process, wait (up to ``timeout``) for it to exit."""
    if watchdog_stopping.is_set():
        time.sleep(timeout)


def describe_exit(code: Optional[int]) -> str:
    """``exit code 75 (preempted: ...)``, ``killed by SIGKILL``: a process's exit status in words."""
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    meaning = _MEANINGS.get(code)
    return f"exit code {code}" + (f" ({meaning})" if meaning else "")


# what a rank stopped by the watchdog leaves in its log directory, for the launcher's summary
_WATCHDOG_STOP = "watchdog-stop-rank-{rank}.json"
WATCHDOG_REPORT = "watchdog-report.txt"


def write_watchdog_stop(log_dir: str, rank: int, reason: str, causes: List[Dict[str, Any]]) -> None:
    """Record why the watchdog stopped ``rank``: its reason and the ranks it names as the cause,
    each ``{"rank", "host", "pid", "state"}`` (state ``gone`` or ``stuck``)."""
    path = os.path.join(log_dir, _WATCHDOG_STOP.format(rank=rank))
    with open(path + ".tmp", "w") as handle:
        json.dump({"rank": rank, "reason": reason, "causes": causes}, handle)
    os.replace(path + ".tmp", path)


def clear_watchdog_stops(log_dir: str, ranks: List[int], report: bool = True) -> None:
    """Remove what an earlier job's watchdog left for ``ranks`` (and its report) in a reused log
    directory."""
    for name in [_WATCHDOG_STOP.format(rank=rank) for rank in ranks] + [WATCHDOG_REPORT] * report:
        try:
            os.unlink(os.path.join(log_dir, name))
        except FileNotFoundError:
            pass


def read_watchdog_stop(log_dir: str, rank: int) -> Optional[Dict[str, Any]]:
    """What :func:`write_watchdog_stop` recorded for ``rank``, or None."""
    try:
        with open(os.path.join(log_dir, _WATCHDOG_STOP.format(rank=rank))) as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):
        return None
