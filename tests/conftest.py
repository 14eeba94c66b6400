import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "packaging: builds the wheel and installs it into a fresh virtualenv")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-snapshots", action="store_true", help="rewrite fixture snapshots")
