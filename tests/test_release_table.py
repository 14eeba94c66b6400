"""The lifecycle table agrees with the torch_xla release wheels 2.1-2.9, read statically.

Runs tools/check_releases.py once over every release. The wheels come from the cache
($XLA_WHEEL_CACHE, else /work/cache/wheels when it exists, else ~/.cache/flake8-xla/wheels);
a fresh machine downloads them once (about 850 MB, ``pip download``, never installed).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flake8_xla.lifecycle.table import api_table

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "check_releases.py"
RELEASES = ["2.1.0", "2.2.0", "2.3.0", "2.4.0", "2.5.1", "2.6.0", "2.7.0", "2.8.1", "2.9.0"]

_BEFORE_21 = "2.1 is the oldest wheel on PyPI: what 2.0 did is unverifiable"
_NOT_TORCH_XLA = "the replacement is not a torch_xla name"
_COMPILED_VALUE = "whether _XLAC.so accepts the value is a string comparison in compiled code"

# Every (row, aspect) the checker cannot check statically. A new row or aspect it cannot check
# fails test_skipped_checks_are_the_documented_set until it is listed here with its reason.
EXPECTED_SKIPS = {
    ("xm-xla-rendezvous", "replacement"): _NOT_TORCH_XLA + " (torch.distributed.barrier)",
    ("xm-rendezvous", "replacement"): _NOT_TORCH_XLA + " (torch.distributed.barrier)",
    ("core-functions-nms", "replacement"): _NOT_TORCH_XLA + " (torchvision.ops.nms)",
    ("xmp-spawn-nprocs", "deprecated_in"): _BEFORE_21,
    ("xmp-spawn-nprocs", "allowed"): "that nprocs None/1 stay accepted needs control-flow analysis",
    ("experimental-pjrt", "deprecated_in"): _BEFORE_21,
    ("experimental-tpu", "deprecated_in"): _BEFORE_21,
    ("experimental-gpu", "deprecated_in"): _BEFORE_21,
    ("xrt-era-modules", "removed_in"): _BEFORE_21,
    ("xmp-prefork-config", "removed_in"): _BEFORE_21,
    ("env-xrt", "removed_in"): _BEFORE_21,
    ("env-xla-use-spmd", "deprecated_in"): _BEFORE_21,
    ("env-pjrt-device-gpu", "compiled-value"): _COMPILED_VALUE,
    ("env-pjrt-device-cuda", "compiled-value"): _COMPILED_VALUE,
}

_LONG_GAP = ("XLA_USE_32BIT_LONG is not read in 2.5.1: the string is absent from _XLAC.so (present in 2.4 and 2.6+) "
             "and 2.5.1 __init__.py:183-189 only warns it is deprecated; the table cannot express the 2.5 gap")

_BROKEN_GPU = ("experimental/gpu.py still registers its aliases, but they name _internal.gpu functions gone since "
               "2.2, so the import raises AttributeError (seen on the installed 2.3): removed in effect; a static "
               "reader sees only the register_deprecated calls")

# Deviations the table cannot express (it has one deprecated_in/removed_in per row) or the static
# reader cannot see; each is written in the row's notes. They must still be found: if the wheels
# change, this test says so.
ACCEPTED_DEVIATIONS = {
    ("env-xla-use-32bit-long", "2.5.1", "deprecated", "removed"): _LONG_GAP,
    **{("experimental-gpu", release, "removed", "deprecated"): _BROKEN_GPU for release in ("2.2.0", "2.3.0", "2.4.0")},
}


def wheel_cache() -> Path:
    if os.environ.get("XLA_WHEEL_CACHE"):
        return Path(os.environ["XLA_WHEEL_CACHE"])
    return Path.home() / ".cache" / "flake8-xla" / "wheels"


@pytest.fixture(scope="module")
def report() -> dict:
    cmd = [sys.executable, str(SCRIPT), "--cache", str(wheel_cache()), "--releases", ",".join(RELEASES), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode not in (0, 1):
        pytest.fail(f"check_releases.py failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout)


def _key(item: dict) -> tuple:
    return item["row"], item["release"], item["expected"], item["found"]


def test_every_row_and_release_is_checked(report) -> None:
    assert report["releases"] == RELEASES
    assert report["checked_rows"] == [row.id for row in api_table().rows]


def test_no_unexpected_disagreements(report) -> None:
    unexpected = [d["line"] for d in report["disagreements"] if _key(d) not in ACCEPTED_DEVIATIONS]
    assert not unexpected, "the table disagrees with the release wheels:\n" + "\n".join(unexpected)


def test_accepted_deviations_are_still_real(report) -> None:
    assert set(ACCEPTED_DEVIATIONS) <= {_key(d) for d in report["disagreements"]}


def test_skipped_checks_are_the_documented_set(report) -> None:
    skipped = {(s["row"], s["aspect"]): s["reason"] for s in report["skipped"]}
    assert all(reason.strip() for reason in skipped.values())
    assert set(skipped) == set(EXPECTED_SKIPS), "\n".join(
        [f"new skip: {k} {skipped[k]}" for k in sorted(set(skipped) - set(EXPECTED_SKIPS))]
        + [f"no longer skipped: {k}" for k in sorted(set(EXPECTED_SKIPS) - set(skipped))])
