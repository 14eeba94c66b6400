"""Rule data files (YAML) and the marshal copies that spare the YAML parser on later runs."""
import os

import pytest

from flake8_xla import ruledata


def _copies(folder):
    cache = folder / "__pycache__"
    return sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []


def test_second_read_comes_from_the_copy_without_the_yaml_parser(tmp_path, monkeypatch):
    data = tmp_path / "table.yaml"
    data.write_text("rows:\n  - id: a\n    removed_in: 2.7\n")
    assert ruledata.read_data(str(data)) == {"rows": [{"id": "a", "removed_in": 2.7}]}
    assert len(_copies(tmp_path)) == 1

    def no_parser(text):
        raise AssertionError("parsed the YAML again")

    monkeypatch.setattr(ruledata, "_parse_yaml", no_parser)
    assert ruledata.read_data(str(data)) == {"rows": [{"id": "a", "removed_in": 2.7}]}


def test_an_edited_file_is_parsed_again_and_the_old_copy_goes(tmp_path):
    data = tmp_path / "table.yaml"
    data.write_text("value: 1\n")
    assert ruledata.read_data(str(data)) == {"value": 1}
    old = _copies(tmp_path)
    data.write_text("value: 2\n")  # same size, other bytes
    assert ruledata.read_data(str(data)) == {"value": 2}
    new = _copies(tmp_path)
    assert len(new) == 1 and new != old


def test_a_corrupt_copy_falls_back_to_the_yaml(tmp_path):
    data = tmp_path / "table.yaml"
    data.write_text("value: 3\n")
    ruledata.read_data(str(data))
    (copy,) = _copies(tmp_path)
    (tmp_path / "__pycache__" / copy).write_bytes(b"\x00garbage")
    assert ruledata.read_data(str(data)) == {"value": 3}


def test_no_copy_can_be_written_and_the_data_still_loads(tmp_path):
    data = tmp_path / "table.yaml"
    data.write_text("value: 4\n")
    (tmp_path / "__pycache__").write_text("a file where the folder would go")
    assert ruledata.read_data(str(data)) == {"value": 4}
    assert ruledata.read_data(str(data)) == {"value": 4}
    assert sorted(os.listdir(tmp_path)) == ["__pycache__", "table.yaml"]  # no temporary left behind


@pytest.mark.parametrize("name", ["api_lifecycle.yaml", "xla301_dynamic_shape_op.yml"])
def test_shipped_data_reads_the_same_from_the_copy_as_from_the_yaml(name):
    path = ruledata.data_path(name)
    with open(path, encoding="utf-8") as handle:
        parsed = ruledata._parse_yaml(handle.read())
    assert ruledata.read_data(path) == parsed
    assert ruledata.read_data(path) == parsed
