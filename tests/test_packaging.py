"""The built wheel works on its own: rule modules and the rule data (copied from rules/ by setup.py)
are inside, the flake8 entry point is registered, and a fresh virtualenv with only the wheel (plus flake8 and PyYAML from the package
index) reports the documented diagnostic from an unrelated working directory.

Select or skip with ``-m packaging`` / ``-m "not packaging"``; it runs by default.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

pytestmark = pytest.mark.packaging

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXPECTED_MESSAGE = ("XLA102 xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)")
# Not needed to build the wheel, or local state that must not leak into it.
IGNORED = shutil.ignore_patterns(".git", ".hypothesis", ".pytest_cache", "__pycache__", "*.egg-info", "build",
                                 "dist", "benchmarks", ".venv", "*.pyc")


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP") and not k.startswith("FLAKE8")}
    env["PYTHONNOUSERSITE"] = "1"
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, **kwargs)
    assert result.returncode == 0 or kwargs.get("check") is False, (
        f"{cmd} exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def _version() -> str:
    text = (ROOT / "flake8_xla" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'__version__\s*=\s*"([^"]+)"', text).group(1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    base = tmp_path_factory.mktemp("packaging")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=IGNORED)
    out = base / "dist"
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, src], cwd=base)
    wheels = list(out.glob("flake8_xla-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv_python(wheel, tmp_path_factory) -> pathlib.Path:
    base = tmp_path_factory.mktemp("venv")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=base)
    python = venv / "bin" / "python"
    # The wheel itself, not editable; flake8 and PyYAML come from the package index.
    run([python, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", wheel], cwd=base)
    return python


def test_wheel_contents(wheel) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
    package = ROOT / "flake8_xla"
    modules = sorted(p.relative_to(ROOT).as_posix() for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    assert "flake8_xla/rules/graph/xla303_host_sync_in_step.py" in modules and len(modules) >= 100
    rule_data = sorted(p.name for pattern in ("*.yaml", "*.yml", "*.json") for p in (ROOT / "rules").glob(pattern))
    assert {"api_lifecycle.yaml", "torchtpu_migration.yaml", "torchtpu_internal_apis.json"} <= set(rule_data)
    expected = set(modules) | {f"flake8_xla/rule_data/{name}" for name in rule_data}
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.startswith(("rules/", "tests/", "benchmarks/"))], sorted(names)
    assert re.search(r"^\[flake8\.extension\]\s*\nXLA\s*=\s*flake8_xla\.plugin\.checker:XlaChecker\s*$", entry_points, re.M), \
        entry_points


def test_installed_wheel_runs_under_flake8(venv_python, tmp_path) -> None:
    start = time.perf_counter()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fixture = tmp_path / "fixture" / "train.py"
    fixture.parent.mkdir()
    fixture.write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n", encoding="utf-8")

    # The plugin is imported from the fresh virtualenv, not from the source tree.
    where = run([venv_python, "-c", "import flake8_xla, flake8_xla.rules; "
                                    "print(flake8_xla.__file__); print(flake8_xla.rules.__file__)"], cwd=elsewhere)
    venv_dir = venv_python.parent.parent.resolve()
    for line in where.stdout.split():
        assert pathlib.Path(line).resolve().is_relative_to(venv_dir), where.stdout
        assert not pathlib.Path(line).resolve().is_relative_to(ROOT), where.stdout

    result = run([venv_python, "-m", "flake8", "--select", "XLA", "--xla-target-version", "2.9", fixture],
                 cwd=elsewhere, check=False)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [f"{fixture}:2:1: {EXPECTED_MESSAGE}"], result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr

    version = run([venv_python, "-m", "flake8", "--version"], cwd=elsewhere)
    assert f"flake8-xla: {_version()}" in version.stdout, version.stdout
    print(f"\ninstalled-wheel checks took {time.perf_counter() - start:.1f}s")


def test_installed_wheel_carries_the_torchtpu_data(venv_python, tmp_path) -> None:
    """The migration table and the internal-API list ship in the wheel: --migrate-to works installed."""
    source = tmp_path / "train.py"
    source.write_text("import torch\nimport torch_xla\n\ndevice = torch_xla.device()\ntorch.tpu.synchronize()\n",
                      encoding="utf-8")
    result = run([venv_python, "-m", "flake8_xla", "check", "--isolated", "--no-cache", "--migrate-to", "torchtpu",
                  "train.py"], cwd=tmp_path, check=False)
    assert result.returncode == 1, result.stderr
    assert [line.split(": ", 1)[1].split()[0] for line in result.stdout.splitlines()] == ["XLA501", "XLA511"], \
        result.stdout + result.stderr


def test_linter_and_runtime_package_without_torch(venv_python, tmp_path) -> None:
    """The fresh virtualenv has no torch: the linter works there, and xla_compat imports but a call
    explains what to install."""
    code = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('torch') is None and importlib.util.find_spec('torch_xla') is None\n"
        "import xla_compat\n"
        "assert 'torch' not in sys.modules\n"
        "try:\n"
        "    xla_compat.world_size()\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = run([venv_python, "-c", code], cwd=tmp_path)
    assert result.stdout.strip() == ("xla_compat needs torch_xla, which is not installed: "
                                     "pip install 'flake8-xla[runtime]'  (or: pip install torch torch_xla)")
