"""``python -m xla_compat.torchrun [torchrun arguments]``: torchrun, exiting with the job's status.

torchrun exits 1 whenever a worker exits non-zero and when it is itself sent SIGTERM, so a
scheduler cannot tell a preemption that saved a checkpoint (restart it) or a watchdog stop from a
crash. This runs torchrun's own entry point with the same arguments, then exits with:

- 0 when every worker succeeded;
- 124 when the first worker to fail was stopped by an :class:`xla_compat.Watchdog`;
- 75 when every worker that failed exited 75 (a :class:`xla_compat.CheckpointManager` saved the
  preemption step); also after a SIGTERM to torchrun (a preemptible VM's shutdown), when every
  worker of this host then saved and exited 75 (torchrun passes the SIGTERM on and waits 30 s);
- 128 + N after signal N reached torchrun and the workers did not all save;
- 1 otherwise.

The companions tell it their status through files in a directory named by
``XLA_COMPAT_EXIT_DIR``, which the workers inherit: torchrun reports neither the status of a worker
it stopped nor any status after a signal. A Watchdog's heartbeat goes there too: a worker frozen
whole is killed here once its heartbeat is silent for the Watchdog's timeout plus two intervals
(:mod:`xla_compat.heartbeats`), so a host whose only workers froze still ends, with 124.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from typing import Dict, List, Optional

from .exits import (EXIT_DIR_VARIABLE, PREEMPTED_EXIT_CODE, WATCHDOG_EXIT_CODE, describe_exit,
                    recorded_exits)
from .heartbeats import FrozenWorkers


def job_status(failures: Dict[int, int], first: Optional[int], recorded: Dict[int, int],
               signalled: Optional[int], local_workers: Optional[int]) -> int:
    """The exit status of a torchrun job: ``failures`` maps the ranks torchrun saw fail to their
    exit codes (``first`` failed first), ``recorded`` the statuses the companions recorded,
    ``signalled`` the signal torchrun received, ``local_workers`` this host's worker count."""
    status = {**failures, **recorded}  # a recorded status survives the stop torchrun then sends
    if first is not None and status.get(first) == WATCHDOG_EXIT_CODE:
        return WATCHDOG_EXIT_CODE
    if signalled is not None:
        saved = [code for code in recorded.values() if code == PREEMPTED_EXIT_CODE]
        everyone = local_workers is None or len(recorded) >= local_workers
        if saved and len(saved) == len(recorded) and everyone:
            return PREEMPTED_EXIT_CODE
        return 128 + signalled
    if failures:
        return PREEMPTED_EXIT_CODE if all(status[r] == PREEMPTED_EXIT_CODE for r in failures) else 1
    return 0


def _local_workers(argv: List[str]) -> Optional[int]:
    from torch.distributed import run

    value = str(run.parse_args(argv).nproc_per_node)
    return int(value) if value.isdigit() else None


def main(argv: Optional[List[str]] = None) -> int:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    argv = sys.argv[1:] if argv is None else argv
    local_workers = _local_workers(argv)  # parses the arguments first: --help and errors exit here
    exit_dir = tempfile.mkdtemp(prefix="xla_compat-exits-")
    os.environ[EXIT_DIR_VARIABLE] = exit_dir
    failures: Dict[int, int] = {}
    first: Optional[int] = None
    signalled: Optional[int] = None
    done = threading.Event()
    threading.Thread(target=_stop_frozen_workers, args=(exit_dir, done), name="xla_compat-frozen-workers",
                     daemon=True).start()
    try:
        run.main(argv)
    except ChildFailedError as failed:
        failures = {rank: failure.exitcode for rank, failure in failed.failures.items()}
        first = failed.get_first_failure()[0]
        sys.stderr.write(f"{failed.format_msg() if hasattr(failed, 'format_msg') else failed}\n")
    except SignalException as stop:
        signalled = int(stop.sigval)
    finally:
        done.set()
        recorded = recorded_exits(exit_dir)
        shutil.rmtree(exit_dir, ignore_errors=True)
    status = job_status(failures, first, recorded, signalled, local_workers)
    sys.stderr.write(f"xla_compat.torchrun: {describe_exit(status)}\n")
    return status


def _stop_frozen_workers(exit_dir: str, done: threading.Event, every: float = 0.5) -> None:
    frozen = FrozenWorkers(exit_dir)
    while not done.wait(every):
        for record, silent in frozen.check():
            sys.stderr.write(f"xla_compat.torchrun: {frozen.stop(record, silent)}; killed it\n")
            sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
