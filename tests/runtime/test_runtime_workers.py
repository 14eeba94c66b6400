"""Logs from every worker, a summary of how each ended, and no silent hangs: xla_compat.launch with
log_dir and xla_compat.Watchdog, on the real torch_xla (CPU) in real processes talking over gloo."""
import os
import pathlib
import random
import re
import socket
import subprocess
import sys
import signal
import time

import torch

import xla_compat
from xla_compat import heartbeats
from xla_compat.exits import EXIT_DIR_VARIABLE, recorded_exits

HERE = pathlib.Path(__file__).parent
HOST = socket.gethostname()
ENV = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))


def _launch(log_dir, failure, at_step):
    code = ("import sys, launch_jobs, xla_compat; "
            "xla_compat.launch(launch_jobs.train, args=(sys.argv[2], int(sys.argv[3])), log_dir=sys.argv[1], nprocs=2)")
    return subprocess.run([sys.executable, "-c", code, str(log_dir), failure, str(at_step)], env=ENV,
                          capture_output=True, text=True, timeout=300)  # a hang fails here


def _without_pid(line):
    return re.sub(r"pid \d+  ", "", line)


def _log(log_dir, rank):
    return (log_dir / f"rank-{rank}-{HOST}.log").read_text()


def test_every_rank_logs_to_its_own_file_and_the_console_is_prefixed(tmp_path) -> None:
    result = _launch(tmp_path, "none", 0)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        log = _log(tmp_path, rank)
        assert f"hello from rank {rank} of 2\n" in log
        assert f"a logging record from rank {rank}" in log  # logging's stderr handler, captured
        assert f"rank {rank} step 8 grad 3 loss 16\n" in log and f"rank {rank} done\n" in log
        assert f"rank {1 - rank} " not in log.replace(f"rank {rank} of", "")  # nothing from the other rank
        assert f"[rank {rank}] rank {rank} done\n" in result.stdout
    summary = (tmp_path / "summary.txt").read_text()
    assert summary == result.stderr
    lines = summary.splitlines()
    assert lines[0] == f"xla_compat.launch: 2 worker(s) on {HOST}, logs in {tmp_path}"
    assert [_without_pid(line) for line in lines[1:]] == ["  rank 0  exit code 0", "  rank 1  exit code 0"]


def test_a_worker_that_raises_is_named_with_its_traceback_and_the_others_stop(tmp_path) -> None:
    result = _launch(tmp_path, "raise", 3)
    assert result.returncode == 1
    assert result.stderr.rstrip().endswith(
        f"xla_compat.supervisor.JobFailed: rank 1 failed (exit code 1); see {tmp_path}/summary.txt")
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert _without_pid(summary[2]) == "  rank 1  exit code 1  (first to fail)"
    assert summary[0 + 1].startswith("  rank 0  pid ")  # stopped or broken by the failure, not hanging
    assert summary[3] == f"last lines of rank 1 ({tmp_path}/rank-1-{HOST}.log):"
    assert summary[-1] == "  | ValueError: bad batch at step 3"
    assert "  | rank 1 step 3 grad 3 loss 6" in summary
    log1 = _log(tmp_path, 1)
    assert 'raise ValueError(f"bad batch at step {step}")' in log1 and "Traceback (most recent call last)" in log1
    assert "rank 0 step 4" not in _log(tmp_path, 1)


def test_a_sigkilled_worker_is_reported_by_signal_with_its_last_lines(tmp_path) -> None:
    result = _launch(tmp_path, "sigkill", 4)
    assert result.returncode == 1
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert _without_pid(summary[2]) == "  rank 1  killed by SIGKILL  (first to fail)"
    assert summary[3] == f"last lines of rank 1 ({tmp_path}/rank-1-{HOST}.log):"
    assert summary[-1] == "  | rank 1 step 4 grad 3 loss 8"
    assert "rank 0 step 4 grad 3 loss 8\n" in _log(tmp_path, 0)


def test_a_sigterm_to_the_launcher_checkpoints_every_rank_and_exits_75(tmp_path) -> None:
    code = ("import sys, launch_jobs, xla_compat; "
            "xla_compat.launch(launch_jobs.preemptible, args=(sys.argv[2],), log_dir=sys.argv[1], nprocs=2)")
    launcher = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "logs"), str(tmp_path / "ckpt")], env=ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in launcher.stdout:
        if line.startswith("[rank 1] step 5"):
            launcher.send_signal(signal.SIGTERM)  # what a preemptible VM's shutdown does
            break
    _, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 75, err[-2000:]
    summary = [_without_pid(line) for line in (tmp_path / "logs" / "summary.txt").read_text().splitlines()]
    assert summary[1:] == [f"  rank {r}  exit code 75 (preempted: restart the job to resume)" for r in (0, 1)]
    [step] = xla_compat.CheckpointManager(str(tmp_path / "ckpt"), save_every=1000, signals=()).committed_steps()
    for rank in (0, 1):
        saved = torch.load(tmp_path / "ckpt" / f"step-{step:08d}" / f"rank-{rank:05d}.pt", weights_only=False)
        assert saved == {"rank": rank, "step": step}


def _watched(tmp_path, world, failure, at_step):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, str(HERE / "launch_jobs.py"), str(tmp_path), str(rank), port,
                               str(world), failure, str(at_step)], env=ENV, stderr=subprocess.PIPE, text=True)
             for rank in range(world)]
    log1 = tmp_path / f"rank-1-{HOST}.log"
    deadline = time.monotonic() + 120
    while not (log1.exists() and f"step {at_step}\n" in log1.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        others = [p for rank, p in enumerate(procs) if rank != 1 or failure == "sleep"]
        for proc in others:
            proc.wait(timeout=60)  # a hang fails here
        return [p.returncode for p in others]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _silence(line):
    """The seconds of silence a report line gives, as the watchdog measured them."""
    return int(re.search(r"(?:no heartbeat|no step) for (\d+) s", line).group(1))


def test_watchdog_names_a_frozen_rank_and_the_others_exit(tmp_path) -> None:
    codes = _watched(tmp_path, 3, "freeze", 5)
    assert 124 in codes and all(code != 0 for code in codes), codes
    report = (tmp_path / "watchdog-report.txt").read_text().splitlines()
    assert report[0].startswith("xla_compat.Watchdog: the job is stopped: ")
    frozen = next(line for line in report if "rank 1 (pid " in line)
    assert _silence(frozen) <= 4 + 1  # noticed within the timeout and a monitor interval or two
    assert frozen.endswith("after step 5: the process is gone or frozen"), frozen  # its last step, not an older one
    rank1 = report[report.index(next(line for line in report if line.startswith("rank 1  pid "))):]
    assert rank1[0].endswith("  gone") and f"host {HOST}" in rank1[0]
    assert "      | step 5" in rank1  # its last log lines, read from its file on this host
    assert sum(line.endswith("  waiting") for line in report) == 2


def test_watchdog_names_the_rank_the_others_wait_for(tmp_path) -> None:
    codes = _watched(tmp_path, 3, "sleep", 5)
    assert 124 in codes and all(code != 0 for code in codes), codes
    report = (tmp_path / "watchdog-report.txt").read_text().splitlines()
    assert "rank(s) 0, 2 wait in a collective for rank(s) 1, which are not in one" in report
    assert _silence(report[0]) <= 4 + 1
    start = report.index(next(line for line in report if line.startswith("rank 1  pid ")))
    assert report[start].startswith("rank 1  pid ") and "last step 5" in report[start]
    assert report[start].endswith("  stuck")
    assert report[report.index("    last log lines:", start) - 1].strip() == "time.sleep(3600)"  # innermost frame
    assert "      | step 5" in report[start:]


def _launch_watched(log_dir, failure):
    code = ("import sys, launch_jobs, xla_compat; "
            "xla_compat.launch(launch_jobs.watched_launch, args=(sys.argv[2], 5), log_dir=sys.argv[1], nprocs=2)")
    return subprocess.run([sys.executable, "-c", code, str(log_dir), failure], env=ENV, capture_output=True,
                          text=True, timeout=300)  # a hang fails here


def test_under_launch_a_frozen_rank_is_the_cause_and_the_job_exits_124(tmp_path) -> None:
    result = _launch_watched(tmp_path, "freeze")
    assert result.returncode == 124, result.stderr[-3000:]
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert [_without_pid(line) for line in summary[1:3]] == [
        "  rank 0  exit code 124 (stopped by the watchdog)",
        "  rank 1  killed by SIGKILL  (the cause: gone or frozen; stopped by the launcher)"]
    assert summary[3].startswith("the watchdog stopped the job: ")
    assert summary[4] == f"last lines of rank 1 ({tmp_path}/rank-1-{HOST}.log):"
    assert summary[-1] == "  | step 5"
    assert "first to fail" not in result.stderr and "JobFailed" not in result.stderr
    report = (tmp_path / "watchdog-report.txt").read_text()
    assert re.search(r"rank 1 \(pid \d+, host .+\) sent no heartbeat for \d+ s after step 5: the process is "
                     r"gone or frozen$", report, re.M), report


def test_under_launch_a_stuck_rank_is_the_cause_and_every_rank_exits_124(tmp_path) -> None:
    result = _launch_watched(tmp_path, "sleep")
    assert result.returncode == 124, result.stderr[-3000:]
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert [_without_pid(line) for line in summary[1:3]] == [
        "  rank 0  exit code 124 (stopped by the watchdog)",
        "  rank 1  exit code 124 (stopped by the watchdog)  (the cause: stuck outside a collective)"]
    assert summary[3].startswith("the watchdog stopped the job: no step for ")
    assert summary[4] == f"last lines of rank 1 ({tmp_path}/rank-1-{HOST}.log):"


def test_a_launcher_kills_a_worker_whose_heartbeat_stopped_not_one_that_exited(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(EXIT_DIR_VARIABLE, str(tmp_path))
    frozen = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        for rank, pid in ((0, frozen.pid), (1, int(exited.stdout))):
            heartbeats.publish({"rank": rank, "pid": pid, "host": "h", "step": 7, "tick": 3, "timeout": 0.1,
                                "interval": 0.1})
        watch = heartbeats.FrozenWorkers(str(tmp_path))
        assert watch.check() == []  # silence is counted from the first record seen
        time.sleep(0.35)  # more than the timeout and two intervals
        [(record, silent)] = watch.check()  # the exited one (it never closed its Watchdog) is not frozen
        assert record["rank"] == 0 and 0.3 < silent < 5
        assert watch.stop(record, silent) == (f"rank 0 (pid {frozen.pid}, host h) sent no heartbeat for 0 s after "
                                              "step 7: the process is gone or frozen")
        assert frozen.wait(timeout=30) == -signal.SIGKILL
        assert recorded_exits(str(tmp_path)) == {0: 124}
        assert watch.check() == []  # stopped once
    finally:
        frozen.kill()
        frozen.wait()


SINGLE = r'''
import sys, time
import xla_compat
watch = xla_compat.Watchdog(timeout=2, interval=0.2, log_dir=sys.argv[1])
for step in range(1, 4):
    watch.step(step)
time.sleep(60)
'''


def test_watchdog_without_a_process_group_watches_its_own_process(tmp_path) -> None:
    script = tmp_path / "single.py"
    script.write_text(SINGLE)
    result = subprocess.run([sys.executable, str(script), str(tmp_path)], env=ENV, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 124
    report = (tmp_path / "watchdog-report.txt").read_text().splitlines()
    assert report[0] == "xla_compat.Watchdog: the job is stopped: rank 0 made no step for 2 s"
    assert report[1].startswith("rank 0  pid ") and "last step 3" in report[1]
    assert report[2:] == [f'    File "{script}", line 7, in <module>', "        time.sleep(60)"]
    assert result.stderr.endswith("\n".join(report) + "\n")


def _page_script(tmp_path):
    page = (HERE.parent.parent / "docs" / "fault-tolerance.md").read_text()
    script = tmp_path / "train.py"
    script.write_text(page.split("```python\n", 1)[1].split("```", 1)[0])
    return script


def _page_command(tmp_path, name, steps, save_every, log_every=100):
    return [sys.executable, str(_page_script(tmp_path)), "--nprocs", "2", "--steps", str(steps),
            "--save-every", str(save_every), "--checkpoints", str(tmp_path / name), "--logs",
            str(tmp_path / f"{name}-logs"), "--stall-timeout", "120", "--log-every", str(log_every)]


def _saved_models(directory, step):
    return [torch.load(directory / f"step-{step:08d}" / f"rank-{rank:05d}.pt", weights_only=False)["model"]
            for rank in (0, 1)]


def _averaged_reference(steps):
    """The page's model trained in plain PyTorch on the CPU with each step's gradients averaged
    over both ranks' batches: what a data-parallel job of two processes computes."""
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(1, steps + 1):
        losses = []
        for rank in (0, 1):
            batch = torch.Generator().manual_seed(step * 1000 + rank)
            x, y = torch.randn(32, 16, generator=batch), torch.randn(32, 4, generator=batch)
            losses.append(torch.nn.functional.mse_loss(model(x), y))
        optimizer.zero_grad()
        (sum(losses) / 2).backward()
        optimizer.step()
    return model.state_dict()


def test_the_page_script_is_data_parallel_every_rank_ends_with_the_same_weights(tmp_path) -> None:
    result = subprocess.run(_page_command(tmp_path, "ckpt", 6, 3), env=ENV, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = _saved_models(tmp_path / "ckpt", 6)
    assert rank0.keys() == rank1.keys() == {"weight", "bias"}
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    reference = _averaged_reference(6)
    assert all(torch.allclose(rank0[k], reference[k], atol=1e-5) for k in rank0)
    alone = _averaged_reference(0)  # and training moved them: not a pair of untouched models
    assert not torch.allclose(rank0["weight"], alone["weight"], atol=1e-3)


def test_the_training_script_of_the_fault_tolerance_page_runs_and_resumes(tmp_path) -> None:
    command = _page_command(tmp_path, "ckpt", 6, 3)
    first = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "[rank 1] rank 1 finished 6 steps\n" in first.stdout
    assert xla_compat.CheckpointManager(str(tmp_path / "ckpt"), save_every=3, signals=()).committed_steps() == [3, 6]
    again = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    for rank in (0, 1):
        assert f"[rank {rank}] resumed after step 6\n" in again.stdout
        assert "resumed after step 6\n" in _log(tmp_path / "ckpt-logs", rank)


def test_the_page_script_preempted_at_a_random_step_resumes_bit_identical(tmp_path) -> None:
    """SIGTERM to the launcher (a preemptible VM's shutdown) at a random step of the page's
    data-parallel job: every rank saves one agreed step and the launcher exits 75; the restart
    ends with the weights of an uninterrupted run, bit for bit, on both ranks."""
    plain = subprocess.run(_page_command(tmp_path, "plain", 300, 100), env=ENV, capture_output=True, text=True,
                           timeout=300)
    assert plain.returncode == 0, plain.stderr[-3000:]
    stop_at = random.Random().randint(2, 60)  # steps take milliseconds: stop well before the end
    command = _page_command(tmp_path, "ckpt", 300, 100, log_every=1)
    launcher = subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in launcher.stdout:
        if line.startswith(f"[rank 1] step {stop_at} loss "):
            launcher.send_signal(signal.SIGTERM)
            break
    _, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 75, (stop_at, err[-2000:])
    [preempted] = xla_compat.CheckpointManager(str(tmp_path / "ckpt"), save_every=100, signals=()).committed_steps()[-1:]
    assert stop_at <= preempted < 300 and preempted % 100, (stop_at, preempted)
    again = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"[rank 0] resumed after step {preempted}\n" in again.stdout
    expected = _saved_models(tmp_path / "plain", 300)
    for resumed, uninterrupted in zip(_saved_models(tmp_path / "ckpt", 300), expected):
        assert all(torch.equal(resumed[k], uninterrupted[k]) for k in uninterrupted), stop_at
    assert all(torch.equal(expected[0][k], expected[1][k]) for k in expected[0])
