"""Name resolution and compat-guard detection of the shared semantic layer."""
import ast
import textwrap

import pytest

from flake8_xla.engine import lint_source
from flake8_xla.lifecycle.table import api_table
from flake8_xla.analysis.semantic import COMPAT, SemanticModel
from flake8_xla.analysis.syntax import within_dotted


def codes(source: str, target: str = "2.9"):
    return [(d.line, d.code) for d in lint_source(textwrap.dedent(source), target=target)]


def resolved(source: str):
    table = api_table()
    model = SemanticModel(ast.parse(textwrap.dedent(source)), table.leaf_names, table.by_name.__contains__)
    return {(r.node.lineno, r.qualname, bool(r.guard & COMPAT)) for r in model.references if not r.is_import}


REPORTED = {
    "alias of the module": """
        import torch_xla.core.xla_model as m
        m.mark_step()
    """,
    "from the package": """
        from torch_xla.core import xla_model
        xla_model.mark_step()
    """,
    "import inside a function": """
        def f():
            import torch_xla.core.xla_model as xm
            xm.mark_step()
    """,
    "module import used in a nested function": """
        import torch_xla.core.xla_model as xm
        def outer():
            def inner():
                return xm.mark_step()
    """,
    "star import": """
        from torch_xla.core.xla_model import *
        mark_step()
    """,
    "global import inside a function": """
        xm = None
        def init():
            global xm
            import torch_xla.core.xla_model as xm
        def step():
            xm.mark_step()
    """,
    "placeholder in the except branch of an optional import": """
        try:
            import torch_xla.core.xla_model as xm
        except ImportError:
            xm = None
        def step():
            xm.mark_step()
    """,
    "comprehension": """
        import torch_xla.core.xla_model as xm
        calls = [xm.mark_step() for _ in range(3)]
    """,
    "lambda default": """
        import torch_xla.core.xla_model as xm
        f = lambda sync=xm.mark_step: sync()
    """,
    "decorator argument": """
        import torch_xla.core.xla_model as xm
        @register(hook=xm.mark_step)
        def f():
            pass
    """,
    "availability check is not a version check": """
        import torch_xla.core.xla_model as xm
        if is_torch_xla_available():
            xm.mark_step()
    """,
    "try/except unrelated errors": """
        import torch_xla.core.xla_model as xm
        try:
            xm.mark_step()
        except RuntimeError:
            pass
    """,
    "match statement body": """
        import torch_xla.core.xla_model as xm
        match mode:
            case "train":
                xm.mark_step()
    """,
    "walrus binds a different name": """
        import torch_xla.core.xla_model as xm
        if (n := 3):
            xm.mark_step()
    """,
}


@pytest.mark.parametrize("source", REPORTED.values(), ids=REPORTED.keys())
def test_reported(source: str) -> None:
    assert [c for _, c in codes(source)] == ["XLA102"]


SILENT = {
    "parameter shadows": """
        import torch_xla.core.xla_model as xm
        def f(xm):
            xm.mark_step()
    """,
    "rebinding in the module": """
        import torch_xla.core.xla_model as xm
        xm = Wrapper(xm)
        xm.mark_step()
    """,
    "class body names are invisible to methods": """
        class T:
            import torch_xla.core.xla_model as xm
            def step(self):
                xm.mark_step()
    """,
    "comprehension variable shadows": """
        import torch_xla.core.xla_model as xm
        out = [xm.mark_step() for xm in objects]
    """,
    "loop variable shadows": """
        import torch_xla.core.xla_model as xm
        for xm in objects:
            xm.mark_step()
    """,
    "with-as shadows": """
        import torch_xla.core.xla_model as xm
        with ctx() as xm:
            xm.mark_step()
    """,
    "except-as shadows": """
        import torch_xla.core.xla_model as xm
        try:
            pass
        except Exception as xm:
            xm.mark_step()
    """,
    "match capture shadows": """
        import torch_xla.core.xla_model as xm
        match value:
            case xm:
                xm.mark_step()
    """,
    "relative import": """
        from .xla_model import mark_step
        mark_step()
    """,
    "unknown star import": """
        from mylib import *
        mark_step()
    """,
    "early return after a hasattr check": """
        import torch_xla
        import torch_xla.core.xla_model as xm
        def sync():
            if hasattr(torch_xla, "sync"):
                return torch_xla.sync()
            xm.mark_step()
    """,
    "version attribute": """
        import torch
        import torch_xla.core.xla_model as xm
        if torch.__version__ < "2.4":
            xm.mark_step()
    """,
    "requirement string": """
        import torch_xla.core.xla_model as xm
        if RequirementCache("torch_xla<2.4"):
            xm.mark_step()
    """,
    "boolean compat expression": """
        import torch_xla
        import torch_xla.core.xla_model as xm
        sync = hasattr(torch_xla, "sync") and torch_xla.sync or xm.mark_step
    """,
    "module attribute store": """
        import torch_xla.core.xla_model as xm
        xm.mark_step = lambda: None
    """,
    "del of the name": """
        import torch_xla.core.xla_model as xm
        del xm
        xm.mark_step()
    """,
}


@pytest.mark.parametrize("source", SILENT.values(), ids=SILENT.keys())
def test_silent(source: str) -> None:
    assert codes(source) == []


def test_references_carry_qualified_names_and_guards() -> None:
    got = resolved("""
        import torch_xla.runtime as xr
        import torch_xla.core.xla_model as xm
        if hasattr(xr, "world_size"):
            n = xr.world_size()
        else:
            n = xm.xrt_world_size()
        xm.mark_step()
    """)
    assert (5, "torch_xla.runtime.world_size", True) in got
    assert (7, "torch_xla.core.xla_model.xrt_world_size", True) in got
    assert (8, "torch_xla.core.xla_model.mark_step", False) in got


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    depth = 2000
    source = "import torch_xla.core.xla_model as xm\nx = " + " + ".join(["xm.mark_step()"] * depth) + "\n"
    assert len(codes(source)) == depth


def test_a_dotted_name_is_within_itself_and_its_prefixes_only() -> None:
    names = ("model", "model.layer", "model.layer.weight", "model2", "mod", "x.model")
    assert [n for n in names if within_dotted(n, "model")] == ["model", "model.layer", "model.layer.weight"]
    assert [n for n in names if within_dotted("model.layer", n)] == ["model", "model.layer"]
