"""Worker processes end with the CLI that started them (issue 12, defect 12)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# The CLI with every file's work replaced by "say my pid, then wait forever": a worker that
# outlives its parent would wait forever too.
DRIVER = textwrap.dedent("""\
    import os, sys, time
    from flake8_xla.cli import main
    from flake8_xla.session import running

    def stuck(job, path, stdin_bytes=None):
        open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
        while True:
            time.sleep(0.05)

    running.run_file = stuck
    sys.exit(main(["fix", "-j", "2", sys.argv[2]]))
    """)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its exit status waits to be collected


def _wait_for(condition, seconds: float) -> bool:
    # a guard against hanging the suite, not a time measurement: the condition either comes true or not
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_with_the_parent(tmp_path) -> None:
    tree, pids = tmp_path / "tree", tmp_path / "pids"
    tree.mkdir()
    pids.mkdir()
    for i in range(20):  # enough files for worker processes
        (tree / f"m{i:02d}.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    parent = subprocess.Popen([sys.executable, "-c", DRIVER, str(pids), str(tree)], cwd=tmp_path)
    workers = []
    try:
        assert _wait_for(lambda: len(os.listdir(pids)) == 2, 120), "the workers never started"
        workers = [int(name) for name in os.listdir(pids)]
        assert all(_alive(pid) for pid in workers)
        parent.kill()  # SIGKILL: no clean-up code of the parent runs
        parent.wait()
        assert _wait_for(lambda: not any(_alive(pid) for pid in workers), 60), "workers outlived their parent"
    finally:
        parent.kill()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
