import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "packaging: builds the wheel and installs it into a fresh virtualenv")


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
