"""Version targeting: severity and wording follow the target; the default is inferred."""
import os
import subprocess
import sys

import pytest

from flake8_xla import versions
from flake8_xla.engine import lint_source
from flake8_xla.versions import Version, infer_target, parse_version, release_numbers, requirement_floor

XM = "import torch_xla.core.xla_model as xm\n"
XR = "import torch_xla.runtime as xr\n"
XMP = "import torch_xla.distributed.xla_multiprocessing as xmp\n"
OS = "import os\n"
FSDPV2 = ("from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
          "SpmdFullyShardedDataParallel as FSDPv2\n")
FSDP = "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"

TARGETS = ("2.1", "2.4", "2.6", "2.8", "2.9")
# snippet -> the codes reported on each target in TARGETS (None: silent)
TABLE = {
    XM + "xm.mark_step()": (None, None, None, "XLA102", "XLA102"),
    XM + "xm.xla_device()": (None, None, None, "XLA102", "XLA102"),
    XM + "xm.xrt_world_size()": (None, None, "XLA102", "XLA101", "XLA101"),
    XM + "xm.get_ordinal()": (None, None, "XLA102", "XLA101", "XLA101"),
    XM + "xm.parse_xla_device('TPU:0')": (None, None, "XLA102", "XLA101", "XLA101"),
    XR + "xr.using_pjrt()": (None, None, "XLA101", "XLA101", "XLA101"),
    XR + "xr.xla_device()": (None, None, None, "XLA101", "XLA101"),
    XM + "xm.optimizer_step(opt)": ("XLA903",) * 5,  # no upstream replacement: the opt-in code
    XM + "xm.get_local_ordinal(0)": ("XLA103", "XLA103", "XLA103 XLA105", "XLA103 XLA105", "XLA103 XLA105"),
    XM + "xm.get_xla_supported_devices('TPU')": ("XLA903", "XLA103 XLA105", "XLA103 XLA105",
                                                 "XLA103 XLA105", "XLA103 XLA105"),  # devices() from 2.3
    XMP + "xmp.spawn(f, args=(), nprocs=8)": ("XLA105 XLA903",) * 2 + ("XLA103 XLA105",) * 3,  # launch() from 2.5
    FSDPV2 + "FSDPv2(model, mesh)": ("XLA216", "XLA105 XLA216", "XLA105 XLA216", "XLA105 XLA216", "XLA105 XLA216"),
    FSDP + "FSDP(model, mark_step_on_finalization=True)": (None, None, None, "XLA105", "XLA105"),
    "import torch_xla.experimental.xla_sharding as xs": (None, "XLA104", "XLA104", "XLA104", "XLA104"),
    "import torch_xla.experimental.pjrt as pjrt": ("XLA104",) * 5,
    "import torch_xla.experimental.triton": (None, None, None, None, "XLA104"),
    "import torch_xla.experimental.dynamo_mark_sharding": (None, None, "XLA104", "XLA104", "XLA104"),
    "import torch_xla.amp\ntorch_xla.amp.GradScaler()": (None, None, None, None, "XLA101"),
    "from torch_xla.core.functions import nms": (None, "XLA101", "XLA101", "XLA101", "XLA101"),
    "import torch_xla.distributed.xla_dist": ("XLA104",) * 5,
    OS + "os.environ['XLA_USE_FP16'] = '1'": (None, "XLA106", "XLA106", "XLA106", "XLA106"),
    OS + "os.environ['PJRT_DEVICE'] = 'CUDA'": ("XLA106", None, None, "XLA106", "XLA106"),  # 2.1 takes only GPU
    XM + "xm.rendezvous('init')": ("XLA103",) * 5,  # planned (from 2.8 it warns through xla_device())
    XM + "xm.get_memory_info()": ("XLA105", "XLA105", None, "XLA105", "XLA105"),  # device required < 2.5
    "import torch_xla\ntorch_xla.compile(f, max_different_graphs=2)": ("XLA105",) * 3 + (None,) * 2,
    "import torch_xla\ntorch_xla.compile(f, num_different_graphs_allowed=2)": (None,) * 3 + ("XLA105",) * 2,
    OS + "os.environ['GPU_NUM_DEVICES'] = '4'": (None, None, None, "XLA106", "XLA106"),
    OS + "os.environ['XLA_USE_SPMD'] = '1'": ("XLA106",) * 5,
}


@pytest.mark.parametrize("snippet, expected", TABLE.items(), ids=[s.splitlines()[-1] for s in TABLE])
def test_codes_follow_the_target(snippet: str, expected) -> None:
    got = tuple(" ".join(sorted(d.code for d in lint_source(snippet + "\n", target=t))) or None
                for t in TARGETS)
    assert got == expected


@pytest.mark.parametrize("target, message", [
    ("2.6", "xm.xrt_world_size() is deprecated since torch_xla 2.5 (removed in 2.7); "
            "use torch_xla.runtime.world_size() (2.1+)"),
    ("2.7", "xm.xrt_world_size() was removed in torch_xla 2.7; use torch_xla.runtime.world_size() (2.1+)"),
])
def test_wording_follows_the_target(target: str, message: str) -> None:
    [diagnostic] = lint_source(XM + "xm.xrt_world_size()\n", target=target)
    assert diagnostic.message == message


def test_env_wording_follows_the_target() -> None:
    source = OS + "os.environ['XLA_USE_FP16'] = '1'\n"
    [on_24] = lint_source(source, target="2.4")
    [on_25] = lint_source(source, target="2.5")
    assert on_24.message.startswith("environment variable XLA_USE_FP16 is deprecated since torch_xla 2.4 "
                                    "(removed in 2.5);")
    assert on_25.message.startswith("environment variable XLA_USE_FP16 is ignored since torch_xla 2.5;")


@pytest.mark.parametrize("text, version", [
    ("2.8", Version(2, 8)), ("2.8.1", Version(2, 8)), ("2.9.0+cpu", Version(2, 9)), ("v2.10", Version(2, 10)),
])
def test_parse_version(text: str, version: Version) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize("text", ["", "two", "2", "latest", "2.8 or later", "2.8.*"])
def test_parse_version_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a torch_xla version"):
        parse_version(text)


def test_parse_version_rejects_a_long_tail_at_once() -> None:
    """The whole-text check is linear: it backtracked over a tail of letters, each letter doubling its time."""
    with pytest.raises(ValueError, match="not a torch_xla version"):
        parse_version("2.8" + "a" * 64 + "!")


@pytest.mark.parametrize("text, numbers", [
    ("2.8", (2, 8, 0)), ("v2.8.1+cpu", (2, 8, 1)), (" 2.10rc1", (2, 10, 0)), ("2.8 or later", (2, 8, 0)),
    ("2.8.*", (2, 8, 0)), ("2", None), ("x2.8", None),
])
def test_release_numbers_read_the_start(text: str, numbers) -> None:
    """What a release check compares (``torch_xla.__version__ >= "2.8.1"``): the numbers a text starts with."""
    assert release_numbers(text) == numbers


@pytest.mark.parametrize("requirement, floor", [
    ("torch_xla>=2.5", Version(2, 5)),
    ("torch-xla[tpu] >= 2.6.0, <3", Version(2, 6)),
    ("torch_xla==2.4.0", Version(2, 4)),
    ("torch.xla~=2.3.1", Version(2, 3)),
    ("torch_xla<2.8", None),
    ("torch_xla", None),
    ("torch_xla>=2.5; python_version>='3.10'", Version(2, 5)),
    ("torchvision>=0.20", None),
    ("torch>=2.5", None),
    ("torch_xla_utils>=1.0", None),  # another package whose name starts the same
    ("torch_xla[tpu]~=2.5.0 -f https://storage.googleapis.com/libtpu-releases/index.html", Version(2, 5)),
    ("torch_xla @ https://example.org/wheels/torch_xla-2.6.0-cp311-cp311-manylinux_2_28_x86_64.whl", Version(2, 6)),
    ("torch_xla (>=2.4)", Version(2, 4)),
    ("torch_xla>=2", Version(2, 0)),
])
def test_requirement_floor(requirement: str, floor) -> None:
    assert requirement_floor(requirement) == floor


@pytest.fixture(autouse=True)
def _fresh_caches():
    versions.forget_project_files()
    yield


def _no_installed(monkeypatch) -> None:
    monkeypatch.setattr(versions, "installed_version", lambda: None)


def test_explicit_option_wins(tmp_path) -> None:
    (tmp_path / "requirements.txt").write_text("torch_xla>=2.4\n")
    target = infer_target(str(tmp_path / "a.py"), "2.8", Version(2, 9))
    assert target.version == Version(2, 8)


def test_floor_from_pyproject(tmp_path, monkeypatch) -> None:
    _no_installed(monkeypatch)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["numpy", "torch_xla[tpu]>=2.6"]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("")
    target = infer_target(str(tmp_path / "pkg" / "a.py"), None, Version(2, 9))
    assert target.version == Version(2, 6)
    assert "pyproject.toml" in target.source


def test_floor_from_poetry(tmp_path, monkeypatch) -> None:
    _no_installed(monkeypatch)
    (tmp_path / "pyproject.toml").write_text('[tool.poetry.dependencies]\ntorch-xla = "^2.5"\n')
    (tmp_path / "a.py").write_text("")
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).version == Version(2, 5)


def test_floor_from_setup_cfg(tmp_path, monkeypatch) -> None:
    _no_installed(monkeypatch)
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    torch\n    torch_xla>=2.3\n")
    (tmp_path / "a.py").write_text("")
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).version == Version(2, 3)


def test_floor_from_requirements_in_a_parent_directory(tmp_path, monkeypatch) -> None:
    _no_installed(monkeypatch)
    (tmp_path / "requirements-tpu.txt").write_text("# pinned\ntorch_xla==2.7.0\n")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py").write_text("")
    assert infer_target(str(tmp_path / "src" / "pkg" / "a.py"), None, Version(2, 9)).version == Version(2, 7)


def test_broken_pyproject_falls_back_with_one_warning(tmp_path, monkeypatch, capsys) -> None:
    _no_installed(monkeypatch)
    (tmp_path / "pyproject.toml").write_text("[project\nthis is not toml")
    (tmp_path / "requirements.txt").write_text("torch_xla>=2.5\n")
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).version == Version(2, 5)
    assert infer_target(str(tmp_path / "b.py"), None, Version(2, 9)).version == Version(2, 5)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("flake8-xla: warning: could not read ") and "pyproject.toml" in err[0]


def test_falls_back_to_installed_then_latest(tmp_path, monkeypatch) -> None:
    (tmp_path / ".git").mkdir()  # the project root: the walk stops here
    (tmp_path / "a.py").write_text("")
    monkeypatch.setattr(versions, "installed_version", lambda: Version(2, 6))
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).source == "installed torch_xla"
    _no_installed(monkeypatch)
    target = infer_target(str(tmp_path / "a.py"), None, Version(2, 9))
    assert target.version == Version(2, 9) and target.source == "newest release known to flake8-xla"


def test_installed_version_reads_metadata_without_importing_torch(tmp_path) -> None:
    """A fake torch_xla distribution whose package would explode on import."""
    site = tmp_path / "site"
    dist = site / "torch_xla-2.6.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_xla\nVersion: 2.6.0\n")
    (site / "torch_xla").mkdir()
    (site / "torch_xla" / "__init__.py").write_text("raise SystemExit('torch_xla must not be imported')\n")
    code = ("import sys; from flake8_xla.versions import installed_version; "
            "print(installed_version()); assert 'torch' not in sys.modules and 'torch_xla' not in sys.modules")
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2.6"


# --- where the target came from (issue 12, defect 19) -------------------------------------------

def test_origin_of_an_explicit_target(tmp_path) -> None:
    target = infer_target(str(tmp_path / "a.py"), "2.8", Version(2, 9))
    assert target == versions.Target(Version(2, 8), "--xla-target-version", "--xla-target-version 2.8")
    target = infer_target(str(tmp_path / "a.py"), "2.8", Version(2, 9), "setup.cfg [flake8] xla-target-version")
    assert target.origin == "setup.cfg [flake8] xla-target-version = 2.8"


def test_origin_names_the_requirement_file_and_line(tmp_path, monkeypatch) -> None:
    _no_installed(monkeypatch)
    req = tmp_path / "requirements-tpu.txt"
    req.write_text("# pinned\nnumpy\ntorch_xla[tpu]==2.7.0  # tpu wheels\n")
    target = infer_target(str(tmp_path / "a.py"), None, Version(2, 9))
    assert target.source == f"torch_xla requirement in {req}"
    assert target.origin == f"{req}:3: torch_xla[tpu]==2.7.0"


def test_origin_names_the_lowest_requirement_of_several(tmp_path, monkeypatch) -> None:
    _no_installed(monkeypatch)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = [\n  "torch_xla>=2.6",\n]\n'
                         '[project.optional-dependencies]\nold = [\n  "torch-xla>=2.3,<2.5",\n]\n')
    target = infer_target(str(tmp_path / "a.py"), None, Version(2, 9))
    assert target == versions.Target(Version(2, 3), f"torch_xla requirement in {pyproject}",
                                     f"{pyproject}:8: torch-xla>=2.3,<2.5")
    cfg = tmp_path / "sub" / "setup.cfg"
    cfg.parent.mkdir()
    cfg.write_text("[options]\ninstall_requires =\n    torch\n    torch_xla>=2.4\n")
    assert infer_target(str(tmp_path / "sub" / "a.py"), None, Version(2, 9)).origin == f"{cfg}:4: torch_xla>=2.4"


def test_origin_of_a_poetry_requirement(tmp_path, monkeypatch) -> None:
    _no_installed(monkeypatch)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.poetry.dependencies]\npython = "^3.10"\ntorch-xla = "^2.5"\n')
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).origin == f"{pyproject}:3: torch-xla ^2.5"


def test_origin_of_installed_and_newest(tmp_path, monkeypatch) -> None:
    (tmp_path / ".git").mkdir()
    monkeypatch.setattr(versions, "installed_version", lambda: Version(2, 6))
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).origin == "the installed torch_xla 2.6"
    _no_installed(monkeypatch)
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).origin == "the newest release flake8-xla knows"


def test_two_positional_target_still_builds() -> None:
    # tests and docs build Target(version, "why") by hand
    assert versions.Target(Version(2, 9), "test").origin == ""


@pytest.mark.parametrize("value, message", [
    (2.1, 'x: target-version must be a quoted string such as "2.10", not the number 2.1 '
          "(TOML reads an unquoted 2.10 as 2.1)"),
    (True, 'x: target-version must be a quoted string such as "2.10", not True'),
    ("2.x", "x: target-version: not a torch_xla version: '2.x' (expected MAJOR.MINOR, e.g. 2.8)"),
])
def test_check_target_rejects(value, message) -> None:
    with pytest.raises(ValueError) as info:
        versions.check_target(value, "x: target-version", (Version(2, 9),))
    assert str(info.value) == message


def test_check_target_warns_once_outside_the_known_releases() -> None:
    seen = []
    known = (Version(2, 8), Version(2, 9))
    assert versions.check_target("2.10", "--xla-target-version", known, seen.append) == Version(2, 10)
    assert versions.check_target("2.9", "--xla-target-version", known, seen.append) == Version(2, 9)
    assert versions.check_target("2.7", "--xla-target-version", known, seen.append) == Version(2, 7)
    assert seen == ["--xla-target-version: torch_xla 2.10 is newer than the last release flake8-xla knows (2.9); "
                    "its rule data may not describe that release",
                    "--xla-target-version: torch_xla 2.7 is outside the releases flake8-xla knows (2.8 to 2.9); "
                    "its rule data may not describe that release"]


def test_a_pyproject_of_the_wrong_shape_declares_nothing(tmp_path, monkeypatch, capsys) -> None:
    _no_installed(monkeypatch)
    (tmp_path / "pyproject.toml").write_text('project = 5\ntool = "x"\ndependency-groups = []\n')
    (tmp_path / "requirements.txt").write_text("torch_xla>=2.5\n")
    assert infer_target(str(tmp_path / "a.py"), None, Version(2, 9)).version == Version(2, 5)
    assert capsys.readouterr().err == ""


# a release guard's branches on each target in TARGETS: the branch that runs there is linted
GUARDED = {
    'RequirementCache("torch_xla>=2.5,<2.9")': (None, None, "XLA102", "XLA101", None),
    'RequirementCache("torch-xla==2.6.*")': (None, None, "XLA102", None, None),
    "_XLA_GREATER_EQUAL_2_8": (None, None, None, "XLA101", "XLA101"),
    "not _TORCH_GREATER_EQUAL_2_8": (None, None, "XLA102", None, None),
    "torch_xla.__version__ < '2.7'": (None, None, "XLA102", None, None),
}


@pytest.mark.parametrize("test, expected", GUARDED.items(), ids=GUARDED.keys())
def test_release_guards_follow_the_target(test: str, expected) -> None:
    source = ("import torch_xla\n" + XM + XR + f"if {test}:\n    n = xm.xrt_world_size()\n"
              "else:\n    n = xr.world_size()\n")
    got = tuple(" ".join(sorted(d.code for d in lint_source(source, target=t) if d.code.startswith("XLA1")))
                or None for t in TARGETS)
    assert got == expected


def _site(tmp_path, folder, metadata_file, text):
    site = tmp_path / "site"
    (site / folder).mkdir(parents=True)
    (site / folder / metadata_file).write_text(text)
    return str(site)


@pytest.mark.parametrize("folder, metadata_file, version, expected", [
    ("torch_xla-2.6.1.dist-info", "METADATA", "2.6.1", Version(2, 6)),
    ("torch_xla-2.10.0+cpu.dist-info", "METADATA", "2.10.0+cpu", Version(2, 10)),
    ("torch_xla.egg-info", "PKG-INFO", "2.3.0", Version(2, 3)),
])
def test_installed_version_comes_from_the_first_distribution_metadata_on_sys_path(
        tmp_path, monkeypatch, folder, metadata_file, version, expected):
    metadata = f"Metadata-Version: 2.1\nName: torch_xla\nVersion: {version}\n\nbody\n"
    site = _site(tmp_path, folder, metadata_file, metadata)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), site, *sys.path])
    versions.installed_version.cache_clear()
    try:
        assert versions.installed_version() == expected
    finally:
        versions.installed_version.cache_clear()


def test_installed_version_is_none_without_torch_xla_metadata(tmp_path, monkeypatch):
    site = _site(tmp_path, "torch-2.9.0.dist-info", "METADATA", "Name: torch\nVersion: 2.9.0\n")
    monkeypatch.setattr(sys, "path", [site])
    versions.installed_version.cache_clear()
    try:
        assert versions.installed_version() is None
    finally:
        versions.installed_version.cache_clear()


@pytest.mark.parametrize("requirement, problem", [
    ("torch_xla==2.x", "it is not a version specifier (e.g. torch_xla>=2.6 or torch_xla==2.8.*)"),
    ("torch_xla>=two", "it is not a version specifier (e.g. torch_xla>=2.6 or torch_xla==2.8.*)"),
    ("torch_xla @ git+https://github.com/pytorch/xla",
     "its version cannot be read from the URL (only a wheel's file name says it)"),
])
def test_a_pin_nobody_can_read_is_reported_not_taken_for_any_release(tmp_path, monkeypatch, capsys, requirement,
                                                                     problem) -> None:
    _no_installed(monkeypatch)
    (tmp_path / "requirements.txt").write_text(f"torch\n{requirement}\n")
    target = infer_target(str(tmp_path / "a.py"), None, Version(2, 9))
    assert target.source == "newest release known to flake8-xla"
    assert capsys.readouterr().err == (f"flake8-xla: warning: {tmp_path / 'requirements.txt'}:2: {requirement}: "
                                       f"not used as the target: {problem}\n")


def test_a_pin_past_the_last_release_is_that_release_and_said_as_the_option_says_it(tmp_path, monkeypatch,
                                                                                   capsys) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("torch_xla==2.12\n")
    target = infer_target(str(tmp_path / "a.py"), None, Version(2, 9))
    assert target == versions.Target(Version(2, 12), f"torch_xla requirement in {req}", f"{req}:1: torch_xla==2.12")
    # the same version, the same words as --xla-target-version 2.12; only where it came from differs
    assert infer_target(str(tmp_path / "a.py"), "2.12", Version(2, 9)).version == target.version
    said = "torch_xla 2.12 is newer than the last release flake8-xla knows (2.9); its rule data may not describe " \
           "that release"
    assert capsys.readouterr().err == f"flake8-xla: warning: {req}:1: torch_xla==2.12: {said}\n"
    seen = []
    versions.check_target("2.12", "--xla-target-version", (Version(2, 8), Version(2, 9)), seen.append)
    assert seen == [f"--xla-target-version: {said}"]
