"""torchrun through ``python -m xla_compat.torchrun`` and jobs of two "hosts" on one machine (two
launchers joined by NODE_RANK / MASTER_ADDR / MASTER_PORT), on the real torch_xla (CPU) over gloo:
the exit status says what happened (0, 1, 75, 124), and a frozen host is reported, not waited for."""
import contextlib
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

import xla_compat
from xla_compat.torchrun import job_status

HERE = pathlib.Path(__file__).parent
HOST = socket.gethostname()
ENV = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
TORCHRUN = [sys.executable, "-m", "xla_compat.torchrun"]
LAUNCH = ("import sys, hosts_job, xla_compat; "
          "xla_compat.launch(hosts_job.job, args=tuple(sys.argv[2:]), log_dir=sys.argv[1], nprocs=1)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _descendants(pid: int) -> list:
    parents = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _wait_for(path: pathlib.Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_text()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never showed {text!r}")
        time.sleep(0.05)


def _host_command(launcher: str, node: int, port: int, log_dir: pathlib.Path, mode: str) -> tuple:
    if launcher == "torchrun":
        return (TORCHRUN + ["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1", "--master-addr",
                            "127.0.0.1", "--master-port", str(port), str(HERE / "hosts_job.py"), str(log_dir), mode],
                ENV)
    env = dict(ENV, NODE_RANK=str(node), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return [sys.executable, "-c", LAUNCH, str(log_dir), mode], env


@contextlib.contextmanager
def _two_watched_hosts(tmp_path: pathlib.Path, launcher: str):
    """Two hosts running the watched job, once host 1's rank logged step 5: the two launcher
    processes and that rank's pid. Everything they started is killed on the way out."""
    port = _free_port()
    hosts = []
    for node in (0, 1):
        command, env = _host_command(launcher, node, port, tmp_path / f"host-{node}", "watched")
        hosts.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    try:
        log1 = tmp_path / "host-1" / f"rank-1-{HOST}.log"
        _wait_for(log1, "step 5\n")
        yield hosts, int(re.match(r"\[xla_compat\] rank 1, pid (\d+),", log1.read_text()).group(1))
    finally:
        for proc in hosts:
            for pid in [proc.pid] + _descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()


@pytest.mark.parametrize("launcher", ["torchrun", "xla_compat.launch"])
def test_a_frozen_host_stops_the_other_with_the_report_and_124(tmp_path, launcher) -> None:
    with _two_watched_hosts(tmp_path, launcher) as (hosts, worker):
        for pid in [hosts[1].pid] + _descendants(hosts[1].pid):  # the whole host: launcher, worker, helpers
            os.kill(pid, signal.SIGSTOP)
        _, err = hosts[0].communicate(timeout=120)  # a hang fails here
    assert hosts[0].returncode == 124, err[-3000:]
    report = (tmp_path / "host-0" / "watchdog-report.txt").read_text()
    assert re.search(rf"rank 1 \(pid {worker}, host {re.escape(HOST)}\) sent no heartbeat for \d+ s after step "
                     r"\d+: the process is gone or frozen", report), report
    assert re.search(r"^rank 1  pid \d+  host .*  gone$", report, re.M), report
    if launcher == "torchrun":
        assert err.rstrip().endswith("xla_compat.torchrun: exit code 124 (stopped by the watchdog)"), err[-2000:]
    else:
        summary = (tmp_path / "host-0" / "summary.txt").read_text().splitlines()
        assert re.sub(r"pid \d+  ", "", summary[1]) == "  rank 0  exit code 124 (stopped by the watchdog)"
        assert summary[2].startswith("the watchdog stopped the job: ")
        assert summary[3] == (f"the watchdog names rank 1 (pid {worker}, host {HOST}) as the cause: "
                              "gone or frozen")


@pytest.mark.parametrize("launcher", ["torchrun", "xla_compat.launch"])
def test_a_host_whose_only_worker_froze_ends_with_124_too(tmp_path, launcher) -> None:
    """Only the worker of host 1 is frozen, its launcher runs: the Watchdog of host 0 stops host 0,
    and host 1's launcher, which no rank of its own can tell, stops on the worker's silent heartbeat."""
    with _two_watched_hosts(tmp_path, launcher) as (hosts, worker):
        os.kill(worker, signal.SIGSTOP)
        errors = [host.communicate(timeout=120)[1] for host in hosts]  # a hang fails here
    assert [host.returncode for host in hosts] == [124, 124], errors[1][-3000:]
    gone = rf"rank 1 \(pid {worker}, host {re.escape(HOST)}\) sent no heartbeat for \d+ s after step \d+: the process is " \
           r"gone or frozen"
    if launcher == "torchrun":
        assert re.search(rf"^xla_compat.torchrun: {gone}; killed it$", errors[1], re.M), errors[1][-3000:]
        assert errors[1].rstrip().endswith("xla_compat.torchrun: exit code 124 (stopped by the watchdog)")
    else:
        summary = (tmp_path / "host-1" / "summary.txt").read_text().splitlines()
        assert re.sub(r"pid \d+  ", "", summary[1]) == ("  rank 1  killed by SIGKILL  (the cause: gone or frozen; "
                                                       "stopped by the launcher)"), summary
        assert re.fullmatch(f"the watchdog stopped the job: {gone}", summary[2]), summary


def test_torchrun_keeps_1_for_a_worker_that_raises(tmp_path) -> None:
    result = subprocess.run(TORCHRUN + ["--standalone", "--nproc-per-node", "2", str(HERE / "hosts_job.py"),
                                        str(tmp_path), "raise"], env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.rstrip().endswith("xla_compat.torchrun: exit code 1")
    assert "ValueError: bad batch at step 3" in (tmp_path / f"rank-1-{HOST}.log").read_text()


def test_a_sigterm_to_torchrun_checkpoints_every_rank_and_exits_75(tmp_path) -> None:
    launcher = subprocess.Popen(TORCHRUN + ["--standalone", "--nproc-per-node", "2", str(HERE / "hosts_job.py"),
                                            str(tmp_path / "logs"), "preemptible", str(tmp_path / "ckpt")],
                                env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(tmp_path / "logs" / f"rank-1-{HOST}.log", "step 5\n")
    launcher.send_signal(signal.SIGTERM)  # what a preemptible VM's shutdown does
    _, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 75, err[-3000:]
    assert err.rstrip().endswith("xla_compat.torchrun: exit code 75 (preempted: restart the job to resume)")
    [step] = xla_compat.CheckpointManager(str(tmp_path / "ckpt"), save_every=1000, signals=()).committed_steps()
    assert step >= 5


@pytest.mark.parametrize("failures, first, recorded, signalled, local, expected", [
    ({}, None, {}, None, 2, 0),
    ({1: 1}, 1, {}, None, 2, 1),
    ({1: 124, 0: 1}, 1, {}, None, 2, 124),  # the watchdog stopped it; rank 0's error followed
    ({0: 1, 1: 124}, 0, {1: 124}, None, 2, 1),  # a crash came first
    ({0: -15}, 0, {0: 124}, None, 2, 124),  # recorded before torchrun's SIGTERM reached it
    ({0: 75, 1: 75}, 0, {}, None, 2, 75),
    ({0: 75, 1: -15}, 0, {0: 75}, None, 2, 1),
    ({0: 75, 1: -15}, 0, {0: 75, 1: 75}, None, 2, 75),
    ({}, None, {0: 75, 1: 75}, 15, 2, 75),
    ({}, None, {0: 75}, 15, 2, 143),  # one worker did not save
    ({}, None, {}, 15, 2, 143),
    ({}, None, {3: 75}, 15, None, 75),  # --nproc-per-node auto: the count is unknown
])
def test_job_status(failures, first, recorded, signalled, local, expected) -> None:
    assert job_status(failures, first, recorded, signalled, local) == expected
