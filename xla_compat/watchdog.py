"""A per-step heartbeat that turns a dead or stuck rank into a report and an exit, not a hang.

Each rank calls :meth:`Watchdog.step` after every training step. A monitor thread in each process
publishes that rank's record (step, pid, host, a tick that advances while the process lives) in
the process group's store, which every host can reach, and reads the others' records. It acts
when a rank's tick stops for ``timeout`` seconds (the process is gone: SIGKILL, the OOM killer, a
lost host) or when its own rank made no step for ``timeout`` seconds (the job stalled: the others
are then usually waiting in a collective for the rank that is stuck). The first rank to notice
asks every live rank for its main thread's stack through the store; it prints one report naming
each rank's pid, host, last step and stack, and the rank that is not waiting in a collective; then
every live rank exits with :data:`WATCHDOG_EXIT_CODE`. Time is measured on each host's own clock.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import traceback
from typing import Any, Dict, List, Optional

from . import heartbeats, worker_logs
from .exits import (WATCHDOG_EXIT_CODE, WATCHDOG_REPORT, clear_watchdog_stops, defer_to_watchdog, record_exit,
                    watchdog_stopping, write_watchdog_stop)

_ABSENT = "\x00absent"  # no record is JSON starting with NUL

# a main thread blocked in one of these files waits for other ranks
_WAITING_IN = (os.sep + os.path.join("torch", "distributed") + os.sep,
               os.sep + os.path.join("torch_xla", "core", "xla_model.py"),
               os.sep + os.path.join("torch_xla", "distributed") + os.sep,
               os.sep + os.path.join("xla_compat", "collectives.py"))


class Watchdog:
    """Report and stop a job whose ranks stop making progress.

    Create it in every rank after ``torch.distributed.init_process_group`` (without a process
    group it watches this process only), call ``step(n)`` after each step and ``close()`` at the
    end (a closed rank is not reported as dead). ``timeout`` must exceed the slowest step,
    including the first one, which compiles. The report goes to stderr and, with ``log_dir``
    (by default the one given to :func:`xla_compat.log_worker`), to ``watchdog-report.txt``."""

    def __init__(self, timeout: float = 600.0, interval: Optional[float] = None, exit_code: int = WATCHDOG_EXIT_CODE,
                 log_dir: Optional[str] = None) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.timeout = timeout
        self.interval = interval if interval is not None else min(5.0, timeout / 5)
        self.exit_code = exit_code
        self.log_dir = log_dir or worker_logs.current_log_dir
        self.rank, self.world, self._store = _process_group()
        if self.log_dir:
            clear_watchdog_stops(self.log_dir, [self.rank], report=False)
        self._step: Optional[int] = None
        self._last_step = time.monotonic()
        self._main = threading.current_thread().ident
        self._seen: Dict[int, tuple] = {}  # rank -> (tick, when it last changed on our clock)
        self._tick = 0
        self._closed = threading.Event()
        self._stepped = threading.Event()  # wakes the monitor thread to publish a new step
        self._publish("running")  # before the first step: a rank frozen early is still named
        _defer_uncaught_errors()
        self._thread = threading.Thread(target=self._run, name="xla_compat-watchdog", daemon=True)
        self._thread.start()

    def step(self, step: int) -> None:
        """Record that this rank finished training step ``step``."""
        self._step = step
        self._last_step = time.monotonic()
        self._stepped.set()

    def close(self) -> None:
        """Stop watching; other ranks see this rank as finished, not dead."""
        self._closed.set()
        self._stepped.set()
        self._thread.join(timeout=2 * self.interval + 5)
        self._publish("finished")
        heartbeats.withdraw(self.rank)

    def __enter__(self) -> "Watchdog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the monitor thread ----------------------------------------------------------------------
    def _run(self) -> None:
        """Check every ``interval``; in between, publish each new step within ``interval / 10``,
        so that a rank frozen later than that after a step is reported at that step."""
        next_check = time.monotonic() + self.interval
        while True:
            self._stepped.wait(max(0.0, next_check - time.monotonic()))
            self._stepped.clear()
            if self._closed.is_set():
                return
            reason = None
            try:
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + self.interval
                    reason = self._check()
                else:
                    self._publish("running")
            except Exception as exc:  # the store went away with the rank hosting it
                reason = (f"the process group's store is unreachable ({type(exc).__name__}: {exc}); "
                          "the rank hosting it (usually rank 0) is probably gone")
                self._store = None
            if reason is not None and not self._closed.is_set():
                self._stop(reason)
            self._closed.wait(self.interval / 10)  # one publication per tenth of an interval at most

    def _check(self) -> Optional[str]:
        self._tick += 1
        self._publish("running")
        idle = time.monotonic() - self._last_step
        if self._store is None:
            return f"rank {self.rank} made no step for {idle:.0f} s" if idle > self.timeout else None
        abort = self._get("abort")
        if abort is not None:
            return abort.decode()
        now = time.monotonic()
        for rank, record in self._records().items():
            if rank == self.rank or record.get("state") == "finished":
                continue
            tick, since = self._seen.get(rank, (None, now))
            if record["tick"] != tick:
                self._seen[rank] = (record["tick"], now)
            elif now - since > self.timeout:
                return self._gone(rank, record)
        if idle > self.timeout:
            return f"no step for {idle:.0f} s on rank {self.rank} (last step {self._step})"
        return None

    def _record(self, state: str, **extra: Any) -> dict:
        return {"rank": self.rank, "pid": os.getpid(), "host": socket.gethostname(), "step": self._step,
                "tick": self._tick, "idle": round(time.monotonic() - self._last_step, 1), "state": state, **extra}

    def _publish(self, state: str, **extra: Any) -> None:
        """This rank's record, to the other ranks (the store) and to this host's launcher."""
        record = self._record(state, **extra)
        if state == "running":
            heartbeats.publish({**record, "timeout": self.timeout, "interval": self.interval})
        if self._store is not None:
            self._store.set(f"rank/{self.rank}", json.dumps(record))

    def _records(self) -> Dict[int, dict]:
        values = {r: self._get(f"rank/{r}") for r in range(self.world)}
        return {r: json.loads(value) for r, value in values.items() if value is not None}

    def _get(self, key: str) -> Optional[bytes]:
        """The key's value, or None when it is not set, without blocking. torch 2.1's stores have
        no ``check``; a compare_set whose expected value no key holds changes nothing and returns
        the value or, when the key is absent, that expected value (every store type, torch 2.1
        through 2.9)."""
        value = self._store.compare_set(key, _ABSENT, _ABSENT)
        return None if value == _ABSENT.encode() else value

    def _stop(self, reason: str) -> None:
        watchdog_stopping.set()
        stack = self._main_stack()
        waiting = any(marker in frame for frame in stack for marker in _WAITING_IN)
        sys.stderr.write(f"[xla_compat.Watchdog] rank {self.rank}: {reason}\n")
        try:
            self._agree(reason, stack, waiting)
        except Exception as exc:
            sys.stderr.write(f"[xla_compat.Watchdog] the other ranks cannot be reached ({exc})\n")
            own = {self.rank: self._record("stopping", stack=stack, waiting=waiting, log=self._log_tail())}
            self._write_report(self._report(reason, own), overwrite=False)
            self._write_stop(reason, self._causes(own) if self._store is None else [])
        record_exit(self.exit_code)
        sys.stdout.flush()
        sys.stderr.flush()
        self._ship_logs()
        os._exit(self.exit_code)

    def _ship_logs(self) -> None:
        """Upload this process's log and the report (with ``log_worker(URL)``): ``os._exit`` skips
        the exit upload."""
        shipper = worker_logs.current_shipper
        if shipper is not None and shipper.names is not None:
            shipper.names += [n for n in (WATCHDOG_REPORT,) if n not in shipper.names]
        worker_logs.stop_shipping()

    def _agree(self, reason: str, stack: List[str], waiting: bool) -> None:
        """Publish this rank's stack; the rank that raised the alarm first writes the report."""
        if self._store is None:
            raise ConnectionError("no process group store")
        first = self._store.add("alarms", 1) == 1
        if first:
            self._store.set("abort", reason)
        else:
            reason = self._store.get("abort").decode()
        self._publish("stopping", stack=stack, waiting=waiting, log=self._log_tail())
        deadline = time.monotonic() + 3 * self.interval + 2
        if first:
            records = self._records()
            while time.monotonic() < deadline and any(r.get("state") == "running" and self._alive(rank)
                                                      for rank, r in records.items()):
                time.sleep(0.1)
                records = self._records()
            causes = self._causes(records)
            self._write_report(self._report(reason, records), overwrite=True)
            self._store.set("cause", json.dumps(causes))
            self._store.set("reported", "1")
        else:
            while self._get("reported") is None and time.monotonic() < deadline + 5:
                time.sleep(0.1)
            cause = self._get("cause")
            causes = json.loads(cause) if cause is not None else []
        self._write_stop(reason, causes)
        self._leave()

    def _causes(self, records: Dict[int, dict]) -> List[dict]:
        """The ranks that stopped the job: those gone or frozen; failing that, those stuck outside
        a collective (the others wait for them)."""
        by_state = self._classify(records)
        state = "gone" if by_state["gone"] else "stuck"
        return [{"rank": rank, "host": records[rank]["host"], "pid": records[rank]["pid"], "state": state}
                for rank in by_state[state]]

    def _write_stop(self, reason: str, causes: List[dict]) -> None:
        if self.log_dir:
            try:
                write_watchdog_stop(self.log_dir, self.rank, reason, causes)
            except OSError as exc:
                sys.stderr.write(f"[xla_compat.Watchdog] cannot record the stop in {self.log_dir} ({exc})\n")

    def _leave(self) -> None:
        """Count this rank out; rank 0, which usually hosts the store, leaves last."""
        left = self._store.add("left", 1)
        if self.rank != 0:
            return
        stopping = sum(r.get("state") == "stopping" for r in self._records().values())
        deadline = time.monotonic() + 3 * self.interval + 2
        while left < stopping and time.monotonic() < deadline:
            time.sleep(0.1)
            left = self._store.add("left", 0)
        time.sleep(0.2)  # let the last one finish its exchange with the store

    def _write_report(self, report: str, overwrite: bool) -> None:
        """To stderr, and to ``watchdog-report.txt``: a rank that could not reach the others writes
        its own view there only when no report of the whole job is in place."""
        sys.stderr.write(report)
        if self.log_dir:
            try:
                with open(os.path.join(self.log_dir, WATCHDOG_REPORT), "w" if overwrite else "x") as handle:
                    handle.write(report)
            except FileExistsError:
                pass

    def _silent_for(self, rank: int) -> float:
        """Seconds since ``rank``'s heartbeat last changed, on this host's clock."""
        tick, since = self._seen.get(rank, (None, time.monotonic()))
        return time.monotonic() - since

    def _alive(self, rank: int) -> bool:
        return self._silent_for(rank) <= self.timeout

    def _gone(self, rank: int, record: dict) -> str:
        return heartbeats.gone(rank, record, self._silent_for(rank))

    def _classify(self, records: Dict[int, dict]) -> Dict[str, List[int]]:
        """Ranks by what they were doing: ``gone`` (heartbeat stopped), ``stuck`` (stopping, not in
        a collective), ``waiting`` (stopping inside a collective)."""
        by_state: Dict[str, List[int]] = {"gone": [], "stuck": [], "waiting": []}
        for rank, rec in sorted(records.items()):
            if rec["state"] == "running" and not self._alive(rank):
                by_state["gone"].append(rank)
            elif rec["state"] == "stopping":
                by_state["waiting" if rec["waiting"] else "stuck"].append(rank)
        return by_state

    def _report(self, reason: str, records: Dict[int, dict]) -> str:
        lines = [f"xla_compat.Watchdog: the job is stopped: {reason}"]
        by_state = self._classify(records)
        for rank in by_state["gone"]:
            gone = self._gone(rank, records[rank])
            lines += [gone] if gone != reason else []
        if by_state["stuck"] and by_state["waiting"]:
            lines.append(f"rank(s) {_names(by_state['waiting'])} wait in a collective for rank(s) "
                         f"{_names(by_state['stuck'])}, which are not in one")
        for rank in range(self.world):
            rec = records.get(rank)
            if rec is None:
                lines.append(f"rank {rank}: no record (it never created its Watchdog)")
                continue
            state = next((name for name, ranks in by_state.items() if rank in ranks), rec["state"])
            idle = "" if state == "gone" else f"  idle {rec['idle']:.0f} s"
            lines.append(f"rank {rank}  pid {rec['pid']}  host {rec['host']}  last step {rec['step']}{idle}  {state}")
            for frame in rec.get("stack", [])[-6:]:
                lines.append("    " + frame.strip().replace("\n", "\n    "))
            tail = rec.get("log") or self._log_tail(rank, rec["host"])
            if tail:
                lines.append("    last log lines:")
                lines += ["      | " + line for line in tail]
        return "\n".join(lines) + "\n"

    def _main_stack(self) -> List[str]:
        frame = sys._current_frames().get(self._main)
        return traceback.format_stack(frame) if frame is not None else []

    def _log_tail(self, rank: Optional[int] = None, host: Optional[str] = None) -> List[str]:
        if not self.log_dir:
            return []
        path = worker_logs.log_path(self.log_dir, self.rank if rank is None else rank, host)
        return worker_logs.last_lines(path, 8)


def _defer_uncaught_errors() -> None:
    """Route the main thread's uncaught error through :func:`defer_to_watchdog` (once per process):
    a collective that fails because the watchdog is stopping the job must not make it exit 1."""
    previous = sys.excepthook
    if getattr(previous, "defers_to_watchdog", False):
        return

    def hook(kind: Any, value: Any, tb: Any) -> None:
        previous(kind, value, tb)
        sys.stderr.flush()
        defer_to_watchdog()

    hook.defers_to_watchdog = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def _names(ranks: List[int]) -> str:
    return ", ".join(map(str, ranks))


def _process_group() -> tuple:
    """(rank, world, store) of the default process group, or (0, 1, None) without one."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return 0, 1, None
    from torch.distributed import distributed_c10d

    store = dist.PrefixStore("xla_compat/watchdog/", distributed_c10d._get_default_store())
    return dist.get_rank(), dist.get_world_size(), store
