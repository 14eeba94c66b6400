"""Python blocks in notebooks, Markdown and reStructuredText: exact sources and positions, and
rewrites that change only the fixed lines (byte-identical when nothing changed)."""
import json
import textwrap

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from flake8_xla.documents import is_document
from flake8_xla.documents.reading import Block, DocumentError, read_document, rewrite

V3 = "nbformat 3 notebooks are not supported; upgrade with `jupyter nbconvert --to notebook --nbformat 4`"


def notebook(*cells, language="python", split_lines=True):
    nb = new_notebook(cells=list(cells))
    nb.metadata["kernelspec"] = {"display_name": "K", "language": language, "name": "k"}
    return nbformat.writes(nb, split_lines=split_lines)


def json_lines(text, *sources):
    """For each cell source, the file line of each of its strings, found by searching the text."""
    lines = text.splitlines()
    k = 0
    out = []
    for source in sources:
        k = lines.index('   "source": [', k)
        found = []
        for part in source.splitlines(True):
            dumped = json.dumps(part, ensure_ascii=False)
            k = next(n for n in range(k, len(lines)) if lines[n].strip() in (dumped, dumped + ","))
            found.append(k + 1)
        out.append(tuple(found))
    return out


CELL_MAGICS = ("%matplotlib inline\nimport torch_xla.core.xla_model as xm\nfiles = !ls\nfor f in files:\n"
               "    !echo $f\nxm.xla_device()")
CELL_TIME = "%%time\nxm.mark_step()\n"
CELL_HELP = "xm?\n??xm.mark_step\nname = 'é'"


def small_notebook():
    return notebook(
        new_markdown_cell("# Train\n```python\nxm.mark_step()\n```"),
        new_code_cell(CELL_MAGICS),
        new_code_cell("%%bash\necho hi"),
        new_code_cell(CELL_TIME, execution_count=3, outputs=[new_output("stream", text="CPU times: 1 s\n")]),
        new_code_cell("def f(:\n    pass"),
        new_code_cell(CELL_HELP),
        new_code_cell("  \n"),
    )


def test_notebook_blocks():
    text = small_notebook()
    document = read_document("train.ipynb", text)
    assert document.kind == "notebook"
    expected_lines = json_lines(text, CELL_MAGICS, CELL_TIME, "def f(:\n    pass", CELL_HELP)
    assert document.blocks == [
        Block(0, "pass  # flake8-xla: ipython 1\n"
                 "import torch_xla.core.xla_model as xm\n"
                 "files = ...  # flake8-xla: ipython 3\n"
                 "for f in files:\n"
                 "    pass  # flake8-xla: ipython 5\n"
                 "xm.xla_device()\n",
              ((1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0)), 2, expected_lines[0], "cell"),
        Block(1, "pass  # flake8-xla: ipython 1\nxm.mark_step()\n", ((1, 0), (2, 0)), 4, expected_lines[1], "cell"),
        Block(2, "pass  # flake8-xla: ipython 1\npass  # flake8-xla: ipython 2\nname = 'é'\n",
              ((1, 0), (2, 0), (3, 0)), 6, expected_lines[3], "cell"),
    ]
    assert document.skipped == [(3, "cell magic %%bash"), (5, "does not parse: invalid syntax (line 1)")]


def test_notebook_python_cell_is_not_transformed():
    # it parses as it is, so the `!` line in the string stays what it is
    text = notebook(new_code_cell('doc = """\n!not a shell line\n"""\nx = 1 % 2'))
    (block,) = read_document("n.ipynb", text).blocks
    assert block.source == 'doc = """\n!not a shell line\n"""\nx = 1 % 2\n'


def test_notebook_continued_magic_and_timeit_cell():
    text = notebook(new_code_cell("!pip install \\\n    torch_xla\nimport torch_xla"),
                    new_code_cell("\n%%timeit -n 3\nf(1)"),
                    new_code_cell("%%capture out\nprint(1)"))
    assert [b.source for b in read_document("n.ipynb", text).blocks] == [
        "pass  # flake8-xla: ipython 1\npass  # flake8-xla: ipython 2\nimport torch_xla\n",
        "\npass  # flake8-xla: ipython 2\nf(1)\n",
        "pass  # flake8-xla: ipython 1\nprint(1)\n",
    ]


def test_notebook_source_stored_as_string():
    text = notebook(new_code_cell("import torch_xla.core.xla_model as xm\nxm.mark_step()"), split_lines=False)
    assert '"source": "import torch_xla.core.xla_model as xm\\nxm.mark_step()"' in text
    document = read_document("n.ipynb", text)
    assert document.blocks == [Block(0, "import torch_xla.core.xla_model as xm\nxm.mark_step()\n",
                                     ((1, 0), (2, 0)), 1, (), "cell")]
    new = rewrite(document, text, {0: "import torch_xla\nimport torch_xla.core.xla_model as xm\ntorch_xla.sync()\n"})
    assert new == text.replace('"import torch_xla.core.xla_model as xm\\nxm.mark_step()"',
                               '"import torch_xla\\nimport torch_xla.core.xla_model as xm\\ntorch_xla.sync()"')


def test_notebook_non_python_kernel_is_skipped():
    text = notebook(new_code_cell("library(ggplot2)"), language="R")
    document = read_document("r.ipynb", text)
    assert (document.blocks, document.skipped) == ([], [(0, "not a Python notebook (kernel language R)")])


@pytest.mark.parametrize("make", [
    small_notebook,
    lambda: notebook(new_code_cell("x = 'ü' + \"\\t\"\n"), new_code_cell(CELL_MAGICS), split_lines=False),
    lambda: notebook(),
])
def test_notebook_unchanged_rewrite_is_byte_identical(make, tmp_path):
    path = tmp_path / "n.ipynb"
    nbformat.write(nbformat.reads(make(), 4), str(path))  # write() adds the final newline
    for text in (make(), path.read_text(encoding="utf-8")):
        document = read_document("n.ipynb", text)
        assert rewrite(document, text, {}) == text
        assert rewrite(document, text, {b.index: b.source for b in document.blocks}) == text


def test_notebook_rewrite_changes_only_that_cell():
    text = small_notebook() + "\n"
    document = read_document("n.ipynb", text)
    block = document.blocks[0]
    new_source = block.source.replace("import torch_xla.core", "import torch_xla\nimport torch_xla.core").replace(
        "xm.xla_device()", "torch_xla.device()")
    new = rewrite(document, text, {0: new_source})
    before, after = json.loads(text), json.loads(new)
    assert after["cells"][1]["source"] == ["%matplotlib inline\n", "import torch_xla\n",
                                           "import torch_xla.core.xla_model as xm\n", "files = !ls\n",
                                           "for f in files:\n", "    !echo $f\n", "torch_xla.device()"]
    after["cells"][1]["source"] = before["cells"][1]["source"]
    assert after == before
    # outside the cell's source lines the text is the same, byte for byte
    old_lines, new_lines = text.splitlines(True), new.splitlines(True)
    first, last = block.json_lines[0], block.json_lines[-1]
    assert new_lines[:first - 1] == old_lines[:first - 1]
    assert new_lines[last + 1:] == old_lines[last:]
    assert new_lines[first:last + 1] == [
        '    "import torch_xla\\n",\n', '    "import torch_xla.core.xla_model as xm\\n",\n', '    "files = !ls\\n",\n',
        '    "for f in files:\\n",\n', '    "    !echo $f\\n",\n', '    "torch_xla.device()"\n']
    nbformat.validate(nbformat.reads(new, 4))
    assert [b.source for b in read_document("n.ipynb", new).blocks][0] == new_source.replace(
        "ipython 3", "ipython 4").replace("ipython 5", "ipython 6")


def test_notebook_written_by_another_tool():
    # indent 2, keys unsorted, ASCII escapes, CRLF, a line split over two strings
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": ["x = 'é'\n", "import torch_xla.core", ".xla_model as xm\n", "xm.mark_step()"]}
    text = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}, indent=2)
    text = text.replace("\n", "\r\n") + "\r\n"
    document = read_document("n.ipynb", text)
    (block,) = document.blocks
    assert block.source == "x = 'é'\nimport torch_xla.core.xla_model as xm\nxm.mark_step()\n"
    assert [text.split("\r\n")[n - 1].strip() for n in block.json_lines] == [
        '"x = \'\\u00e9\'\\n",', r'"import torch_xla.core",', r'"xm.mark_step()"']
    new = rewrite(document, text, {0: block.source.replace("xm.mark_step()", "torch_xla.sync()")})
    # the unchanged first line keeps its escape; the changed lines are split as nbformat splits them
    assert new == text.replace('"import torch_xla.core",\r\n        ".xla_model as xm\\n",\r\n        "xm.mark_step()"',
                               '"import torch_xla.core.xla_model as xm\\n",\r\n        "torch_xla.sync()"')
    assert new != text


def test_notebook_placeholder_restored_where_the_fix_moved_it():
    text = notebook(new_code_cell("x = 1\n%time f()\ny = 2"))
    document = read_document("n.ipynb", text)
    new = rewrite(document, text, {0: "y = 2\npass  # flake8-xla: ipython 2\nx = 1\n"})
    assert json.loads(new)["cells"][0]["source"] == ["y = 2\n", "%time f()\n", "x = 1"]


def test_notebook_indented_cell_is_dedented_like_ipython():
    # IPython removes the first line's indentation from every line before running a cell
    source = "    import torch_xla.core.xla_model as xm\n\n    for step in range(3):\n        xm.mark_step()"
    text = notebook(new_code_cell(source))
    document = read_document("n.ipynb", text)
    (block,) = document.blocks
    assert block.source == "import torch_xla.core.xla_model as xm\n\nfor step in range(3):\n    xm.mark_step()\n"
    assert block.origin == ((1, 4), (2, 0), (3, 4), (4, 4))
    assert block.json_lines == tuple(json_lines(text, source)[0])
    assert rewrite(document, text, {0: block.source}) == text
    new = rewrite(document, text, {0: block.source.replace("xm.mark_step()", "torch_xla.sync()")})
    assert json.loads(new)["cells"][0]["source"] == [
        "    import torch_xla.core.xla_model as xm\n", "\n", "    for step in range(3):\n", "        torch_xla.sync()"]


def test_notebook_indented_cell_diagnostics_keep_their_columns():
    from flake8_xla.documents.programs import Program
    from flake8_xla.engine import lint
    from flake8_xla.fixing.lines import split_lines
    from flake8_xla.rules.api.xla102_deprecated_api import DeprecatedApi

    text = notebook(new_code_cell("  import torch_xla.core.xla_model as xm\n  xm.mark_step()"),
                    new_code_cell("%%writefile -a train.py\nimport torch_xla.core.xla_model as xm\n"
                                  "def main():\n    xm.mark_step()\n"))
    document = read_document("n.ipynb", text)
    program = Program.of(document)
    diagnostics = lint(split_lines(program.source), None, "n.ipynb", "2.9", rules=[DeprecatedApi()])
    found = [program.locate(document, d) for d in diagnostics]
    assert [(f.cell, f.diagnostic.line, f.diagnostic.col + 1, f.diagnostic.code) for f in found] == [
        (1, 2, 3, "XLA102"), (2, 4, 5, "XLA102")]


def test_notebook_writefile_of_a_python_file_is_linted_as_python():
    body = "import torch_xla.core.xla_model as xm\nif x % 2:\n    print('!ls')\n"
    text = notebook(new_code_cell("%%writefile train.py\n" + body), new_code_cell("%%writefile notes.txt\n!!!"),
                    new_code_cell("%%writefile 'run.py'\nx = 1\n"))
    document = read_document("n.ipynb", text)
    assert [b.source for b in document.blocks] == ["pass  # flake8-xla: ipython 1\n" + body,
                                                   "pass  # flake8-xla: ipython 1\nx = 1\n"]
    assert [b.cell for b in document.blocks] == [1, 3]
    assert document.skipped == [(2, "cell magic %%writefile")]
    edited = document.blocks[0].source.replace("import torch_xla.core.xla_model as xm\n", "import torch_xla\n")
    new = rewrite(document, text, {0: edited})
    assert json.loads(new)["cells"][0]["source"][:2] == ["%%writefile train.py\n", "import torch_xla\n"]


def test_notebook_errors():
    with pytest.raises(DocumentError, match="^not a notebook: invalid JSON at line 3 column 11: Expecting "
                                            "property name enclosed in double quotes$"):
        read_document("n.ipynb", '{\n "cells": [\n  {"a": 1,,}\n ]\n}')
    with pytest.raises(DocumentError, match=f"^{V3.replace('`', '.')}$"):
        read_document("n.ipynb", json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                             "worksheets": [{"cells": [{"cell_type": "code", "input": "x"}]}]}))
    with pytest.raises(DocumentError, match="^not a notebook: the file contains a NUL byte$"):
        read_document("n.ipynb", '{"cells": []}\x00')
    with pytest.raises(DocumentError, match='^not a notebook: no "cells" list$'):
        read_document("n.ipynb", "{}")
    text = notebook(new_code_cell("x = 1"))
    document = read_document("n.ipynb", text)
    with pytest.raises(DocumentError, match="changed since it was read"):
        rewrite(document, text.replace("x = 1", "x = 2"), {0: "x = 3\n"})


MARKDOWN = """\
# Title

```python
import torch_xla.core.xla_model as xm
xm.mark_step()
```

~~~Py title="x"
x = 1
~~~

1. In a list:

   ```{.python .numberLines}
   import torch_xla
   if True:
       torch_xla.sync()

   ```

```pycon
>>> import torch_xla
>>> print(1)
1
>>> for i in range(2):
...     print(i)
...
0
1
```

An indented session:

    >>> import torch_xla.core.xla_model as xm
    >>> xm.xla_device()
    device(type='xla', index=0)

```bash
$ pip install torch_xla
```

```python
$ pip install torch_xla
```

```python
model.fit(x, ..., epochs=3
```

```python
...
```

```python
x = 1
"""


def test_markdown_blocks():
    document = read_document("README.md", MARKDOWN)
    assert document.kind == "markdown"
    assert document.blocks == [
        Block(0, "import torch_xla.core.xla_model as xm\nxm.mark_step()\n", ((4, 0), (5, 0)), kind="fence"),
        Block(1, "x = 1\n", ((9, 0),), kind="fence"),
        Block(2, "import torch_xla\nif True:\n    torch_xla.sync()\n\n", ((15, 3), (16, 3), (17, 3), (18, 0)),
              kind="fence"),
        Block(3, "import torch_xla\nprint(1)\nfor i in range(2):\n    print(i)\n\n",
              ((22, 4), (23, 4), (25, 4), (26, 4), (27, 3)), kind="pycon"),
        Block(4, "import torch_xla.core.xla_model as xm\nxm.xla_device()\n", ((34, 8), (35, 8)), kind="pycon"),
        Block(5, "...\n", ((51, 0),), kind="fence"),
    ]
    assert document.skipped == [(42, "does not parse: invalid syntax (line 43)"),
                                (46, "does not parse: '(' was never closed (line 47)"),
                                (54, "unterminated fence")]


def test_markdown_crlf_and_tabs():
    text = "Intro\r\n\r\n-\tItem\r\n\r\n\t```python\r\n\tif True:\r\n\t\tx = 1\r\n\r\n\t```\r\n"
    document = read_document("a.md", text)
    assert document.blocks == [Block(0, "if True:\n\tx = 1\n\n", ((6, 1), (7, 1), (8, 0)), kind="fence")]
    new = rewrite(document, text, {0: "if True:\n\tx = 2\n\ny = 3\n"})
    assert new == "Intro\r\n\r\n-\tItem\r\n\r\n\t```python\r\n\tif True:\r\n\t\tx = 2\r\n\r\n\ty = 3\r\n\t```\r\n"


def test_markdown_inconsistent_indentation():
    # the fence is indented by 2 columns; a tab cannot lose 2 of its 4
    text = "- item\n\n  ```python\n  x = 1\n\ty = 2\n  ```\n"
    document = read_document("a.md", text)
    assert (document.blocks, document.skipped) == ([], [(3, "inconsistent indentation")])


def test_markdown_rewrite():
    document = read_document("README.md", MARKDOWN)
    assert rewrite(document, MARKDOWN, {}) == MARKDOWN
    assert rewrite(document, MARKDOWN, {b.index: b.source for b in document.blocks}) == MARKDOWN
    # one line changed in the indented fence: only that line differs
    new = rewrite(document, MARKDOWN, {2: "import torch_xla\nif True:\n    torch_xla.step()\n\n"})
    assert new == MARKDOWN.replace("       torch_xla.sync()", "       torch_xla.step()")
    # a line added to a session: a new prompt, and every output stays after its statement
    new = rewrite(document, MARKDOWN, {3: "import torch_xla\nimport torch_xla.runtime as xr\nprint(1)\n"
                                          "for i in range(2):\n    print(i)\n    print(\n        i)\n\n"})
    assert new == MARKDOWN.replace(
        ">>> import torch_xla\n", ">>> import torch_xla\n>>> import torch_xla.runtime as xr\n").replace(
        "...     print(i)\n", "...     print(i)\n...     print(\n...         i)\n")
    new = rewrite(document, MARKDOWN,
                  {4: "import torch_xla\nimport torch_xla.core.xla_model as xm\ntorch_xla.device()\n"})
    assert new == MARKDOWN.replace(
        "    >>> import torch_xla.core.xla_model as xm\n    >>> xm.xla_device()\n",
        "    >>> import torch_xla\n    >>> import torch_xla.core.xla_model as xm\n    >>> torch_xla.device()\n")


def test_markdown_rewrite_refuses_to_lose_output_or_break_the_fence():
    document = read_document("README.md", MARKDOWN)
    with pytest.raises(DocumentError, match="without losing its output"):
        rewrite(document, MARKDOWN, {3: "import torch_xla\nfor i in range(2):\n    print(i)\n\n"})
    with pytest.raises(DocumentError, match="^cannot write the fixed code back into the block at line 4 of README.md"):
        rewrite(document, MARKDOWN, {0: "import torch_xla.core.xla_model as xm\n```\nxm.mark_step()\n"})


RST = """\
Title
=====

.. code-block:: python
   :linenos:
   :caption: Example

   import torch_xla.core.xla_model as xm

   xm.mark_step()

Install it::

    $ pip install torch_xla

Then::

    import torch_xla
    device = torch_xla.device()

A name is not enough::

    torch_xla.runtime

>>> import torch_xla.core.xla_model as xm
>>> xm.xrt_world_size()
1

.. note::

   .. code:: py

      x = f(1)

   >>> y = 2
   >>> y
   2

.. code-block::

   x = 1

.. code-block:: bash

   >>> not python
"""


def test_rst_blocks():
    document = read_document("index.rst", RST)
    assert document.kind == "rst"
    assert document.blocks == [
        Block(0, "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n", ((8, 3), (9, 0), (10, 3)),
              kind="code-block"),
        Block(1, "import torch_xla\ndevice = torch_xla.device()\n", ((18, 4), (19, 4)), kind="literal"),
        Block(2, "import torch_xla.core.xla_model as xm\nxm.xrt_world_size()\n", ((25, 4), (26, 4)), kind="doctest"),
        Block(3, "x = f(1)\n", ((33, 6),), kind="code-block"),
        Block(4, "y = 2\ny\n", ((35, 7), (36, 7)), kind="doctest"),
    ]
    assert document.skipped == [(39, "code-block without a language")]


def test_rst_rewrite():
    document = read_document("index.rst", RST)
    assert rewrite(document, RST, {}) == RST
    new = rewrite(document, RST, {0: "import torch_xla.core.xla_model as xm\n\ntorch_xla.sync()\n"})
    assert new == RST.replace("   xm.mark_step()", "   torch_xla.sync()")
    new = rewrite(document, RST, {2: "import torch_xla.runtime as xr\nimport torch_xla.core.xla_model as xm\n"
                                     "xr.world_size()\n"})
    assert new == RST.replace(">>> import torch_xla.core.xla_model as xm\n>>> xm.xrt_world_size()\n1\n",
                              ">>> import torch_xla.runtime as xr\n>>> import torch_xla.core.xla_model as xm\n"
                              ">>> xr.world_size()\n1\n")
    new = rewrite(document, RST, {4: "import os\ny = 2\ny\n"})
    assert new == RST.replace("   >>> y = 2\n", "   >>> import os\n   >>> y = 2\n")


def test_rst_tabs_expand_to_eight_columns():
    text = ".. code-block:: python\n\n\timport torch_xla\n\tif x:\n\t    y = 1\n"
    assert read_document("a.rst", text).blocks == [
        Block(0, "import torch_xla\nif x:\n    y = 1\n", ((3, 1), (4, 1), (5, 1)), kind="code-block")]


def test_ipython_fences_get_placeholders():
    text = "```ipython\n%timeit f()\nx = 1\n```\n\n```python\n%timeit f()\n```\n"
    document = read_document("a.md", text)
    assert [b.source for b in document.blocks] == ["pass  # flake8-xla: ipython 1\nx = 1\n"]
    assert document.skipped == [(6, "does not parse: invalid syntax (line 7)")]
    assert rewrite(document, text, {0: "y = 0\npass  # flake8-xla: ipython 1\nx = 1\n"}) == (
        "```ipython\ny = 0\n%timeit f()\nx = 1\n```\n\n```python\n%timeit f()\n```\n")


def test_is_document():
    assert [is_document(p) for p in ("a.ipynb", "A.MD", "b.markdown", "c.rst", "d.py", "e.txt")] == [
        True, True, True, True, False, False]


def test_large_markdown_is_read_in_one_pass():
    block = textwrap.dedent("""\
        ```python
        import torch_xla
        ```

        """)
    document = read_document("big.md", block * 5000)
    assert len(document.blocks) == 5000
    assert document.blocks[-1].origin == ((5000 * 4 - 2, 0),)
