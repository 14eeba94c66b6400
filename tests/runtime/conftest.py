"""Runtime tests run on the real torch_xla, on the CPU. They never skip: a missing torch_xla fails.

A test of behaviour that only some releases have carries ``@pytest.mark.release(">=2.4", why=...)``.
On another release it is deselected, not skipped, and the run ends with the list of such tests and
why each does not apply (tools/runtime_on_release.sh runs this directory on each claimed release).
"""
import os
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import Version

os.environ.setdefault("PJRT_DEVICE", "CPU")

# the release these tests run against, read without importing torch_xla before the tests do
INSTALLED = Version(Version(metadata.version("torch_xla")).base_version)
_NOT_APPLICABLE: list = []


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "release(spec, why): the torch_xla releases a test applies to "
                                       "(a PEP 440 specifier such as '>=2.4'), and why it does not apply to others")


def pytest_collection_modifyitems(config, items) -> None:
    kept, dropped = [], []
    for item in items:
        marker = item.get_closest_marker("release")
        if marker is None or INSTALLED in SpecifierSet(marker.args[0]):
            kept.append(item)
        else:
            dropped.append(item)
            _NOT_APPLICABLE.append((item.nodeid, marker.args[0], marker.kwargs["why"]))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_terminal_summary(terminalreporter) -> None:
    if _NOT_APPLICABLE:
        terminalreporter.section(f"not applicable on torch_xla {INSTALLED}: {len(_NOT_APPLICABLE)} test(s)")
        for nodeid, spec, why in _NOT_APPLICABLE:
            terminalreporter.write_line(f"{nodeid} (torch_xla{spec}): {why}")
