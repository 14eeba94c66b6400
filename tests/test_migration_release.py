"""Every torch_xla name the TorchTPU migration table matches is a real torch_xla 2.9 name (read from the
2.9.0 wheel, as tests/test_release_table.py reads it), or one the lifecycle table says 2.9 removed: a row
keyed on a misspelt name would never fire."""
import importlib.util
import sys
from pathlib import Path

import pytest

from flake8_xla.lifecycle.table import api_table
from flake8_xla.migration.table import migration_table
from flake8_xla.versions import parse_version

from test_release_table import wheel_cache

ROOT = Path(__file__).resolve().parent.parent
NAMES = sorted({(row.id, name) for row in migration_table().rows if row.kind == "call"
                for name in row.names if name.startswith("torch_xla.")})


@pytest.fixture(scope="module")
def wheel():
    spec = importlib.util.spec_from_file_location("check_releases", ROOT / "tools" / "check_releases.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_releases", tool)
    spec.loader.exec_module(tool)
    return tool, tool.Wheel("2.9.0", tool.fetch_wheel("2.9.0", wheel_cache()))


def _removed_by_2_9(qualname: str) -> bool:
    hit = api_table().lookup(qualname)
    return hit is not None and hit[0].removed_in is not None and hit[0].removed_in <= parse_version("2.9")


@pytest.mark.parametrize("row, name", NAMES, ids=[n for _, n in NAMES])
def test_the_name_exists_in_torch_xla_2_9(wheel, row, name):
    tool, release = wheel
    found = tool.find_name(release, name, "class" if name.rsplit(".", 1)[-1][:1].isupper() else "function")
    assert found.state != tool.REMOVED or _removed_by_2_9(name), f"{row}: {name}: {found.evidence}"
