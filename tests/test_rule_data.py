"""Rule data files (YAML, JSON) and the checked marshal copies that spare the YAML parser on later runs."""
import os

import pytest
import yaml

from flake8_xla import ruledata, stash


def _parsed(path) -> object:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(ruledata.DATA_DIR)
                                        if n.endswith((".yaml", ".yml", ".json"))))
def test_the_shipped_rule_data_read_is_the_parsed_yaml(name) -> None:
    path = ruledata.data_path(name)
    assert ruledata.read_data(path) == _parsed(path)  # from its copy, or parsed and copied now
    assert ruledata.read_data(path) == _parsed(path)  # from the copy


def _copies(folder) -> list:
    return sorted(p for p in os.listdir(folder) if p.endswith(".marshal")) if os.path.isdir(folder) else []


@pytest.fixture
def data_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "rules").mkdir()
    path = tmp_path / "rules" / "table.yaml"
    path.write_text("latest_release: '2.9'\nrows:\n  - {id: a, names: [x.y], since: 2.5}\n")
    return path


def test_the_copy_is_read_without_the_yaml_parser(data_file, monkeypatch) -> None:
    first = ruledata.read_data(str(data_file))
    assert first == _parsed(data_file) and len(_copies(data_file.parent / "__pycache__")) == 1
    monkeypatch.setattr(ruledata, "_parse_yaml", lambda text: pytest.fail("parsed again"))
    assert ruledata.read_data(str(data_file)) == first
    assert sorted(os.listdir(data_file.parent)) == ["__pycache__", "table.yaml"]  # no temporary left behind


def test_a_changed_data_file_is_parsed_again_and_its_old_copy_removed(data_file) -> None:
    ruledata.read_data(str(data_file))
    data_file.write_text(data_file.read_text().replace("2.5", "2.6"))  # the same size: a new hash all the same
    assert ruledata.read_data(str(data_file)) == _parsed(data_file)
    assert ruledata.read_data(str(data_file))["rows"][0]["since"] == 2.6
    assert len(_copies(data_file.parent / "__pycache__")) == 1


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "empty", "other bytes"])
def test_a_damaged_copy_is_ignored_and_rebuilt(data_file, damage) -> None:
    ruledata.read_data(str(data_file))
    copy = data_file.parent / "__pycache__" / _copies(data_file.parent / "__pycache__")[0]
    data = bytearray(copy.read_bytes())
    if damage == "flipped byte":
        data[-3] ^= 0x01  # still valid marshal data, of another value: only the checksum tells
    damaged = {"flipped byte": bytes(data), "truncated": bytes(data[:-5]), "empty": b"",
               "other bytes": b"\x00" * len(data)}[damage]
    copy.write_bytes(damaged)
    assert ruledata.read_data(str(data_file)) == _parsed(data_file)
    assert copy.read_bytes() != damaged and stash.read(str(copy)) is not None  # rewritten whole


def test_a_read_only_install_keeps_its_copy_in_the_user_cache(data_file, tmp_path, monkeypatch) -> None:
    (data_file.parent / "__pycache__").write_text("not a directory: nothing can be written here")
    first = ruledata.read_data(str(data_file))
    assert first == _parsed(data_file)
    kept = tmp_path / "xdg" / "flake8-xla" / "startup"
    assert len(_copies(kept)) == 1
    monkeypatch.setattr(ruledata, "_parse_yaml", lambda text: pytest.fail("parsed again"))
    assert ruledata.read_data(str(data_file)) == first
    assert sorted(os.listdir(data_file.parent)) == ["__pycache__", "table.yaml"]  # no temporary left behind
