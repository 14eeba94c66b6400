"""Documents made of random fragments (fences, sessions, directives, prompts, indentation, CRLF):
reading never fails except with DocumentError, a write-back of nothing changes nothing, and a
write-back of an edited block either comes back exactly or is refused (never a corrupt file)."""
import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flake8_xla.documents.reading import DocumentError, read_document, rewrite

FRAGMENTS = [
    "```python", "```py", "```pycon", "~~~python", "```", "~~~", "````", "```text",
    ">>> import torch_xla.core.xla_model as xm", ">>> xm.mark_step()", "... ", "...     x = 1", "8",
    "import torch_xla", "xm.mark_step()", "def f():", "    return 1", "x = [", "]", "$ pip install torch_xla",
    ".. code-block:: python", ".. code:: py", "   :linenos:", "::", "   import torch_xla", "   xm.mark_step()",
    "   >>> xm.get_ordinal()", "   0", "- item", "  ```python", "  x = 1", "  ```", "\tx = 2", "", "# Title",
    "Some text::", "    >>> y = 3", "%matplotlib inline", "!ls",
]
SETTINGS = dict(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def documents():
    lines = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=30)
    return st.tuples(lines, st.sampled_from(["\n", "\r\n"]), st.booleans(), st.sampled_from([".md", ".rst"]))


@given(documents())
@settings(**SETTINGS)
def test_random_documents_read_and_write_back_safely(case) -> None:
    lines, newline, final, suffix = case
    text = newline.join(lines) + (newline if final else "")
    try:
        document = read_document("doc" + suffix, text)
    except DocumentError:
        return
    assert rewrite(document, text, {}) == text
    for block in document.blocks:
        ast.parse(block.source)  # a block is only kept when it parses on its own
        edited = block.source + "edited = 1\n"
        try:
            new_text = rewrite(document, text, {block.index: edited})
        except DocumentError:
            continue  # refused: the caller leaves the file alone
        again = {b.index: b.source for b in read_document("doc" + suffix, new_text).blocks}
        assert again.get(block.index, "").rstrip("\n") == edited.rstrip("\n")
        outside = [line for line in new_text.splitlines() if "edited = 1" not in line]
        # nothing but the added line changed; in a session whose output sits between a statement's
        # `>>>` and `...` lines (not a valid doctest) the output may move below the statement
        assert sorted(outside) == sorted(text.splitlines())


CELL_LINES = ["import torch_xla.core.xla_model as xm", "xm.mark_step()", "%time f()", "!pip install torch_xla",
              "files = !ls", "x?", "def f():", "    return 1", "print('é ✓')", "s = '\\\\n'", "", "x = [", "]"]


@given(st.lists(st.tuples(st.sampled_from(["code", "markdown"]), st.lists(st.sampled_from(CELL_LINES), max_size=6),
                          st.booleans()), min_size=1, max_size=6))
@settings(**SETTINGS)
def test_random_notebooks_write_back_only_the_edited_cell(cells) -> None:
    import json

    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook()
    nb.cells = [(new_code_cell if kind == "code" else new_markdown_cell)("\n".join(lines) + ("\n" if end else ""))
                for kind, lines, end in cells]
    text = nbformat.writes(nb)
    document = read_document("nb.ipynb", text)
    assert rewrite(document, text, {}) == text
    for block in document.blocks:
        edited = block.source + "edited = 1\n"
        new_text = rewrite(document, text, {block.index: edited})
        before, after = json.loads(text), json.loads(new_text)
        changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"])) if a != b]
        assert changed == [block.cell - 1]
        cell = after["cells"][block.cell - 1]
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        assert source.endswith("edited = 1") or source.endswith("edited = 1\n")
        assert {k: v for k, v in cell.items() if k != "source"} == \
            {k: v for k, v in before["cells"][block.cell - 1].items() if k != "source"}
