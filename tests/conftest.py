import pytest

# Tests that take more than 15 s on a 2-core machine (`pytest --durations=25`), almost all of it in a
# module-scoped fixture they share, so every test that uses the fixture is slow when run alone.
# `pytest -m "not slow"` is the quick run; CI runs everything. test_stdlib_sweep.py marks its own;
# these are listed here by (module, fixture) or (module, test) because the modules belong to others.
SLOW_FIXTURES = {
    ("test_release_table.py", "report"),  # reads nine torch_xla release wheels (about 90 s)
    ("test_precommit.py", "pre_commit"),  # pre-commit builds its hook environment (about 30 s)
}
SLOW_TESTS = {
    ("test_property.py", "test_composed_programs_report_inside_the_file"),  # 400 hypothesis examples
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "packaging: builds the wheel and installs it into a fresh virtualenv")
    config.addinivalue_line("markers", "slow: takes more than 15 s; deselect with -m 'not slow' for a quick run")


def pytest_collection_modifyitems(config: pytest.Config, items) -> None:
    for item in items:
        module = item.path.name
        if (item.get_closest_marker("packaging") is not None  # builds a wheel and a virtualenv
                or (module, getattr(item, "originalname", item.name)) in SLOW_TESTS
                or any((module, name) in SLOW_FIXTURES for name in getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-snapshots", action="store_true", help="rewrite fixture snapshots")


_SKIPPED = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A skipped test fails the run: CI must really execute every test, the runtime ones included."""
    if _SKIPPED and exitstatus == 0:
        print(f"\n{len(_SKIPPED)} test(s) skipped, which this project treats as failures:", *_SKIPPED, sep="\n  ")
        session.exitstatus = 1


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A git project that requires torch_xla 2.9, as the working directory (the CLI tests)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torch_xla==2.9.0\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path
