"""Property tests: the engine never raises, and what it reports always points inside the file.

1. Arbitrary programs from hypothesmith (grammar- and libcst-node-based), with a torch_xla import
   prepended so the pre-filter lets them through; the engine and the semantic model must not raise.
2. Programs composed from torch_xla-heavy statements (deprecated calls, hasattr() and version
   gates, try/except ImportError, shadowing defs, comprehensions, non-ASCII text, form feeds,
   U+2028 inside strings ...): every diagnostic must be on a line of the file, at a column of that
   line where an AST node starts, with a lifecycle code, sorted, without duplicates.
"""
from __future__ import annotations

import ast
import io
import re
import warnings
from typing import List, Sequence

import hypothesmith
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flake8_xla.engine import lint, lint_source, lint_tree, might_match
from flake8_xla.lifecycle.table import api_table
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.versions import Target, Version

# hypothesmith compiles what it generates; its SyntaxWarnings ("'int' object is not callable") are noise.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

PREFIX = "import torch_xla.core.xla_model as xm\n"
# composed snippets may trip other rules too (XLA306); positions are what is checked
CODE = re.compile(r"^XLA[1-9]\d\d$")
SETTINGS = dict(deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])


def flake8_lines(source: str) -> List[str]:
    """Split like flake8 (a universal-newline text file's readlines), not like str.splitlines."""
    return io.StringIO(source, newline=None).readlines()


def parse(source: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, "gen.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def check_diagnostics(diagnostics, lines: Sequence[str], tree: ast.AST) -> None:
    starts = {(n.lineno, n.col_offset) for n in ast.walk(tree) if hasattr(n, "col_offset")}
    for d in diagnostics:
        assert CODE.match(d.code), d
        assert 1 <= d.line <= len(lines), (d, len(lines))
        text = lines[d.line - 1].rstrip("\r\n")
        assert 0 <= d.col <= len(text), (d, text)
        # The column is a character column; converted back to UTF-8 bytes it is where a node starts.
        assert (d.line, len(text[: d.col].encode("utf-8"))) in starts, (d, text)
    assert list(diagnostics) == sorted(diagnostics)
    assert len(set(diagnostics)) == len(diagnostics), diagnostics


def run_engine(source: str, in_property: bool = True):
    lines = flake8_lines(source)
    tree = parse("".join(lines))
    if in_property:
        assume(tree is not None)
    assert tree is not None
    if might_match("".join(lines)):
        diagnostics = lint(lines, tree, "gen.py", target="2.9")
    else:
        diagnostics = lint_tree(lines, tree, "gen.py", Target(Version(2, 9), "test"))
    table = api_table()
    model = SemanticModel(tree, table.leaf_names, table.by_name.__contains__)
    for ref in model.references:
        assert ref.qualname and not ref.qualname.startswith(".") and not ref.qualname.endswith(".")
    check_diagnostics(diagnostics, lines, tree)
    return diagnostics


def with_prefix(source: str) -> str:
    candidate = PREFIX + source
    return candidate if parse(candidate) is not None else source


# --- 1. arbitrary programs ------------------------------------------------------------------------

@settings(max_examples=150, **SETTINGS)
@given(hypothesmith.from_grammar())
def test_engine_never_raises_on_grammar_programs(source: str) -> None:
    run_engine(with_prefix(source))


@settings(max_examples=40, **SETTINGS)
@given(hypothesmith.from_node())
def test_engine_never_raises_on_node_programs(source: str) -> None:
    run_engine(with_prefix(source))


# --- 2. torch_xla-heavy composed programs -----------------------------------------------------------

IMPORTS = [
    "import os",
    "import torch_xla",
    "import torch_xla.core.xla_model as xm",
    "import torch_xla.runtime as xr",
    "import torch_xla.distributed.xla_multiprocessing as xmp",
    "import torch_xla.experimental.xla_sharding as xs",
    "from torch_xla.core.xla_model import mark_step, get_ordinal, xrt_world_size",
    "from torch_xla.core import xla_model",
    "from torch_xla.experimental.pjrt import world_size, global_ordinal",
    "from torch_xla.core.xla_model import *",
    "from os import environ",
]

SIMPLE = [
    "xm.mark_step()",
    "device = xm.xla_device()",
    "n = xm.xrt_world_size()",
    "r = xm.get_ordinal(0)",
    "r = xm.get_ordinal(defval=0)",
    "r = xm.get_local_ordinal()",
    "xm.save(model.state_dict(), 'model.pt')",
    "barrier = functools.partial(xm.rendezvous, 'init')",
    "xr.world_size()",
    "torch_xla.sync()",
    "torch_xla.core.xla_model.mark_step()",
    "xla_model.mark_step()",
    "mark_step()",
    "get_ordinal(1)",
    "world_size()",
    "mesh = xs.Mesh(ids, shape)",
    "xmp.spawn(train, args=(cfg,), nprocs=8)",
    "xmp.spawn(train, (cfg,), 8)",
    "xmp.spawn(*args, nprocs=None)",
    "os.environ['XLA_USE_BF16'] = '1'",
    "os.environ['PJRT_DEVICE'] = 'CUDA'",
    "os.environ.update({'GPU_NUM_DEVICES': '4', **extra})",
    "os.environ.update(XLA_USE_FP16='1')",
    "os.environ.setdefault('XRT_TPU_CONFIG', 'localservice;0;localhost:51011')",
    "environ['XLA_USE_SPMD'] = '1'",
    "os.putenv('XLA_DOWNCAST_BF16', '1')",
    "xm = None",
    "xm = object()",
    "xr = xm",
    "del xm",
    "pass",
    "f = lambda xm: xm.mark_step()",
    "x = [xm.mark_step() for xm in range(3)]",
    "x = {k: xm.xla_device() for k in range(3)}",
    "x = [y for y in range(3) if (xm := y)]",
    "y = (xm\n    .mark_step())",
    "z = f'{xm.mark_step()}'",
    "'''\nxm.mark_step()\n'''",
    "w = xm.mark_step if hasattr(xm, 'mark_step') else None",
    "v = hasattr(xr, 'world_size') and xr.world_size() or xm.xrt_world_size()",
    "@xr.requires_pjrt\ndef decorated():\n    pass",
    "xm.mark_step(); xm.mark_step()",
]

# Lines where character and UTF-8 byte columns differ, or where str.splitlines() and flake8 differ.
UNICODE = [
    "s = 'ÄÖÜ é'; xm.mark_step()",
    "s = '日本語'; t = xm.xla_device(); u = xm.xrt_world_size()",
    "é = 1; os.environ['XLA_USE_BF16'] = 'ü'",
    "xm.get_ordinal('ä', defval=0)",
    "s = '\U0001f600'; xm.save(x, 'ö.pt')",
    "s = '\u2028'; xm.mark_step()",  # U+2028 inside a string: one line for Python and flake8
    "s = 'ü\x85'; xm.xla_device()",  # NEL inside a string
    "s = 'ü\x0c'; xm.xla_device()",  # form feed inside a string
    "\x0cxm.mark_step()",  # form feed before a statement
    "x = 1 \x0c+ 2; y = 'ß'; xm.mark_step()",
]

# (header, indentation depth of the body that follows it)
HEADERS = [
    ("if hasattr(xr, 'world_size'):", 1),
    ("if hasattr(torch_xla, 'sync'):", 1),
    ("if torch_xla.__version__ >= '2.5':", 1),
    ("if XLA_VERSION >= (2, 5):", 1),
    ("if flag:", 1),
    ("if xm.xla_device() is not None:", 1),
    ("while running:", 1),
    ("for xm in range(2):", 1),
    ("with open('f') as xm:", 1),
    ("async def coro():\n    async with lock:", 2),
    ("def f():", 1),
    ("def f(xm):", 1),
    ("def f(*, xm=None):", 1),
    ("def f(x=xm.mark_step()):", 1),
    ("async def f():", 1),
    ("class C:", 1),
    ("class C(xm.RateTracker):", 1),
    ("def f():\n    global xm", 1),
    ("def outer():\n    xm = None\n    def inner():\n        nonlocal xm", 2),
    ("def f():\n    if hasattr(xr, 'world_size'):\n        return xr.world_size()", 1),
    ("def f():\n    if torch_xla_version() < (2, 4):\n        raise RuntimeError('too old')", 1),
    ("def f():\n    import torch_xla.core.xla_model as xm", 1),
    ("def f():\n    xm = 1", 1),
]

HANDLERS = [
    "except ImportError:",
    "except (AttributeError, TypeError):",
    "except TypeError:",
    "except Exception:",
    "except:",
    "except ValueError as xm:",
]


def _indent(lines: List[str], depth: int = 1) -> List[str]:
    pad = "    " * depth
    # A form feed in the indentation resets the column count: keep it in front of the padding.
    return [("\x0c" + pad + line[1:] if line.startswith("\x0c") else pad + line) if line.strip() else line
            for line in lines]


def _compound(children: st.SearchStrategy) -> st.SearchStrategy:
    body = st.lists(children, min_size=1, max_size=3).map(lambda blocks: [line for b in blocks for line in b])

    def under(header, lines: List[str]) -> List[str]:
        text, depth = header
        out = text.split("\n") + _indent(lines, depth)
        return out

    def if_block(header, a, b, has_else):
        out = under(header, a)
        if has_else and header[0].startswith(("if", "while", "for")):
            out += ["else:"] + _indent(b)
        return out

    def try_block(a, handlers, b, final):
        out = ["try:"] + _indent(a)
        for h in sorted(handlers, key=lambda h: h == "except:"):  # a bare except must be last
            out += [h] + _indent(b)
        if final:
            out += ["finally:"] + _indent(b)
        return out

    def match_block(a):
        return ["match value:", "    case [xm, *rest]:"] + _indent(a, 2) + ["    case _:", "        pass"]

    return st.one_of(
        st.builds(if_block, st.sampled_from(HEADERS), body, body, st.booleans()),
        st.builds(try_block, body, st.lists(st.sampled_from(HANDLERS), min_size=1, max_size=2, unique=True),
                  body, st.booleans()),
        st.builds(match_block, body),
    )


STATEMENTS = st.recursive(
    st.one_of(st.sampled_from(SIMPLE), st.sampled_from(UNICODE)).map(lambda s: s.split("\n")),
    _compound, max_leaves=12)

PROGRAMS = st.builds(
    lambda imports, blocks: "\n".join(imports + [line for b in blocks for line in b]) + "\n",
    st.lists(st.sampled_from(IMPORTS), max_size=5),
    st.lists(STATEMENTS, min_size=1, max_size=6),
)


@settings(max_examples=400, **SETTINGS)
@given(PROGRAMS)
def test_composed_programs_report_inside_the_file(source: str) -> None:
    diagnostics = run_engine(source)
    # Linting is a pure function of its input.
    lines = flake8_lines(source)
    assert lint(lines, ast.parse("".join(lines)), "gen.py", target="2.9") == diagnostics


def test_composed_programs_reach_every_rule() -> None:
    """The strategy is not vacuous: its statements do trigger all six codes."""
    source = "\n".join(IMPORTS + SIMPLE + UNICODE) + "\n"
    source = source.replace("xm = None\n", "").replace("xm = object()\n", "").replace("del xm\n", "")
    source = source.replace("xr = xm\n", "")
    diagnostics = run_engine(source, in_property=False)
    assert {d.code for d in diagnostics} == {f"XLA10{i}" for i in range(1, 7)}


# --- a concrete case the properties are about ----------------------------------------------------

@pytest.mark.parametrize("separator", ["\x0c", "\u2028", "\x1c", "\x85"])
def test_lint_columns_with_line_separators_inside_strings(separator: str) -> None:
    source = f"import torch_xla.core.xla_model as xm\ns = '{separator}'\nt = 'é'; xm.mark_step()\n"
    diagnostics = lint(flake8_lines(source), None, "gen.py", target="2.9")
    assert [(d.line, d.col, d.code) for d in diagnostics] == [(3, 9, "XLA102")]


@pytest.mark.parametrize("separator", ["\x0c", "\u2028", "\x1c", "\x85"])
def test_lint_source_columns_match_flake8(separator: str) -> None:
    """lint_source must report the same (character) columns as the flake8 front-end."""
    source = f"import torch_xla.core.xla_model as xm\ns = '{separator}'\nt = 'é'; xm.mark_step()\n"
    assert [(d.line, d.col) for d in lint_source(source, "gen.py")] == [(3, 9)]
