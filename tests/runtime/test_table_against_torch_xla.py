"""The lifecycle table walked against the installed torch_xla 2.9 (item 5a of issue 3)."""
import importlib
import inspect
import re
import subprocess
import sys
import warnings

import pytest
import torch_xla

import xla_compat
from flake8_xla.lifecycle.table import api_table
from flake8_xla.versions import parse_version

TABLE = api_table()
INSTALLED = parse_version(torch_xla.__version__)
ROWS = TABLE.rows


def resolve(qualname: str):
    """Import the longest module prefix of ``qualname`` and walk the rest as attributes."""
    parts = qualname.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(qualname)


def test_installed_release_is_the_one_the_table_describes() -> None:
    assert INSTALLED == TABLE.latest


@pytest.mark.parametrize("row", [r for r in ROWS if r.companion], ids=lambda r: r.id)
def test_companion_exists_and_is_callable(row) -> None:
    name = row.companion.split(".", 1)[1]
    assert name in xla_compat.__all__
    assert callable(getattr(xla_compat, name))


@pytest.mark.parametrize("row", [r for r in ROWS if r.replacement and r.replacement.startswith("torch_xla")
                                 and r.replacement_since and r.replacement_since <= INSTALLED],
                         ids=lambda r: r.id)
def test_upstream_replacement_exists(row) -> None:
    name = re.match(r"[\w.]+", row.replacement).group(0)
    obj = resolve(name)
    keywords = re.findall(r"(\w+)=", row.replacement)
    if keywords:
        params = inspect.signature(obj).parameters
        assert all(k in params for k in keywords)


API_KINDS = ("function", "class", "decorator")


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind in API_KINDS + ("module",)
                                 and r.state(INSTALLED) == "removed"], ids=lambda r: r.id)
def test_removed_apis_are_really_gone(row) -> None:
    for name in row.names:
        with pytest.raises((AttributeError, ModuleNotFoundError)):
            resolve(name)


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind in API_KINDS and r.state(INSTALLED) in ("planned", None)
                                 or (r.kind in API_KINDS and r.state(INSTALLED) == "deprecated")],
                         ids=lambda r: r.id)
def test_present_apis_exist_and_warn_as_the_table_says(row) -> None:
    for name in row.names:
        obj = resolve(name)
        deprecated = getattr(obj, "__deprecated__", None)
        if row.state(INSTALLED) == "deprecated":
            assert deprecated, f"{name} should carry a deprecation (typing_extensions.deprecated)"
        else:
            assert deprecated is None, f"{name} warns, but the table says {row.status}"


def test_deprecated_functions_emit_a_deprecation_warning() -> None:
    import torch_xla.core.xla_model as xm

    for call in (xm.mark_step, xm.xla_device):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert any(issubclass(w.category, DeprecationWarning) for w in caught), call.__name__


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "module" and r.state(INSTALLED) == "deprecated"],
                         ids=lambda r: r.id)
def test_deprecated_module_imports_warn(row) -> None:
    code = f"import warnings; warnings.simplefilter('always'); import {row.names[0]}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "UserWarning" in result.stderr and "remove this import" in result.stderr


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "argument" and r.argument.keyword
                                 and not r.argument.allowed and r.state(INSTALLED) == "removed"],
                         ids=lambda r: r.id)
def test_removed_keywords_are_gone_from_the_signature(row) -> None:
    for name in row.names:
        try:
            obj = resolve(name)
        except AttributeError:
            continue  # the whole callee is gone (reported as removed on its own row)
        assert row.argument.keyword not in inspect.signature(obj).parameters


def test_fsdpv2_mesh_is_keyword_only() -> None:
    [row] = [r for r in ROWS if r.id == "fsdpv2-positional-mesh"]
    params = list(inspect.signature(resolve(row.names[0])).parameters.values())
    assert params[1].name == "mesh" and params[1].kind is inspect.Parameter.KEYWORD_ONLY
