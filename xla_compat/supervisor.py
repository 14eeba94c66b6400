"""The launcher behind ``xla_compat.launch(fn, log_dir=...)``: one process per device, each with its
own log file, watched until the job ends, then a summary of every rank's exit.

Each worker does what upstream's ``run_multiprocess`` does in its processes (the same
``torch_xla._internal.pjrt`` set-up, so devices are assigned as under ``xmp.spawn``), after pointing
its output at ``LOG_DIR/rank-N-HOST.log``. The launcher echoes those files to the console with a
``[rank N]`` prefix. When a worker fails (a non-zero exit or a signal), the others are asked for
their stacks (SIGUSR1, into their logs), then stopped (SIGTERM, then SIGKILL), so the job never
hangs on a dead rank; a worker whose :class:`xla_compat.Watchdog` heartbeat stops (the whole process
frozen) is killed (:mod:`xla_compat.heartbeats`). A SIGTERM or SIGINT to the launcher is passed on
to the workers, which lets a :class:`xla_compat.CheckpointManager` save before a preemptible VM goes
away.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from . import _upstream as up
from .exits import (EXIT_DIR_VARIABLE, PREEMPTED_EXIT_CODE, WATCHDOG_EXIT_CODE, clear_watchdog_stops,
                    defer_to_watchdog, describe_exit, read_watchdog_stop, record_exit, recorded_exit_times,
                    write_watchdog_stop)
from .heartbeats import FrozenWorkers
from .resume import catch_preemption
from . import storage
from .worker_logs import (SHIP_EVERY, STACKS_SIGNAL, Echo, LogShipper, last_lines, log_path, log_worker,
                          staging_dir, stop_shipping)

__all__ = ["JobFailed", "launch", "supervise", "PREEMPTED_EXIT_CODE", "WATCHDOG_EXIT_CODE"]


class JobFailed(RuntimeError):
    """A worker of :func:`xla_compat.launch` failed; the message names the first rank to fail."""


def launch(fn: Callable, args: Sequence = (), start_method: str = "spawn", debug_single_process: bool = False,
           log_dir: Optional[str] = None, nprocs: Optional[int] = None,
           storage_options: Optional[Dict[str, Any]] = None) -> Any:
    """Start ``fn(index, *args)`` in one process per device. Upstream: ``torch_xla.launch`` (2.5+);
    before, ``xmp.spawn`` (with ``nprocs=1`` for a single debug process). With ``log_dir`` (or
    ``nprocs``) xla_compat starts the processes itself, with upstream's per-process set-up: each
    writes ``LOG_DIR/rank-N-HOST.log``, a failed worker stops the others instead of leaving them
    hanging, and a summary of every rank's exit is printed (``xla_compat.supervisor``)."""
    if log_dir is not None or nprocs is not None:
        return supervise(fn, args, log_dir or "xla_compat-logs", nprocs=1 if debug_single_process else nprocs,
                         start_method=start_method, storage_options=storage_options)
    launcher = getattr(up.torch_xla(), "launch", None)
    if launcher is not None:
        return launcher(fn, args=tuple(args), start_method=start_method, debug_single_process=debug_single_process)
    return up.xmp().spawn(fn, args=tuple(args), nprocs=1 if debug_single_process else None, start_method=start_method)


def process_rank(local_rank: int, nprocs: int) -> int:
    """The global rank of this host's ``local_rank``-th process, numbered by host as PJRT numbers
    processes: host index (``TPU_WORKER_ID`` on a TPU VM, else ``NODE_RANK``, else 0) x ``nprocs``."""
    host = int(os.environ.get("TPU_WORKER_ID", os.environ.get("NODE_RANK", "0")))
    return host * nprocs + local_rank


def local_process_count() -> int:
    """How many processes upstream's launcher starts on this host (one per chip; one on CPU)."""
    plugins = _optional("torch_xla.experimental.plugins")  # 2.3+
    if plugins is not None and plugins.using_dynamic_plugins():
        return plugins.default().physical_chip_count()
    kind = up.xr().device_type()
    if kind in ("TPU", "NEURON"):
        return up.module(f"torch_xla._internal.{kind.lower()}").num_local_processes()
    return 1


def _optional(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _worker_main(local_rank: int, nprocs: int, rank: int, fn: Callable, args: tuple, log_dir: str) -> None:
    os.environ.setdefault("LOCAL_RANK", str(local_rank))
    os.environ.setdefault("LOCAL_WORLD_SIZE", str(nprocs))
    os.environ.setdefault("RANK", str(rank))
    log_worker(log_dir, rank, echo=False)
    catch_preemption()  # here, on the main thread: fn runs in a device thread
    pjrt = up.module("torch_xla._internal.pjrt")
    call = functools.partial(_call_with_rank, fn, rank, args)
    # what upstream's run_multiprocess runs in each of its processes, 2.1 through 2.9
    pjrt._run_thread_per_device(local_rank, nprocs, call, pjrt.initialize_multiprocess)


def _call_with_rank(fn: Callable, rank: int, args: tuple) -> Any:
    # Exit from the device thread itself: upstream's thread pool would re-raise the error wrapped
    # in its own frames, and a SystemExit (a CheckpointManager's preemption exit) must keep its code.
    try:
        return fn(rank, *args)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        defer_to_watchdog()  # an error caused by the watchdog stopping the job: its 124 wins
        code = 1
    record_exit(code)  # when: of two ranks that fail together, the first is the cause
    sys.stdout.flush()
    sys.stderr.flush()
    stop_shipping()  # a log fn shipped itself: os._exit skips the exit upload
    os._exit(code)


def supervise(fn: Callable, args: Sequence, log_dir: str, nprocs: Optional[int] = None,
              start_method: str = "spawn", stacks_wait: float = 2.0, grace: float = 10.0,
              storage_options: Optional[Dict[str, Any]] = None, ship_every: float = SHIP_EVERY) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes (default: one per chip, as upstream) with a
    log file each; print a summary at the end. Raises :class:`JobFailed` when a worker failed,
    ``SystemExit(124)`` when a :class:`xla_compat.Watchdog` stopped the job (its summary names the
    rank the watchdog found gone, frozen or stuck, not the rank that noticed) and
    ``SystemExit(75)`` when the workers stopped for preemption. ``log_dir`` may be a URL
    (``gs://bucket/logs``; ``storage_options`` go to fsspec): the workers then write in
    :func:`xla_compat.worker_logs.staging_dir` and the launcher uploads every file there (logs,
    reports, the summary) every ``ship_every`` seconds and when the job ends."""
    import multiprocessing

    nprocs = local_process_count() if nprocs is None else nprocs
    shown, log_dir = log_dir, staging_dir(log_dir)
    # a bad URL or a missing backend fails here, before any worker starts
    shipper = None if storage.local_path(shown) is not None else LogShipper(log_dir, shown, ship_every,
                                                                            storage_options)
    os.makedirs(log_dir, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    os.environ.setdefault("WORLD_SIZE", str(nprocs))
    context = multiprocessing.get_context(start_method)
    ranks = [process_rank(local, nprocs) for local in range(nprocs)]
    host = socket.gethostname()
    workers = {rank: context.Process(target=_worker_main, name=f"xla_compat-rank-{rank}",
                                     args=(local, nprocs, rank, fn, tuple(args), log_dir))
               for local, rank in enumerate(ranks)}
    clear_watchdog_stops(log_dir, ranks)  # an earlier run's records in a reused directory
    echo = Echo({log_path(log_dir, rank, host): f"[rank {rank}] " for rank in ranks}, sys.stdout)
    previous = {sig: signal.signal(sig, _forward(workers)) for sig in (signal.SIGTERM, signal.SIGINT)}
    exit_dir = tempfile.mkdtemp(prefix="xla_compat-exits-")  # the workers' heartbeats
    inherited = os.environ.get(EXIT_DIR_VARIABLE)
    os.environ[EXIT_DIR_VARIABLE] = exit_dir
    try:
        try:
            for worker in workers.values():
                worker.start()
            echo.start()
            if shipper is not None:
                shipper.start()
            outcome = _wait(workers, stacks_wait, grace, log_dir, exit_dir)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            echo.stop()
            if inherited is None:
                del os.environ[EXIT_DIR_VARIABLE]
            else:
                os.environ[EXIT_DIR_VARIABLE] = inherited
            shutil.rmtree(exit_dir, ignore_errors=True)
        _finish(workers, outcome, log_dir, host, shown)
    finally:
        if shipper is not None:
            shipper.stop()  # the summary and every last line, uploaded


def _forward(workers: Dict[int, Any]) -> Callable:
    def forward(signum: int, frame: Any) -> None:
        for worker in workers.values():
            if worker.is_alive():
                os.kill(worker.pid, signum)
    return forward


@dataclasses.dataclass
class _Outcome:
    """How the job ended, as the launcher saw it."""

    culprit: Optional[int] = None  # the first rank to fail on its own
    stopped: Set[int] = dataclasses.field(default_factory=set)  # the ranks the launcher had to stop
    watchdog_reason: Optional[str] = None  # set when a Watchdog stopped the job
    causes: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # the ranks it named


def _wait(workers: Dict[int, Any], stacks_wait: float, grace: float, log_dir: str, exit_dir: str,
          watchdog_grace: float = 60.0) -> _Outcome:
    """Wait for every worker. Once one fails, collect the others' stacks and stop them. Once one is
    stopped by its Watchdog (exit 124), give the others ``watchdog_grace`` seconds to stop the same
    way, then stop the rest; a rank the watchdog names as gone or frozen is killed at once, and so
    is a rank whose Watchdog heartbeat stopped here."""
    from multiprocessing.connection import wait

    running = {w.sentinel: r for r, w in workers.items()}
    frozen = FrozenWorkers(exit_dir)
    watchdog_since: Optional[float] = None
    killed: Set[int] = set()
    while running:
        ready = wait(list(running), timeout=0.5)
        # a sentinel closes once every process holding it exited: a worker's forked children keep it
        # open (torch_xla 2.3 forks helpers), so the exit status is asked for too
        ended = [running.pop(sentinel) for sentinel in list(running)
                 if sentinel in ready or workers[running[sentinel]].exitcode is not None]
        for rank in ended:
            workers[rank].join()  # the sentinel can fire just before the exit status is there
        for record, silent in frozen.check():
            if record["rank"] in running.values():
                cause = {key: record[key] for key in ("rank", "host", "pid")}
                write_watchdog_stop(log_dir, record["rank"], frozen.stop(record, silent), [{**cause, "state": "gone"}])
                killed.add(record["rank"])
                watchdog_since = watchdog_since or time.monotonic()
        if watchdog_since is None:
            failed = [r for r in ended if workers[r].exitcode not in (0, PREEMPTED_EXIT_CODE, WATCHDOG_EXIT_CODE)]
            if failed:  # of two that ended together, one killed by a signal, else the first to fail, is the cause
                failed_at = recorded_exit_times(exit_dir)
                culprit = min(failed, key=lambda r: (workers[r].exitcode >= 0, failed_at.get(r, float("inf")), r))
                return _Outcome(culprit=culprit, stopped=_stop_the_rest(workers, stacks_wait, grace))
            if any(workers[r].exitcode == WATCHDOG_EXIT_CODE for r in ended):
                watchdog_since = time.monotonic()
        if watchdog_since is not None:
            outcome = _watchdog_outcome(workers, log_dir)
            gone = {c["rank"] for c in outcome.causes if c["state"] == "gone"} & set(running.values())
            if set(running.values()) <= gone or time.monotonic() - watchdog_since > watchdog_grace:
                stopped = _stop_the_rest(workers, stacks_wait, grace, gone)
                return _watchdog_outcome(workers, log_dir, stopped | killed)
    return _watchdog_outcome(workers, log_dir, killed) if watchdog_since is not None else _Outcome()


def _watchdog_outcome(workers: Dict[int, Any], log_dir: str, stopped: Set[int] = frozenset()) -> _Outcome:
    """The watchdog's reason and the ranks it named, from what this host's stopped ranks recorded;
    without a record, the ranks the launcher had to stop are the likely cause."""
    records = [r for r in (read_watchdog_stop(log_dir, rank) for rank in workers) if r is not None]
    causes = {c["rank"]: c for record in records for c in record["causes"]}
    if not causes:
        causes = {rank: {"rank": rank, "host": socket.gethostname(), "pid": workers[rank].pid, "state": "unresponsive"}
                  for rank in sorted(stopped)}
    reason = records[0]["reason"] if records else "a rank exited with the watchdog's status 124"
    return _Outcome(stopped=set(stopped), watchdog_reason=reason, causes=[causes[r] for r in sorted(causes)])


def _stop_the_rest(workers: Dict[int, Any], stacks_wait: float, grace: float,
                   frozen: Set[int] = frozenset()) -> Set[int]:
    """Ask the live workers for their stacks, then stop them (SIGTERM, then SIGKILL); the
    ``frozen`` ones, which can act on no signal, are killed first."""
    for rank in frozen:
        os.kill(workers[rank].pid, signal.SIGKILL)
    for worker in workers.values():
        if worker.is_alive():
            os.kill(worker.pid, STACKS_SIGNAL)
    alive = {r: w for r, w in workers.items() if w.is_alive() or r in frozen}
    if any(w.is_alive() for r, w in alive.items() if r not in frozen):
        time.sleep(stacks_wait)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for worker in alive.values():
            if worker.is_alive():
                os.kill(worker.pid, sig)
        deadline = time.monotonic() + grace
        while any(w.is_alive() for w in alive.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
    for worker in workers.values():
        worker.join()
    return set(alive)


def _note(rank: int, code: Optional[int], outcome: _Outcome, causes: Dict[int, dict]) -> str:
    """What the summary says of ``rank`` beside its exit status."""
    if outcome.watchdog_reason is not None:
        notes = [f"the cause: {_CAUSE[causes[rank]['state']]}"] if rank in causes else []
        if rank in outcome.stopped:
            notes.append("stopped by the launcher")
        elif code not in (0, WATCHDOG_EXIT_CODE):
            notes.append("after the watchdog stopped the job")
        return "; ".join(notes)
    culprit = outcome.culprit
    if culprit is None:
        return ""
    if rank == culprit:
        return "first to fail"
    if rank in outcome.stopped:
        return f"stopped by the launcher after rank {culprit} failed"
    return f"after rank {culprit} failed" if code else ""


_CAUSE = {"gone": "gone or frozen", "stuck": "stuck outside a collective", "unresponsive": "did not stop"}


def _finish(workers: Dict[int, Any], outcome: _Outcome, log_dir: str, host: str, shown: str) -> None:
    codes = {rank: worker.exitcode for rank, worker in workers.items()}
    culprit = outcome.culprit
    causes = {c["rank"]: c for c in outcome.causes}
    lines = [f"xla_compat.launch: {len(workers)} worker(s) on {host}, logs in {shown}"]
    for rank, worker in workers.items():
        note = _note(rank, codes[rank], outcome, causes)
        lines.append(f"  rank {rank}  pid {worker.pid}  {describe_exit(codes[rank])}" + (f"  ({note})" if note else ""))
    if outcome.watchdog_reason is not None:
        lines.append(f"the watchdog stopped the job: {outcome.watchdog_reason}")
        lines += [f"the watchdog names rank {c['rank']} (pid {c['pid']}, host {c['host']}) as the cause: "
                  f"{_CAUSE[c['state']]}" for c in outcome.causes if c["rank"] not in workers]
    for rank in ([culprit] if culprit is not None else [r for r in causes if r in workers]):
        path = log_path(log_dir, rank, host)
        lines.append(f"last lines of rank {rank} ({path}):")
        lines += ["  | " + line for line in last_lines(path)]
    summary = "\n".join(lines) + "\n"
    sys.stderr.write(summary)
    with open(os.path.join(log_dir, "summary.txt"), "w") as handle:
        handle.write(summary)
    if culprit is not None:
        raise JobFailed(f"rank {culprit} failed ({describe_exit(codes[culprit])}); see {shown}/summary.txt")
    if outcome.watchdog_reason is not None:
        raise SystemExit(WATCHDOG_EXIT_CODE)
    if PREEMPTED_EXIT_CODE in codes.values():
        raise SystemExit(PREEMPTED_EXIT_CODE)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
