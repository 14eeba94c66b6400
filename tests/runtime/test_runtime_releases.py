"""xla_compat.releases, the per-release table of docs/runtime.md, against the installed torch_xla:
what a companion does here relies on upstream names that exist, and what it does only from a later
release relies on one that does not exist yet. Run on each release by tools/runtime_on_release.sh."""
import importlib
import inspect

import pytest
import torch_xla

import xla_compat
from xla_compat.releases import DISPATCH, RELEASES, in_use, release_key

INSTALLED = ".".join(torch_xla.__version__.split(".")[:2])


def _present(need: str) -> bool:
    """Whether a dotted name resolves (``name(keyword)``: and its signature takes that keyword)."""
    name, _, keyword = need.rstrip(")").partition("(")
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return False
        return not keyword or keyword in inspect.signature(obj).parameters
    return False


def test_the_installed_release_is_one_the_table_covers() -> None:
    assert INSTALLED in RELEASES


@pytest.mark.parametrize("companion", sorted(DISPATCH))
def test_what_a_companion_relies_on_here_exists(companion) -> None:
    assert callable(getattr(xla_compat, companion))
    entry = in_use(companion, torch_xla.__version__)
    assert [need for need in entry.needs if not _present(need)] == [], entry


@pytest.mark.parametrize("companion", sorted(DISPATCH))
def test_what_a_companion_does_only_from_a_later_release_is_not_here_yet(companion) -> None:
    later = [entry for entry in DISPATCH[companion] if release_key(entry.since) > release_key(INSTALLED)]
    assert [entry for entry in later if all(_present(need) for need in entry.needs)] == []


def test_entries_are_in_release_order_from_the_oldest_release() -> None:
    for companion, entries in DISPATCH.items():
        assert entries[0].since == RELEASES[0], companion
        assert [release_key(e.since) for e in entries] == sorted({release_key(e.since) for e in entries}), companion
