"""The exit statuses of a job's processes and what each means: shared by the launcher, the
checkpoint manager and the watchdog, which sit at different layers."""
from __future__ import annotations

import signal
from typing import Optional

PREEMPTED_EXIT_CODE = 75  # EX_TEMPFAIL: the job stopped to be restarted, not because it failed
WATCHDOG_EXIT_CODE = 124  # as timeout(1): the job was stopped because a rank died or stalled
_MEANINGS = {PREEMPTED_EXIT_CODE: "preempted: restart the job to resume",
             WATCHDOG_EXIT_CODE: "stopped by the watchdog"}


def describe_exit(code: Optional[int]) -> str:
    """``exit code 75 (preempted: ...)``, ``killed by SIGKILL``: a process's exit status in words."""
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    meaning = _MEANINGS.get(code)
    return f"exit code {code}" + (f" ({meaning})" if meaning else "")
