"""Checkpoints and logs in object storage, against a real GCS API (gcsfs talking to
gcp-storage-emulator, started here on 127.0.0.1) and a real S3 API (s3fs talking to moto's S3
server, in this process), plus the in-process ``memory://`` filesystem and ``file://`` URLs.
Workers are real processes, really killed."""
import glob
import hashlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import fsspec
import pytest
import torch
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

import xla_compat
from xla_compat import worker_logs
from xla_compat.resume import PREEMPTED_EXIT_CODE

# gcsfs asks a gRPC storage-control API for each bucket's layout first; the emulator has none, and
# every call would wait out its 60 s retries. Read when gcsfs is imported, so set before.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
BUCKET = "xla-compat-test"
_runs = itertools.count()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    def __init__(self, endpoint: str, log: str) -> None:
        self.endpoint = endpoint
        self.log = log
        # anonymous, so that no credential lookup (the GCE metadata server) is ever tried
        self.options = {"endpoint_url": endpoint, "token": "anon"}
        self.fs = fsspec.filesystem("gs", **self.options)
        # for worker processes: gcsfs reads the endpoint, fsspec the token, from the environment
        self.env = dict(os.environ, PJRT_DEVICE="CPU", STORAGE_EMULATOR_HOST=endpoint, FSSPEC_GS_TOKEN="anon",
                        GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT="false")

    def objects(self, url: str) -> list:
        """Every object under ``url``, relative to it."""
        prefix = url[len("gs://"):]
        self.fs.invalidate_cache()
        return sorted(path[len(prefix) + 1:] for path in self.fs.find(prefix))


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    port = _free_port()
    log = str(tmp_path_factory.mktemp("emulator") / "emulator.log")
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                                   "--port", str(port), "--in-memory"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, f"the GCS emulator exited with {server.returncode}: {open(log).read()}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the GCS emulator did not listen in 30 s: {open(log).read()}")
                time.sleep(0.05)
        emulator = Emulator(f"http://127.0.0.1:{port}", log)
        emulator.fs.mkdir(BUCKET)
        yield emulator
    finally:
        server.kill()
        server.wait(timeout=30)


class S3Server:
    """The S3 API of moto, served on 127.0.0.1 by a thread of this process."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.options = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        self.fs = fsspec.filesystem("s3", **self.options)
        # for worker processes: fsspec reads FSSPEC_<PROTOCOL>_<OPTION> from the environment
        self.env = dict(os.environ, PJRT_DEVICE="CPU", FSSPEC_S3_ENDPOINT_URL=endpoint, FSSPEC_S3_KEY="test",
                        FSSPEC_S3_SECRET="test", AWS_DEFAULT_REGION="us-east-1")

    def objects(self, url: str) -> list:
        prefix = url[len("s3://"):]
        self.fs.invalidate_cache()
        return sorted(path[len(prefix) + 1:] for path in self.fs.find(prefix))


@pytest.fixture(scope="module")
def s3():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        bucket = S3Server(f"http://{host}:{port}")
        bucket.fs.mkdir(BUCKET)
        yield bucket
    finally:
        server.stop()


@pytest.fixture(params=["gs", "s3"])
def bucket(request):
    """The GCS emulator or the S3 server: both have ``endpoint``, ``options``, ``fs``, ``env`` and
    ``objects(url)``."""
    return request.param, request.getfixturevalue("gcs" if request.param == "gs" else "s3")


def _gs_run(gcs) -> str:
    return f"gs://{BUCKET}/run-{next(_runs)}"


@pytest.fixture(params=["gs", "memory"])
def store(request, gcs):
    """A fresh checkpoint URL with its storage options and a way to list what it holds."""
    if request.param == "gs":
        return _gs_run(gcs), gcs.options, gcs.objects
    return f"memory://run-{next(_runs)}", None, _memory_objects


def _memory_objects(url: str) -> list:
    root = "/" + url[len("memory://"):]
    return sorted(path[len(root) + 1:] for path in fsspec.filesystem("memory").find(root))


def test_checkpoints_in_object_storage_save_restore_keep_and_prune(store, tmp_path, monkeypatch) -> None:
    url, options, objects = store
    monkeypatch.chdir(tmp_path)
    manager = xla_compat.CheckpointManager(url, save_every=2, keep=2, signals=(), storage_options=options)
    assert manager.restore() is None and manager.committed_steps() == []
    for step in range(1, 8):
        manager.step(step, lambda: {"w": torch.full((3,), float(step)), "step": step})
    assert manager.committed_steps() == [4, 6]
    assert objects(url) == ["step-00000004/COMMITTED", "step-00000004/rank-00000.pt",
                            "step-00000006/COMMITTED", "step-00000006/rank-00000.pt"]
    again = xla_compat.CheckpointManager(url, save_every=2, signals=(), storage_options=options)
    step, state = again.restore()
    assert step == 6 and state["step"] == 6 and torch.equal(state["w"], torch.full((3,), 6.0))
    with fsspec.open(f"{url}/step-00000006/COMMITTED", "rb", **(options or {})) as marker:
        assert marker.read() == b"6\n"
    assert again.save(8, {"w": torch.zeros(1)}) == f"{url}/step-00000008"
    assert again.committed_steps() == [6, 8]
    assert os.listdir(tmp_path) == []  # nothing went to a local folder named after the scheme


def test_a_step_without_its_commit_marker_is_never_restored(store) -> None:
    url, options, objects = store
    manager = xla_compat.CheckpointManager(url, save_every=1, signals=(), storage_options=options)
    manager.save(1, {"w": torch.ones(2)})
    with fsspec.open(f"{url}/step-00000002/rank-00000.pt", "wb", **(options or {})) as half_written:
        torch.save({"w": torch.full((2,), 2.0)}, half_written)  # every part, but no COMMITTED
    assert manager.committed_steps() == [1]
    step, state = manager.restore()
    assert step == 1 and torch.equal(state["w"], torch.ones(2))
    manager.save(3, {"w": torch.full((2,), 3.0)})  # the next save removes the uncommitted step
    assert objects(url) == ["step-00000001/COMMITTED", "step-00000001/rank-00000.pt",
                            "step-00000003/COMMITTED", "step-00000003/rank-00000.pt"]


def test_fsdp_shards_in_object_storage_are_consolidated(store) -> None:
    url, options, objects = store
    torch.manual_seed(0)
    plain = torch.nn.Linear(4, 3)
    expected = {k: v.clone() for k, v in plain.state_dict().items()}
    model = FSDP(plain.to(xla_compat.device()))

    path = xla_compat.save_sharded(model, f"{url}/ckpt", extra={"step": 7}, storage_options=options)
    assert path == f"{url}/ckpt_rank-00000000-of-00000001.pth"
    assert xla_compat.load(path, storage_options=options)["step"] == 7
    full = xla_compat.consolidate_sharded(f"{url}/ckpt", world=1, save_path=f"{url}/full.pt",  # noqa: XLA208
                                          storage_options=options)
    assert sorted(full) == sorted(expected) and all(torch.allclose(full[k], v) for k, v in expected.items())
    assert xla_compat.load(f"{url}/full.pt", storage_options=options)["model"].keys() == full.keys()
    assert objects(url) == ["ckpt_rank-00000000-of-00000001.pth", "full.pt"]
    with pytest.raises(FileNotFoundError) as missing:
        xla_compat.consolidate_sharded(f"{url}/ckpt", world=2, storage_options=options)  # noqa: XLA208
    assert str(missing.value) == (
        f"missing checkpoint shards for a world of 2: ['{url}/ckpt_rank-00000000-of-00000002.pth', "
        f"'{url}/ckpt_rank-00000001-of-00000002.pth'] (shards on disk were written by a world of [1] processes)")

    manager = xla_compat.CheckpointManager(f"{url}/managed", save_every=1, signals=(), storage_options=options)
    manager.save(1, {"model": model.state_dict(), "shard_metadata": model.get_shard_metadata()})
    merged = manager.consolidate()
    assert all(torch.allclose(merged[k], v) for k, v in expected.items())


def test_file_urls_are_local_directories(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    manager = xla_compat.CheckpointManager(f"file://{run}", save_every=1, signals=())
    assert manager.save(1, {"w": torch.ones(1)}) == f"{run}/step-00000001"
    assert sorted(os.listdir(run / "step-00000001")) == ["COMMITTED", "rank-00000.pt"]
    assert manager.restore()[0] == 1
    xla_compat.save({"w": torch.ones(1)}, f"file://{tmp_path}/model.pt")
    assert torch.equal(torch.load(tmp_path / "model.pt", weights_only=True)["w"], torch.ones(1))
    assert sorted(os.listdir(tmp_path)) == ["model.pt", "run"]  # no folder named "file:"
    assert worker_logs.staging_dir(f"file://{tmp_path}/logs") == f"{tmp_path}/logs"


UNKNOWN = ("unknown storage scheme nosuch:// in 'nosuch://bucket/run': use a local path, a file:// URL or a URL "
           "scheme fsspec knows (gs://, s3://, az://, memory://, ...: fsspec.available_protocols() lists them)")


def test_an_unknown_scheme_is_refused_before_anything_is_written(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as manager:
        xla_compat.CheckpointManager("nosuch://bucket/run", save_every=1, signals=())
    with pytest.raises(ValueError) as save:
        xla_compat.atomic_save({"w": 1}, "nosuch://bucket/run/model.pt")
    with pytest.raises(ValueError) as logs:
        worker_logs.log_worker("nosuch://bucket/run", rank=0, echo=False)
    assert str(manager.value) == str(save.value) == str(logs.value) == UNKNOWN
    assert os.listdir(tmp_path) == []


MISSING_BACKEND = r'''
import sys
sys.modules[sys.argv[1]] = None  # as if it were not installed
import xla_compat
try:
    xla_compat.CheckpointManager("gs://bucket/run", save_every=1, signals=())
except ImportError as exc:
    print(exc)
'''


def test_a_missing_backend_names_the_package_to_install() -> None:
    runs = {module: subprocess.run([sys.executable, "-c", MISSING_BACKEND, module], capture_output=True, text=True,
                                   timeout=120) for module in ("gcsfs", "aiohttp")}
    assert {m: (r.returncode, r.stderr) for m, r in runs.items()} == {"gcsfs": (0, ""), "aiohttp": (0, "")}
    assert runs["gcsfs"].stdout == ("'gs://bucket/run' needs gcsfs, the fsspec filesystem for gs://, which is not "
                                    "installed: pip install gcsfs  (or: pip install 'flake8-xla[storage]')\n")
    assert runs["aiohttp"].stdout == ("'gs://bucket/run' needs gcsfs, the fsspec filesystem for gs://, which cannot "
                                      "be imported (import of aiohttp halted; None in sys.modules): pip install gcsfs"
                                      "  (or: pip install 'flake8-xla[storage]')\n")


KILLED_WHILE_WRITING = r'''
import sys
import time
import fsspec.callbacks
import gcsfs
import torch
import xla_compat

url, phase = sys.argv[1], sys.argv[2]


class FirstChunk(fsspec.callbacks.Callback):
    def call(self, *args, **kwargs):
        if self.value:
            print(f"uploaded {self.value} of {self.size}", flush=True)
            time.sleep(60)  # hold the upload open: the test kills the process here


upload = gcsfs.GCSFileSystem._put_file


async def put_file(self, lpath, rpath, **kwargs):
    if phase == "upload" and rpath.endswith("step-00000002/rank-00000.pt"):
        kwargs["callback"] = FirstChunk()
    return await upload(self, lpath, rpath, **kwargs)


gcsfs.GCSFileSystem._put_file = put_file
manager = xla_compat.CheckpointManager(url, save_every=1)
manager.save(1, {"w": torch.ones(4)})
print("committed 1", flush=True)
manager.save(2, {"w": torch.ones(4), "ballast": torch.zeros(24 * 1024 * 1024)})  # 96 MiB: two upload chunks
print("committed 2", flush=True)
'''


@pytest.mark.parametrize("phase", ["torch.save", "upload"])
def test_sigkill_while_writing_to_gcs_leaves_the_previous_step(gcs, tmp_path, phase) -> None:
    """Killed while its part of step 2 is being written locally, or half uploaded: no object of
    step 2 exists, and step 1 is restored."""
    url = _gs_run(gcs)
    spool = tmp_path / "tmp"
    spool.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_WRITING, url, phase], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(gcs.env, TMPDIR=str(spool)))
    assert proc.stdout.readline() == "committed 1\n"
    if phase == "upload":
        uploading = proc.stdout.readline()
        [spooled] = glob.glob(f"{spool}/.tmp-xla_compat-*.pt")  # written whole, being uploaded
        assert uploading == f"uploaded {50 * 2**20} of {os.path.getsize(spooled)}\n"
    else:
        deadline = time.monotonic() + 60
        while not glob.glob(f"{spool}/.tmp-xla_compat-*.pt") and time.monotonic() < deadline:
            time.sleep(0.001)
    proc.kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and out == "", err[-2000:]
    assert gcs.objects(url) == ["step-00000001/COMMITTED", "step-00000001/rank-00000.pt"]
    manager = xla_compat.CheckpointManager(url, save_every=1, signals=(), storage_options=gcs.options)
    step, state = manager.restore()
    assert step == 1 and torch.equal(state["w"], torch.ones(4))
    manager.save(3, {"w": torch.full((4,), 3.0)})
    assert manager.committed_steps() == [1, 3]


TRAIN = r'''
import sys
import torch
import xla_compat

url, steps = sys.argv[1], int(sys.argv[2])
dev = xla_compat.device()
torch.manual_seed(0)
model = torch.nn.Linear(4, 2).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
manager = xla_compat.CheckpointManager(url, save_every=5, keep=2)
start = 0
found = manager.restore()
if found is not None:
    start, state = found
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    print(f"resumed at {start}", flush=True)
for step in range(start + 1, steps + 1):
    loss = model(torch.ones(8, 4, device=dev)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xla_compat.sync()
    print(f"step {step}", flush=True)
    manager.step(step, lambda: {"model": model.state_dict(), "opt": opt.state_dict(), "step": step})
'''


def test_a_preempted_worker_saves_to_gcs_exits_75_and_its_restart_resumes(gcs) -> None:
    url = _gs_run(gcs)
    proc = subprocess.Popen([sys.executable, "-c", TRAIN, url, "12"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=gcs.env)
    printed = []
    for line in proc.stdout:
        printed.append(line.strip())
        if printed[-1] == "step 3":
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=300)
    printed += out.splitlines()
    assert proc.returncode == PREEMPTED_EXIT_CODE, err[-2000:]
    manager = xla_compat.CheckpointManager(url, save_every=5, signals=(), storage_options=gcs.options)
    [stopped_at] = manager.committed_steps()
    assert stopped_at in (3, 4) and printed[-1] == f"step {stopped_at}"  # the boundary after the signal
    assert manager.restore()[1]["step"] == stopped_at

    resumed = subprocess.run([sys.executable, "-c", TRAIN, url, "12"], capture_output=True, text=True,
                             env=gcs.env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    rest = [f"step {step}" for step in range(stopped_at + 1, 13)]
    assert resumed.stdout.splitlines() == [f"resumed at {stopped_at}"] + rest
    assert manager.committed_steps() == [5, 10]


SPMD = r'''
import json
import sys
import fsspec.asyn
import gcsfs
import numpy as np
import torch
import xla_compat

# torch's writer renames its .metadata into place. The emulator has no moveTo endpoint (501), which
# gcsfs retries for 30 s before it copies and deletes instead: go to that copy and delete at once.
gcsfs.GCSFileSystem._mv_file = fsspec.asyn.AsyncFileSystem._mv_file

xs = xla_compat.spmd()
import torch_xla.runtime as xr
xr.use_spmd()
mesh = xs.Mesh(np.arange(4), (4, 1), ("data", "model"))


def sharded_model():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(xla_compat.device())
    xs.mark_sharding(model.weight, mesh, ("data", None))
    return model


model = sharded_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
manager = xla_compat.CheckpointManager(sys.argv[1], save_every=3, storage_options=json.loads(sys.argv[2]))
for step in range(1, 4):
    loss = model(torch.ones(2, 8, device=xla_compat.device())).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xla_compat.sync()
    manager.step(step, model.state_dict)
fresh = sharded_model()
step, state = manager.restore(into=fresh.state_dict())
fresh.load_state_dict(state)
spec = xla_compat._upstream.torch_xla()._XLAC._get_xla_sharding_spec
print(step, torch.equal(fresh.weight.cpu(), model.weight.cpu()), spec(fresh.weight))
'''


def _spmd(gcs, url: str, options) -> subprocess.CompletedProcess:
    """The SPMD job, configured for the emulator by ``options`` or, when None, by the environment."""
    env = gcs.env if options is None else {k: v for k, v in gcs.env.items()
                                           if k not in ("STORAGE_EMULATOR_HOST", "FSSPEC_GS_TOKEN")}
    return subprocess.run([sys.executable, "-c", SPMD, url, json.dumps(options)], capture_output=True, text=True,
                          env=dict(env, CPU_NUM_DEVICES="4"), timeout=600)


def test_an_spmd_model_is_checkpointed_to_gcs_by_shard(gcs) -> None:
    """torch's fsspec writer and reader of distributed checkpoints."""
    url = _gs_run(gcs)
    result = _spmd(gcs, url, options=None)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["3 True {devices=[4,1]0,1,2,3}"]
    assert gcs.objects(url) == ["step-00000003/COMMITTED", "step-00000003/distributed/.metadata",
                                "step-00000003/distributed/__0_0.distcp"]


@pytest.mark.release(">=2.7", why="torch's FsspecWriter/FsspecReader pass fsspec options on from torch 2.7")
def test_an_spmd_checkpoint_takes_the_storage_options(gcs) -> None:
    url = _gs_run(gcs)
    result = _spmd(gcs, url, options=gcs.options)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["3 True {devices=[4,1]0,1,2,3}"]
    assert gcs.objects(url) == ["step-00000003/COMMITTED", "step-00000003/distributed/.metadata",
                                "step-00000003/distributed/__0_0.distcp"]


@pytest.mark.release("<2.7", why="from torch 2.7 FsspecWriter/FsspecReader take the storage options")
def test_an_spmd_checkpoint_refuses_storage_options_torch_cannot_pass_on(gcs) -> None:
    url = _gs_run(gcs)
    result = _spmd(gcs, url, options=gcs.options)
    assert result.returncode == 1 and result.stdout == ""
    # torch_xla 2.3 logs the PJRT client's destruction after the traceback (absl: I0000 00:00:...)
    python_lines = [line for line in result.stderr.splitlines() if not re.match(r"[IWEF]\d{4} \d\d:\d\d:", line)]
    assert python_lines[-1] == (
        f"NotImplementedError: torch {torch.__version__}'s FsspecWriter takes no storage options (torch 2.7 and "
        "later do): set them through fsspec's configuration instead (FSSPEC_<PROTOCOL>_<OPTION> environment "
        "variables, such as FSSPEC_GS_TOKEN)")
    assert gcs.objects(url) == []


def test_the_staging_directory_of_a_log_url() -> None:
    url = f"gs://{BUCKET}/logs/job-1"
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    expected = os.path.join(tempfile.gettempdir(), "xla_compat-logs", f"gs-{BUCKET}-logs-job-1-{digest}")
    assert worker_logs.staging_dir(url) == worker_logs.staging_dir(url + "/") == expected
    assert worker_logs.staging_dir("relative/logs") == "relative/logs"
    assert worker_logs.staging_dir("/abs/logs") == "/abs/logs"
    assert worker_logs.staging_dir(f"gs://{BUCKET}/logs/job_1") != expected  # reads alike, another directory


LOG = r'''
import os
import signal
import sys
import time
import fsspec
from xla_compat import worker_logs

url, ending = sys.argv[1], sys.argv[2]
path = worker_logs.log_worker(url, rank=0, echo=False, ship_every=float(sys.argv[3]))
print(f"staged in {worker_logs.current_log_dir}, shipped to {worker_logs.current_log_url}", flush=True)
print("first line", flush=True)
if ending == "exit":  # the upload at exit is the first one: nothing has reached the bucket yet
    raise SystemExit("the last line")
fs, shipped = fsspec.core.url_to_fs(f"{url}/{os.path.basename(path)}")
deadline = time.monotonic() + 30
while time.monotonic() < deadline:  # wait for a periodic upload
    fs.invalidate_cache()
    if fs.exists(shipped) and b"first line" in fs.cat_file(shipped):
        break
    time.sleep(0.02)
print("seen in the bucket", flush=True)
if ending == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
raise RuntimeError("this rank failed")
'''


def _log_worker(bucket, tmp_path, ending: str, ship_every: float):
    scheme, server = bucket
    url = f"{scheme}://{BUCKET}/logs-{next(_runs)}"
    spool = tmp_path / "tmp"
    spool.mkdir()
    result = subprocess.run([sys.executable, "-c", LOG, url, ending, str(ship_every)], capture_output=True, text=True,
                            env=dict(server.env, TMPDIR=str(spool)), timeout=120)
    [staged] = glob.glob(f"{spool}/xla_compat-logs/*/rank-0-*.log")
    name = os.path.basename(staged)
    assert name == f"rank-0-{socket.gethostname()}.log"
    assert server.objects(url) == [name], result.stderr
    with open(staged) as handle:
        local = handle.read()
    shipped = server.fs.cat_file(f"{url.split('://', 1)[1]}/{name}").decode()
    return result, url, os.path.dirname(staged), local, shipped


def test_a_log_in_a_bucket_is_shipped_while_the_worker_runs_and_at_its_exit(bucket, tmp_path) -> None:
    """gs:// and s3://: s3fs needs asyncio's thread pool, which Python closes before atexit runs."""
    result, url, staged_dir, local, shipped = _log_worker(bucket, tmp_path, "raise", ship_every=0.2)
    assert result.returncode == 1 and result.stdout == "" and result.stderr == ""  # all of it went to the log
    assert shipped == local  # the last upload, at exit, came after the traceback
    lines = shipped.splitlines()
    assert lines[0].startswith("[xla_compat] rank 0, pid ")
    assert lines[1:4] == [f"staged in {staged_dir}, shipped to {url}", "first line", "seen in the bucket"]
    assert lines[4] == "Traceback (most recent call last):" and lines[-1] == "RuntimeError: this rank failed"


def test_a_log_in_a_bucket_is_shipped_at_exit_when_that_is_its_first_upload(bucket, tmp_path) -> None:
    result, url, staged_dir, local, shipped = _log_worker(bucket, tmp_path, "exit", ship_every=3600)
    assert result.returncode == 1 and result.stderr == ""
    assert shipped == local and shipped.splitlines()[-2:] == ["first line", "the last line"]


def test_a_sigkilled_worker_leaves_its_log_up_to_the_last_periodic_upload(bucket, tmp_path) -> None:
    result, url, staged_dir, local, shipped = _log_worker(bucket, tmp_path, "kill", ship_every=1.5)
    assert result.returncode == -signal.SIGKILL
    assert local.splitlines()[1:] == [f"staged in {staged_dir}, shipped to {url}", "first line",
                                      "seen in the bucket"]
    assert shipped.splitlines()[1:] == [f"staged in {staged_dir}, shipped to {url}", "first line"]


def test_the_log_shipper_uploads_what_changed_and_ships_a_last_time_when_stopped(gcs, tmp_path, capsys) -> None:
    url = f"memory://logs-{next(_runs)}"
    (tmp_path / "rank-0-h.log").write_text("zero\n")
    (tmp_path / "rank-1-h.log").write_text("one\n")
    shipper = worker_logs.LogShipper(str(tmp_path), url, interval=3600)
    assert shipper.ship_now() == ["rank-0-h.log", "rank-1-h.log"]
    assert shipper.ship_now() == []  # unchanged
    with open(tmp_path / "rank-1-h.log", "a") as handle:
        handle.write("more\n")
    shipper.start()
    shipper.stop()  # long before its first interval: the last upload is stop()'s own
    assert not shipper.is_alive()
    assert fsspec.filesystem("memory").cat_file(f"{url[len('memory:/'):]}/rank-1-h.log") == b"one\nmore\n"

    only = worker_logs.LogShipper(str(tmp_path), f"{url}/only", interval=3600, names=["rank-1-h.log"])
    assert only.ship_now() == ["rank-1-h.log"]

    broken = worker_logs.LogShipper(str(tmp_path), "gs://no-such-bucket/logs", interval=3600,
                                    storage_options=gcs.options)
    assert broken.ship_now() == broken.ship_now() == []
    assert isinstance(broken.last_error, FileNotFoundError)
    assert capsys.readouterr().err == (f"[xla_compat] cannot ship logs to gs://no-such-bucket/logs: "
                                       f"{gcs.endpoint}/upload/storage/v1/b/no-such-bucket/o\n")  # once
    with pytest.raises(ValueError, match=r"^the shipping interval must be positive, got 0$"):
        worker_logs.LogShipper(str(tmp_path), url, interval=0)


def test_launch_with_a_log_dir_in_a_bucket_uploads_every_log_and_the_summary(bucket, tmp_path) -> None:
    """xla_compat.launch(log_dir="gs://..." or "s3://..."): a rank that raises; both ranks' logs,
    the summary and its traceback reach the bucket, and the summary names the URL."""
    scheme, server = bucket
    url = f"{scheme}://{BUCKET}/launch-{next(_runs)}"
    spool = tmp_path / "tmp"
    spool.mkdir()
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys, launch_jobs, xla_compat; "
            "xla_compat.launch(launch_jobs.train, args=('raise', 3), log_dir=sys.argv[1], nprocs=2)")
    env = dict(server.env, TMPDIR=str(spool), PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code, url], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    host = socket.gethostname()
    assert server.objects(url) == ["rank-0-" + host + ".log", "rank-1-" + host + ".log", "summary.txt"]
    prefix = url[len(f"{scheme}://"):]
    summary = server.fs.cat_file(f"{prefix}/summary.txt").decode()
    assert summary == result.stderr[:len(summary)]
    assert summary.splitlines()[0] == f"xla_compat.launch: 2 worker(s) on {host}, logs in {url}"
    assert summary.splitlines()[-1] == "  | ValueError: bad batch at step 3"
    assert result.stderr.rstrip().endswith(f"rank 1 failed (exit code 1); see {url}/summary.txt")
    log1 = server.fs.cat_file(f"{prefix}/rank-1-{host}.log").decode()
    assert "Traceback (most recent call last)" in log1 and log1.rstrip().endswith("ValueError: bad batch at step 3")
    assert os.listdir(tmp_path) == ["tmp"]  # nothing went to a local folder named 'gs:'


def test_launch_refuses_a_log_url_without_its_backend_before_starting_workers(tmp_path) -> None:
    code = "import xla_compat; xla_compat.launch(print, log_dir='nosuch://bucket/logs', nprocs=2)"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PJRT_DEVICE="CPU"))
    assert result.returncode == 1
    assert result.stderr.rstrip().splitlines()[-1] == (
        "ValueError: unknown storage scheme nosuch:// in 'nosuch://bucket/logs': use a local path, a file:// URL "
        "or a URL scheme fsspec knows (gs://, s3://, az://, memory://, ...: fsspec.available_protocols() lists them)")
    assert os.listdir(tmp_path) == []
