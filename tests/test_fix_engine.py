"""The fix layer: a fix changes nothing but the migration it names (issue 12, defects 1-9).

Each case is the whole file before and after, so a test fails on any other change."""
import ast
import json
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flake8_xla.documents.programs import fix_document
from flake8_xla.documents.reading import read_document
from flake8_xla.engine import fix_source
from flake8_xla.fixing import Edit, Fix, FixSite, apply_edits, choose, fix_to_fixpoint, removal_edits
from flake8_xla.fixing.lines import LineModel, split_lines
from flake8_xla.versions import Target, Version


def target(version: str = "2.9") -> Target:
    return Target(Version(*map(int, version.split("."))), "test")


def fixed(source: str, version: str = "2.9", unsafe: bool = False) -> str:
    return fix_source(source, "m.py", target(version), unsafe=unsafe).source


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# --- 1. one line model: the tokenizer's --------------------------------------------------------------

def test_lines_break_only_where_python_breaks_them() -> None:
    source = "a = 1\x0c\nb = '\u2028'\r\nc = 2 # \x85 \x1c\rd"
    assert split_lines(source) == ["a = 1\x0c\n", "b = '\u2028'\r\n", "c = 2 # \x85 \x1c\r", "d"]
    model = LineModel(source)
    assert model.offset(4, 0) == source.index("d")
    assert model.lineno(source.index("d")) == 4


@pytest.mark.parametrize("odd", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_an_odd_line_break_character_before_a_fix_shifts_nothing(odd: str) -> None:
    source = f"import torch_xla.core.xla_model as xm\n# a comment with {odd} inside\nn = xm.xrt_world_size()\n"
    assert fixed(source) == f"import torch_xla.runtime as xr\n# a comment with {odd} inside\nn = xr.world_size()\n"


def test_a_form_feed_line_before_a_fix() -> None:
    source = "import torch_xla.core.xla_model as xm\n\x0c\nn = xm.xrt_world_size()\n"
    assert fixed(source) == "import torch_xla.runtime as xr\n\x0c\nn = xr.world_size()\n"


def test_noqa_after_a_line_separator_in_a_string_stays_on_its_line() -> None:
    source = "import torch_xla.core.xla_model as xm\ns = '\u2028'\nxm.mark_step()  # noqa: XLA102\nxm.mark_step()\n"
    assert fixed(source) == ("import torch_xla\nimport torch_xla.core.xla_model as xm\ns = '\u2028'\n"
                             "xm.mark_step()  # noqa: XLA102\ntorch_xla.sync()\n")


# --- 2. guarded and lazy imports keep their guard ---------------------------------------------------------

def test_an_import_under_try_except_importerror_stays_guarded() -> None:
    source = dedent("""
        try:
            import torch_xla.core.xla_model as xm
        except ImportError:
            xm = None


        def world():
            if xm is None:
                return 1
            return xm.xrt_world_size()
        """)
    assert fixed(source) == dedent("""
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
        except ImportError:
            xm = None


        def world():
            if xm is None:
                return 1
            return xr.world_size()
        """)


def test_an_import_under_an_availability_check_stays_there() -> None:
    source = dedent("""
        from .utils import is_torch_xla_available

        if is_torch_xla_available():
            import torch_xla.core.xla_model as xm


        def rank():
            return xm.get_ordinal()
        """)
    assert fixed(source) == dedent("""
        from .utils import is_torch_xla_available

        if is_torch_xla_available():
            import torch_xla.runtime as xr


        def rank():
            return xr.global_ordinal()
        """)


def test_a_lazy_import_in_a_function_stays_in_the_function() -> None:
    source = dedent("""
        import os


        def setup():
            if not os.environ.get("USE_CUDA"):
                import torch_xla.core.xla_model as xm
                return xm.xla_device(), xm.xrt_world_size()
            return None
        """)
    assert fixed(source) == dedent("""
        import os


        def setup():
            if not os.environ.get("USE_CUDA"):
                import torch_xla
                import torch_xla.runtime as xr
                return torch_xla.device(), xr.world_size()
            return None
        """)


def test_an_alias_bound_in_the_same_guard_is_reused() -> None:
    source = dedent("""
        if is_torch_xla_available():
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as rt
            n = xm.xrt_world_size()
        """)
    assert fixed(source) == dedent("""
        if is_torch_xla_available():
            import torch_xla.runtime as rt
            n = rt.world_size()
        """)


def test_an_alias_bound_in_another_guard_is_not_reused() -> None:
    source = dedent("""
        if HAS_RUNTIME:
            import torch_xla.runtime as rt
        import torch_xla.core.xla_model as xm
        n = xm.xrt_world_size()
        """)
    # `rt` may be unbound when `n` is computed, and `xr` is free: a new import beside the old one
    assert fixed(source) == dedent("""
        if HAS_RUNTIME:
            import torch_xla.runtime as rt
        import torch_xla.runtime as xr
        n = xr.world_size()
        """)


def test_a_block_emptied_by_fixes_keeps_a_pass() -> None:
    source = dedent("""
        if USE_XLA:
            from torch_xla.experimental import dynamo_mark_sharding
            from torch_xla.experimental import dynamo_set_buffer_donor
        x = 1
        """)
    assert fixed(source) == dedent("""
        if USE_XLA:
            pass
        x = 1
        """)


def test_one_fix_producing_invalid_code_does_not_discard_the_others() -> None:
    source = "a = 1\nb = 2\nc = 3\n"

    def candidates(current: str, tree: ast.Module):
        site = FixSite(current, tree, Version(2, 9), None)
        out = []
        for name, text in (("a", "A"), ("b", "def ("), ("c", "C")):
            start = current.find(name + " =")
            if start >= 0:
                out.append(("XLA999", Fix(f"rename {name}", (Edit(start, start + 1, text),), True)))
        return site, out

    outcome = fix_to_fixpoint(source, candidates)
    assert outcome.source == "A = 1\nb = 2\nC = 3\n"
    assert outcome.fixed == {"XLA999": 2}
    assert outcome.error == "not applied, it would produce invalid code: XLA999 (rename b) at line 2"


# --- 3. the import comes before every use, in execution order ------------------------------------------

def test_an_import_sharing_its_line_with_the_use() -> None:
    source = "import torch_xla.core.xla_model as xm; WORLD = xm.xrt_world_size()\n"
    assert fixed(source) == ("import torch_xla.core.xla_model as xm; import torch_xla.runtime as xr; "
                             "WORLD = xr.world_size()\n")


def test_an_import_in_a_one_line_compound_statement() -> None:
    source = "if USE_XLA: import torch_xla.core.xla_model as xm\nn = xm.xrt_world_size()\n"
    assert fixed(source) == "if USE_XLA: import torch_xla.core.xla_model as xm; import torch_xla.runtime as xr\n" \
                            "n = xr.world_size()\n"


MARKDOWN = dedent("""
    # Guide

    ```python
    import torch_xla.core.xla_model as xm
    world = xm.xrt_world_size()
    ```

    Later:

    ```python
    import torch_xla.distributed.xla_multiprocessing as xmp
    ```
    """)


def test_in_a_document_the_import_goes_to_the_block_of_the_old_one() -> None:
    # one program across blocks: the last torch_xla import of the program is in a later block
    document = read_document("guide.md", MARKDOWN)
    result = fix_document(document, MARKDOWN, target(), lambda code: True, unsafe=False)
    assert result.text == MARKDOWN.replace("import torch_xla.core.xla_model as xm", "import torch_xla.runtime as xr") \
        .replace("xm.xrt_world_size()", "xr.world_size()")


# --- 4. shebang, coding cookie, docstring and __future__ stay first ---------------------------------------

def test_shebang_and_cookie_stay_on_top() -> None:
    source = dedent('''
        #!/usr/bin/env python
        # -*- coding: latin-1 -*-
        """Tool."""
        from __future__ import annotations


        def world():
            import torch_xla.core.xla_model as xm
            return xm.xrt_world_size()
        ''')
    assert fixed(source) == source.replace("import torch_xla.core.xla_model as xm", "import torch_xla.runtime as xr") \
        .replace("xm.xrt_world_size()", "xr.world_size()")


# --- 5. shadowing ----------------------------------------------------------------------------------------

def test_a_parameter_named_like_the_alias_is_not_taken_for_the_module() -> None:
    source = dedent("""
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr


        def f(xr):
            return xm.xrt_world_size() + xr
        """)
    assert fixed(source) == dedent("""
        import torch_xla.runtime
        import torch_xla.runtime as xr


        def f(xr):
            return torch_xla.runtime.world_size() + xr
        """)


def test_a_function_local_import_never_hides_a_global_used_in_that_function() -> None:
    source = dedent("""
        import torch_xla


        def f(xr):
            torch_xla.sync()
            import torch_xla.core.xla_model as xm
            return xm.xrt_world_size() + xr
        """)
    # `import torch_xla.runtime` in f would make torch_xla local to f: its first line would fail
    assert fixed(source) == source


# --- 6. doctest sessions ----------------------------------------------------------------------------------

def test_a_session_keeps_each_output_under_its_statement() -> None:
    text = dedent("""
        Example:

        ```pycon
        >>> import torch_xla.core.xla_model as xm
        >>> xm.get_ordinal()
        0
        >>> import torch_xla.distributed.xla_multiprocessing as xmp
        ```
        """)
    document = read_document("guide.md", text)
    result = fix_document(document, text, target(), lambda code: True, unsafe=False)
    assert (result.text, result.error) == (text.replace("torch_xla.core.xla_model as xm", "torch_xla.runtime as xr")
                                           .replace("xm.get_ordinal()", "xr.global_ordinal()"), None)


# --- 7. imports that carry a comment stay -----------------------------------------------------------------

@pytest.mark.parametrize("comment", ["# noqa: F401", "# keep: side effects"])
def test_an_import_with_a_comment_is_kept(comment: str) -> None:
    source = f"import torch_xla.core.xla_model as xm  {comment}\nxm.mark_step()\n"
    assert fixed(source) == f"import torch_xla\nimport torch_xla.core.xla_model as xm  {comment}\ntorch_xla.sync()\n"


# --- 8. each line keeps its ending ------------------------------------------------------------------------

@pytest.mark.parametrize("endings", [("\r\n", "\n", "\r\n"), ("\r", "\r", "\r"), ("\n", "\r\n", "\r")])
def test_line_endings_are_kept_line_by_line(endings) -> None:
    a, b, c = endings
    source = f"import torch_xla.core.xla_model as xm{a}x = 1{b}xm.mark_step(){c}"
    assert fixed(source) == f"import torch_xla{a}x = 1{b}torch_xla.sync(){c}"


def test_a_last_line_without_ending_stays_without() -> None:
    assert fixed("import torch_xla.core.xla_model as xm; xm.mark_step()") == \
        "import torch_xla.core.xla_model as xm; import torch_xla; torch_xla.sync()"
    assert fixed("import torch_xla.core.xla_model as xm\r\nxm.mark_step()") == "import torch_xla\r\ntorch_xla.sync()"


# --- 9. no new dependency in safe mode ----------------------------------------------------------------------

def test_a_rewrite_to_the_companion_is_never_safe() -> None:
    source = "import torch_xla.core.xla_model as xm\nxm.set_rng_state(7)\n"
    # a safe rename, but torch_xla.manual_seed() arrived in 2.5: on 2.4 only the companion replaces it
    assert fixed(source, "2.5") == "import torch_xla\ntorch_xla.manual_seed(7)\n"
    assert fixed(source, "2.4") == source
    assert fixed(source, "2.4", unsafe=True) == "import xla_compat\nxla_compat.manual_seed(7)\n"


def test_a_companion_fix_says_what_it_changes() -> None:
    source = "import torch_xla.core.xla_model as xm\nxm.rendezvous('init')\n"
    outcome = fix_source(source, "m.py", target(), unsafe=True)
    assert outcome.source == "import xla_compat\nxla_compat.rendezvous('init')\n"
    assert outcome.notes == ["xla_compat.rendezvous() needs no process group: without one the workers meet in "
                             "torch_xla's rendezvous, as before; with one it is a gloo barrier, without torch_xla's "
                             "graph syncs"]


def test_a_test_comparing_the_old_api_with_its_replacement_is_left_alone() -> None:
    source = dedent("""
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr


        def test_rank(self):
            self.assertEqual(xm.get_local_ordinal(), xr.local_ordinal())
            n = xm.get_local_ordinal()
        """)
    assert fixed(source, unsafe=True) == source.replace("n = xm.get_local_ordinal()", "n = xr.local_ordinal()")


def test_the_companion_is_named_only_where_the_target_lacks_upstream_replacement() -> None:
    from flake8_xla.engine import lint_source

    source = "import torch_xla.core.xla_model as xm\nxm.set_rng_state(7)\n"
    [old] = lint_source(source, target="2.4")
    [new] = lint_source(source, target="2.9")
    assert old.message.endswith("; use xla_compat.manual_seed()")
    assert old.help.endswith("Upstream replacement: torch_xla.manual_seed() (2.5+).")
    assert new.message.endswith("use torch_xla.manual_seed() (2.5+)")
    assert "xla_compat" not in new.help


def test_a_document_fix_reports_the_companion_s_note() -> None:
    text = "```python\nimport torch_xla.core.xla_model as xm\nxm.rendezvous('init')\n```\n"
    result = fix_document(read_document("guide.md", text), text, target(), lambda code: True, unsafe=True)
    assert result.text == "```python\nimport xla_compat\nxla_compat.rendezvous('init')\n```\n"
    assert result.notes == ["xla_compat.rendezvous() needs no process group: without one the workers meet in "
                            "torch_xla's rendezvous, as before; with one it is a gloo barrier, without torch_xla's "
                            "graph syncs"]


# --- the layer's parts ------------------------------------------------------------------------------------

def _choose_by_pairs(fixes):
    """choose() as specified, by comparing every pair (quadratic; the reference)."""
    chosen, taken = [], []
    for fix in sorted(fixes, key=lambda f: f.span()):
        clash = any(not (e.end <= s or e.start >= t) or e.start == e.end == s for e in fix.edits for s, t in taken)
        if not clash:
            chosen.append(fix)
            taken.extend((e.start, e.end) for e in fix.edits)
    return chosen


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6)), min_size=1, max_size=3), max_size=12))
def test_choose_takes_what_the_pairwise_rule_takes(spans) -> None:
    fixes = [Fix(f"f{i}", tuple(Edit(start, start + width, "x") for start, width in edits), True)
             for i, edits in enumerate(spans)]
    assert [f.title for f in choose(fixes)] == [f.title for f in _choose_by_pairs(fixes)]


def test_a_removal_that_empties_a_block_leaves_pass_with_the_line_s_ending() -> None:
    source = "if x:\r\n    import a\r\n    import b\r\ny = 1\r\n"
    tree = ast.parse(source)
    block = tree.body[0].body
    edits = removal_edits(LineModel(source), [(block[0], block[0].names), (block[1], block[1].names)],
                          {id(s): tree.body[0] for s in block})
    assert apply_edits(source, edits) == "if x:\r\n    pass\r\ny = 1\r\n"


def test_a_guide_s_separate_examples_are_not_related_by_line_but_a_notebook_s_cells_are() -> None:
    from flake8_xla.documents.programs import lint_document

    def codes(path: str, text: str):
        document = read_document(path, text)
        return [(d.code, d.line) for program, raw in lint_document(document, text, target()) for d in raw]

    use = "import torch_xla.core.xla_model as xm\nimport torch\nt = torch.ones(2, device=xm.xla_device())\n"
    launch = "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(main, args=())\n"
    guide = f"# Guide\n\n```python\n{use}```\n\nLater, another example:\n\n```python\n{launch}```\n"
    one_block = f"# Guide\n\n```python\n{use}{launch}```\n"
    # the device use in one example and the launch in another: not one program's order
    assert "XLA306" not in [code for code, _ in codes("guide.md", guide)]
    assert "XLA306" in [code for code, _ in codes("guide.md", one_block)]
    # a notebook's cells run in one kernel, in order: the relation holds
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    notebook = nbformat.writes(new_notebook(cells=[new_code_cell(use), new_code_cell(launch)]))
    assert "XLA306" in [code for code, _ in codes("tut.ipynb", notebook)]


def test_a_writefile_cell_is_a_program_of_its_own() -> None:
    # the notebook imports xm in cell 1; the %%writefile body is train.py, which never does:
    # its fix must import there, not lean on (or move code into) the notebook's cells
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from flake8_xla.documents.programs import programs

    script = "import torch_xla.core.xla_model as xm\nn = xm.xrt_world_size()\n"
    text = nbformat.writes(new_notebook(cells=[
        new_code_cell("import torch_xla.core.xla_model as xm\nprint(1)"),
        new_code_cell("%%writefile train.py\n" + script)]))
    document = read_document("nb.ipynb", text)
    assert [[document.blocks[i].kind for i in p.order] for p in programs(document, text)] == [["cell"], ["writefile"]]
    result = fix_document(document, text, target(), lambda code: True, unsafe=False)
    cells = ["".join(c["source"]) for c in json.loads(result.text)["cells"]]
    assert cells == ["import torch_xla.core.xla_model as xm\nprint(1)",
                     "%%writefile train.py\nimport torch_xla.runtime as xr\nn = xr.world_size()\n"]


def test_fixes_that_never_settle_stop_at_the_pass_cap() -> None:
    def candidates(current: str, tree: ast.Module):
        return FixSite(current, tree, Version(2, 9), None), [("XLA999", Fix("grow", (Edit(0, 0, "#\n"),), True))]

    outcome = fix_to_fixpoint("a = 1\n", candidates)
    assert (outcome.passes, outcome.error) == (10, "still changing after 10 passes; stopped")
    assert outcome.source == "#\n" * 10 + "a = 1\n"
