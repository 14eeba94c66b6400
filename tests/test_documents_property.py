"""Documents made of random fragments (fences, sessions, directives, prompts, indentation, CRLF):
reading never fails except with DocumentError, a write-back of nothing changes nothing, and a
write-back of an edited block either comes back exactly or is refused (never a corrupt file)."""
import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flake8_xla.documents import DocumentError, read_document, rewrite

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
        assert outside == text.splitlines()  # nothing but the added line changed
