"""Configuration files: every broken value is one ConfigError line naming the file, the section and
the key (the CLI prints it as ``flake8-xla: error: ...`` and exits 2); the resolved target says where
it came from."""
import pytest

from flake8_xla import config, versions
from flake8_xla.config import ConfigError, Settings, load_file, merge, parse_per_file_ignores
from flake8_xla.versions import Version, infer_target

QUOTE = ("target-version must be a quoted string such as \"2.10\", not the number 2.1 "
         "(TOML reads an unquoted 2.10 as 2.1)")


@pytest.fixture(autouse=True)
def _fresh_caches():
    versions.forget_project_files()
    yield
    versions.forget_project_files()


def _error(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_file(str(path))
    message = str(info.value)
    assert "\n" not in message
    return message


# --- defect 14: malformed values are usage errors, never a traceback or a silent default ----------

@pytest.mark.parametrize("body, message", [
    ('[tool.flake8-xla]\nper-file-ignores = ["a"]\n',
     "[tool.flake8-xla]: per-file-ignores: 'a' is not GLOB:CODES (e.g. \"tests/*.py:XLA101\")"),
    ('[tool.flake8-xla]\nper-file-ignores = "a.py"\n',
     "[tool.flake8-xla]: per-file-ignores: 'a.py' is not GLOB:CODES (e.g. \"tests/*.py:XLA101\")"),
    ('[tool.flake8-xla]\nper-file-ignores = 5\n',
     "[tool.flake8-xla]: per-file-ignores must be a table of GLOB = [CODES], a list or a string, not 5"),
    ('[tool.flake8-xla]\nper-file-ignores = {"a.py" = 5}\n',
     "[tool.flake8-xla]: per-file-ignores: the codes for 'a.py' must be a string or a list of strings, not 5"),
    ('[tool.flake8-xla]\nexclude = 5\n', "[tool.flake8-xla]: exclude must be a string or a list of strings, not 5"),
    ('[tool.flake8-xla]\nextend-exclude = [1]\n',
     "[tool.flake8-xla]: extend-exclude must be a string or a list of strings, not [1]"),
    ('[tool.flake8-xla]\nselect = true\n', "[tool.flake8-xla]: select must be a string or a list of strings, not True"),
    ('[tool.flake8-xla]\ntarget-version = 2.10\n', "[tool.flake8-xla]: " + QUOTE),
    ('[tool.flake8-xla]\ntarget-version = 2\n',
     "[tool.flake8-xla]: target-version must be a quoted string such as \"2.10\", not the number 2"),
    ('[tool.flake8-xla]\ntarget-version = "two"\n',
     "[tool.flake8-xla]: target-version: not a torch_xla version: 'two' (expected MAJOR.MINOR, e.g. 2.8)"),
    ('[tool.flake8-xla]\noutput-format = ["json"]\n',
     "[tool.flake8-xla]: output-format must be one of text, json, sarif, github, concise, full, not ['json']"),
])
def test_pyproject_value_errors_name_file_section_and_key(tmp_path, body, message) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(body)
    assert _error(path) == f"{path} {message}"


def test_a_tool_key_that_is_not_a_table_is_an_error(tmp_path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("tool = 5\n")
    assert _error(path) == f"{path}: tool must be a table ([tool]), not 5"


@pytest.mark.parametrize("name", ["setup.cfg", "tox.ini", ".flake8"])
@pytest.mark.parametrize("section", ["flake8", "flake8-xla"])
def test_ini_per_file_ignores_without_codes_is_an_error(tmp_path, name, section) -> None:
    path = tmp_path / name
    path.write_text(f"[{section}]\nper-file-ignores = a.py\n")
    assert _error(path) == \
        f"{path} [{section}]: per-file-ignores: 'a.py' is not GLOB:CODES (e.g. \"tests/*.py:XLA101\")"


def test_ini_target_version_text_is_kept_as_written(tmp_path) -> None:
    # INI values are text, so 2.10 stays 2.10 there (and is only warned about: it is unknown)
    path = tmp_path / "setup.cfg"
    path.write_text("[flake8]\nxla-target-version = 2.10\n")
    assert load_file(str(path)).target_version == "2.10"


def test_valid_per_file_ignores_forms(tmp_path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.flake8-xla]\nper-file-ignores = {"tests/*" = ["XLA101", "XLA2"], "a.py" = "XLA3"}\n')
    assert load_file(str(path)).per_file_ignores == (("tests/*", ("XLA101", "XLA2")), ("a.py", ("XLA3",)))
    path.write_text('[tool.flake8-xla]\nper-file-ignores = ["tests/*:XLA101,XLA2", "a.py:XLA3"]\n')
    assert load_file(str(path)).per_file_ignores == (("tests/*", ("XLA101", "XLA2")), ("a.py", ("XLA3",)))
    ini = tmp_path / "setup.cfg"
    ini.write_text("[flake8]\nper-file-ignores =\n    tests/*: XLA101 E501\n    a.py: F401\n")
    # [flake8] is flake8's too: its codes are filtered to ours, a glob left without any is dropped
    assert load_file(str(ini)).per_file_ignores == (("tests/*", ("XLA101",)),)


def test_parse_per_file_ignores_is_public_and_raises_config_error() -> None:
    assert parse_per_file_ignores("a.py:XLA101 b/*.py:XLA2") == (("a.py", ("XLA101",)), ("b/*.py", ("XLA2",)))
    with pytest.raises(ConfigError) as info:
        parse_per_file_ignores("a.py")
    assert str(info.value) == "--per-file-ignores: 'a.py' is not GLOB:CODES (e.g. \"tests/*.py:XLA101\")"
    for silent_in_flake8 in ("a.py:", ":XLA101"):  # flake8's own parser drops these without a word
        with pytest.raises(ConfigError) as info:
            parse_per_file_ignores(silent_in_flake8, "setup.cfg [flake8-xla]: per-file-ignores")
        assert str(info.value) == (f"setup.cfg [flake8-xla]: per-file-ignores: {silent_in_flake8!r} is not GLOB:CODES "
                                   "(e.g. \"tests/*.py:XLA101\")")


# --- target-version: warn for a release outside the API table ------------------------------------

def test_known_releases_come_from_the_api_table() -> None:
    assert config.known_releases() == tuple(Version(2, minor) for minor in range(1, 10))


@pytest.mark.parametrize("value, warned", [("2.10", True), ("2.0", True), ("3.1", True), ("2.1", False),
                                           ("2.9.0+cpu", False)])
def test_unknown_target_is_a_warning_not_an_error(tmp_path, capsys, value, warned) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[tool.flake8-xla]\ntarget-version = "{value}"\n')
    assert load_file(str(path)).target_version == value
    shown = str(versions.parse_version(value))
    where = "outside the releases flake8-xla knows (2.1 to 2.9)" if value == "2.0" else \
        "newer than the last release flake8-xla knows (2.9)"
    expected = (f"flake8-xla: warning: {path} [tool.flake8-xla]: target-version: torch_xla {shown} is {where}; "
                "its rule data may not describe that release\n")
    assert capsys.readouterr().err == (expected if warned else "")


def test_check_target_version_for_options() -> None:
    assert config.check_target_version("2.8", "--xla-target-version") == "2.8"
    with pytest.raises(ConfigError) as info:
        config.check_target_version("latest", "--xla-target-version")
    assert str(info.value) == ("--xla-target-version: not a torch_xla version: 'latest' "
                               "(expected MAJOR.MINOR, e.g. 2.8)")


# --- defect 19: the target says where it came from ------------------------------------------------

def test_target_origin_from_the_config_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(versions, "installed_version", lambda: None)
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.flake8-xla]\ntarget-version = "2.6"\n')
    settings = load_file(str(path))
    assert settings.target_origin == f"{path} [tool.flake8-xla] target-version"
    target = infer_target(str(tmp_path / "a.py"), settings.target_version, Version(2, 9), settings.target_origin)
    assert target == versions.Target(Version(2, 6), f"{path} [tool.flake8-xla] target-version",
                                      f"{path} [tool.flake8-xla] target-version = 2.6")
    ini = tmp_path / "setup.cfg"
    ini.write_text("[flake8]\nxla_target_version = 2.4\n")
    assert load_file(str(ini)).target_origin == f"{ini} [flake8] xla_target_version"


def test_command_line_target_overrides_the_origin(tmp_path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.flake8-xla]\ntarget-version = "2.6"\n')
    merged = merge(load_file(str(path)), target_version="2.8")
    assert (merged.target_version, merged.target_origin) == ("2.8", "--xla-target-version")
    kept = merge(load_file(str(path)), target_version=None)
    assert kept.target_origin == f"{path} [tool.flake8-xla] target-version"
    assert Settings().target_origin is None


# --- sync-functions: the project's own graph syncs (issue 13) ---------------------------------------

def test_sync_functions_from_pyproject_and_flake8_sections(tmp_path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.flake8-xla]\nsync-functions = ["mylib.sync", "mylib.steps.finish_step"]\n')
    assert load_file(str(path)).sync_functions == frozenset({"mylib.sync", "mylib.steps.finish_step"})
    ini = tmp_path / "setup.cfg"
    ini.write_text("[flake8]\nxla-sync-functions = mylib.sync,\n    trainer.utils.step_sync\n")
    assert load_file(str(ini)).sync_functions == frozenset({"mylib.sync", "trainer.utils.step_sync"})


def test_command_line_sync_functions_add_to_the_configured_ones() -> None:
    base = Settings(sync_functions=frozenset({"mylib.sync"}))
    assert merge(base, sync_functions=frozenset({"other.sync"})).sync_functions == {"mylib.sync", "other.sync"}
    assert merge(base, sync_functions=None).sync_functions == {"mylib.sync"}


@pytest.mark.parametrize("body, message", [
    ('sync-functions = ["sync"]', "sync-functions: 'sync' is not a qualified function name (e.g. mylib.sync)"),
    ('sync-functions = ["mylib.sync()"]',
     "sync-functions: 'mylib.sync()' is not a qualified function name (e.g. mylib.sync)"),
    ("sync-functions = 3", "sync-functions must be a string or a list of strings, not 3"),
])
def test_sync_functions_that_are_not_qualified_names_are_errors(tmp_path, body, message) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[tool.flake8-xla]\n{body}\n")
    assert _error(path) == f"{path} [tool.flake8-xla]: {message}"
