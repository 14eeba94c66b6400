"""The lifecycle table walked against the installed torch_xla (2.9 for the README's test command; the
other releases through tools/runtime_on_release.sh): each row's state on that release is checked."""
import ast
import importlib
import inspect
import re
import textwrap
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


def _carries_deprecation(obj) -> bool:
    """typing_extensions.deprecated (2.8+), a wrapper made by torch_xla.experimental.deprecation
    (2.1-2.7: it logs a warning on the first call), or a body whose every call warns or logs that
    it is deprecated (experimental.compile in 2.5-2.6; a warning under an `if` is about an argument)."""
    code = getattr(obj, "__code__", None)
    if getattr(obj, "__deprecated__", None) is not None:
        return True
    if code is None:
        return False
    if code.co_filename.replace("\\", "/").endswith("torch_xla/experimental/deprecation.py"):
        return True
    function = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    return any(type(statement) is ast.Expr and type(statement.value) is ast.Call
               and ast.unparse(statement.value.func) in ("warnings.warn", "logging.warning", "warn")
               and "deprecated" in ast.unparse(statement.value) for statement in function.body)


def test_the_table_describes_the_installed_release() -> None:
    assert INSTALLED <= TABLE.latest


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


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind in API_KINDS and r.state(INSTALLED) != "removed"
                                 and not (r.added_in and INSTALLED < r.added_in)], ids=lambda r: r.id)
def test_present_apis_exist_and_warn_as_the_table_says(row) -> None:
    for name in row.names:
        obj = resolve(name)
        if row.state(INSTALLED) == "deprecated":
            assert _carries_deprecation(obj), f"{name} should carry a deprecation on {INSTALLED}"
        else:
            assert not _carries_deprecation(obj), f"{name} warns on {INSTALLED}, but the table says {row.status}"


@pytest.mark.parametrize("row", [r for r in ROWS if r.added_in is not None], ids=lambda r: r.id)
def test_added_in_is_the_first_release_with_it(row) -> None:
    present = INSTALLED >= row.added_in
    if row.kind == "argument":
        for name in row.names:
            try:
                callee = resolve(name)
            except AttributeError:
                assert not present, f"{name} is missing on {INSTALLED}"
                continue  # the callee itself is newer still
            parameters = inspect.signature(callee).parameters
            if row.argument.missing:  # what arrived is the default that lets a call leave it out
                assert (parameters[row.argument.keyword].default is not inspect.Parameter.empty) == present
            else:
                assert (row.argument.keyword in parameters) == present
        return
    for name in row.names:
        if present and row.state(INSTALLED) != "removed":
            resolve(name)
        elif not present:
            with pytest.raises((AttributeError, ModuleNotFoundError)):
                resolve(name)


@pytest.mark.release(">=2.8", why="xm.mark_step and xm.xla_device warn from 2.8")
def test_deprecated_functions_emit_a_deprecation_warning() -> None:
    import torch_xla.core.xla_model as xm

    for call in (xm.mark_step, xm.xla_device):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert any(issubclass(w.category, DeprecationWarning) for w in caught), call.__name__


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "module" and r.state(INSTALLED) == "deprecated"],
                         ids=lambda r: r.id)
def test_deprecated_modules_warn_on_import_or_on_use(row) -> None:
    """A module deprecated whole warns when imported (a UserWarning to remove the import, or a
    DeprecationWarning); one whose names moved (experimental.pjrt, 2.1-2.4) keeps them as
    deprecation wrappers."""
    code = f"import warnings; warnings.simplefilter('always'); import {row.names[0]}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    if "UserWarning" in result.stderr and "remove this import" in result.stderr or \
            "DeprecationWarning" in result.stderr and "deprecated" in result.stderr:
        return
    module = importlib.import_module(row.names[0])
    wrappers = [name for name, value in vars(module).items() if _carries_deprecation(value)]
    assert wrappers, f"{row.names[0]} neither warns on import nor holds deprecated names on {INSTALLED}"


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "argument" and r.argument.keyword
                                 and not r.argument.allowed and not r.argument.missing], ids=lambda r: r.id)
def test_keywords_are_in_the_signature_exactly_where_they_work(row) -> None:
    works = row.state(INSTALLED) not in ("removed", "unavailable")
    for name in row.names:
        try:
            obj = resolve(name)
        except AttributeError:
            continue  # the whole callee is gone or not there yet (its own row, or added_in, says so)
        assert (row.argument.keyword in inspect.signature(obj).parameters) == works, (name, str(INSTALLED))


@pytest.mark.release(">=2.4", why="FSDPv2's mesh became keyword-only in 2.4")
def test_fsdpv2_mesh_is_keyword_only() -> None:
    [row] = [r for r in ROWS if r.id == "fsdpv2-positional-mesh"]
    params = list(inspect.signature(resolve(row.names[0])).parameters.values())
    assert params[1].name == "mesh" and params[1].kind is inspect.Parameter.KEYWORD_ONLY


# calls that reach each planned API that warns through a deprecated call, in this one process (a world of 1)
_CALLS_OF_WARNING_ROWS = {
    "xm-xla-rendezvous": lambda xm: xm.xla_rendezvous(b"x"),
    "xm-rendezvous": lambda xm: xm.rendezvous("t"),
    "xm-do-on-ordinals": lambda xm: xm.do_on_ordinals(lambda: 3, (), (0,)),
    "xm-mesh-reduce": lambda xm: xm.mesh_reduce("t", 1.0, sum),
}


def _deprecation_warnings(call) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except RuntimeError:
            pass  # get_memory_info on the CPU: UNIMPLEMENTED, after the default device was chosen
    return [w for w in caught if issubclass(w.category, DeprecationWarning)]


def _deprecation_warned(call) -> bool:
    return bool(_deprecation_warnings(call))


def _warns_only_through_a_call(row, call) -> None:
    """From warns_in the call shows the warning of the deprecated API it calls, attributed to torch_xla
    (so Python's default filters hide it), and the API itself carries no deprecation."""
    found = _deprecation_warnings(call)
    assert bool(found) == row.warns_on(INSTALLED), (row.id, str(INSTALLED))
    if found:
        assert all(w.filename.replace("\\", "/").endswith("torch_xla/core/xla_model.py") for w in found)
        assert all(str(w.message) == "Use torch_xla.device instead" for w in found)  # xla_device()'s advice


@pytest.mark.parametrize("row", [r for r in ROWS if r.warns_in and r.kind != "argument"], ids=lambda r: r.id)
def test_planned_apis_warn_through_a_deprecated_call_from_warns_in(row) -> None:
    import torch_xla.core.xla_model as xm

    assert not _carries_deprecation(resolve(row.names[0])), f"{row.names[0]} is deprecated itself"
    _warns_only_through_a_call(row, lambda: _CALLS_OF_WARNING_ROWS[row.id](xm))


def test_get_memory_info_without_a_device_fails_then_works_then_warns() -> None:
    import torch_xla.core.xla_model as xm

    [row] = [r for r in ROWS if r.id == "xm-get-memory-info-default-device"]
    if INSTALLED < row.added_in:
        with pytest.raises(TypeError, match="device"):
            xm.get_memory_info()  # noqa: XLA105 -- the behaviour under test
        return
    _warns_only_through_a_call(row, xm.get_memory_info)
