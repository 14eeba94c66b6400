"""Python code inside Jupyter notebooks, Markdown and reStructuredText: the blocks to lint, where
each of their lines came from, and how to write fixed blocks back without touching anything else.

A block's ``source`` is what the engine parses: the document's indentation and ``>>>`` prompts
removed, and IPython-only lines (magics, shell escapes, ``obj?``) replaced by placeholders that
keep the line count. :func:`rewrite` reads the document again, keeps the original text of every
line the fix kept, and reads its own result back: a block that would not come back as the fixed
source raises :class:`DocumentError` and the file is left alone.

Notebooks are read with the ``json`` module and rewritten by replacing only the JSON value of each
changed cell's ``source``, so outputs, metadata, key order and formatting stay byte-identical.
nbformat 3 notebooks are refused (see :func:`read_document`).
"""
from __future__ import annotations

import ast
import difflib
import io
import json
import os
import re
import warnings
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Tuple, Union

from . import SUFFIXES

PYTHON_LANGUAGES = frozenset({"python", "py", "python3", "pycon", "ipython", "ipython3"})
_IPYTHON_LANGUAGES = frozenset({"ipython", "ipython3"})
# cell magics whose body is Python (the magic only times or captures it)
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture"})
# Sphinx directives whose content is Python whatever their argument (a group name, not a language)
_TEST_DIRECTIVES = frozenset({"testcode", "testsetup", "testcleanup"})
_NBFORMAT_3 = "nbformat {} notebooks are not supported; upgrade with `jupyter nbconvert --to notebook --nbformat 4`"

_MARKER = "  # flake8-xla: ipython {}"
_MARKER_RE = re.compile(r"  # flake8-xla: ipython (\d+)$", re.MULTILINE)
_MAGIC = re.compile(r"%{1,2}[A-Za-z_]|!(?!=)")  # `!=` starts a continued comparison, not a shell line
_HELP = re.compile(r"\?{1,2}\S|%{0,2}[A-Za-z_*][\w.*]*\?{1,2}\s*$")  # ?obj, ??obj, obj?, obj.attr??
_ASSIGN = re.compile(r"([^=!%]+?)\s*=\s*(?:%[A-Za-z_]|!(?!=))")  # files = !ls, t = %time f()

_FENCE = re.compile(r"([ \t]*)(`{3,}|~{3,})(.*)")
_CLOSING_FENCE = re.compile(r"([ \t]*)(`{3,}|~{3,})[ \t]*")
_DIRECTIVE = re.compile(r"([ \t]*)\.\.[ \t]+(code-block|code|sourcecode|testcode|testsetup|testcleanup)::(.*)")
# what makes a `::` literal block Python rather than a shell session, a config file or prose
_PYTHON_NODES = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Call,
                 ast.Assign, ast.AugAssign)
_JSON = json.JSONDecoder()
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


class DocumentError(Exception):
    """A document that cannot be read, or a block that cannot be written back; the message is one
    line for the user."""


class Block(NamedTuple):
    index: int  # 0-based, in document order
    source: str  # the Python text to parse: dedented, prompts removed, IPython lines replaced
    # per line of source: (line, characters removed before the code) in the original file for
    # Markdown and reStructuredText; (line within the cell's source, 0) for notebooks
    origin: Tuple[Tuple[int, int], ...]
    cell: Optional[int] = None  # notebooks: 1-based position among all cells
    json_lines: Tuple[int, ...] = ()  # notebooks: per source line, its line in the .ipynb when stored as a list
    # "cell", "writefile" (a cell's %%writefile body), "fence", "pycon", "doctest", "code-block", "literal"
    kind: str = ""


class Document(NamedTuple):
    path: str
    kind: str  # "notebook", "markdown" or "rst"
    blocks: List[Block]
    skipped: List[Tuple[int, str]]  # (line, or cell number for notebooks, 0 = whole document; why)


class _Line:
    """One original line of a block: ``indent + prompt + text + ending`` is the line as written."""

    __slots__ = ("indent", "prompt", "text", "ending", "output")

    def __init__(self, indent: str, prompt: str, text: str, ending: str, output: bool = False) -> None:
        self.indent = indent  # removed before the code (the block's indentation)
        self.prompt = prompt  # ">>> ", ">>>", "... " or "..." in a session, else ""
        self.text = text  # the code; for an output line, the whole line
        self.ending = ending
        self.output = output  # an interpreter's output (or a blank line) in a session: not code

    @property
    def original(self) -> str:
        return self.indent + self.prompt + self.text


class _Layout:
    """What rewrite needs about one block: its original lines, outputs included."""

    __slots__ = ("lines", "start", "indent", "session", "placeholders", "span", "elements")

    def __init__(self, lines: List[_Line], start: int, indent: str, session: bool = False,
                 span: Tuple[int, int] = (0, 0)) -> None:
        self.lines = lines
        self.start = start  # Markdown/rst: 0-based index of lines[0] among the file's lines; notebooks: unused
        self.indent = indent  # put before the lines a fix adds
        self.session = session
        self.placeholders: FrozenSet[int] = frozenset()  # source lines that hold an IPython placeholder
        self.span = span  # notebooks: where the cell's "source" value is in the JSON text
        self.elements: Optional[List[Tuple[int, int]]] = None  # ... and each of its strings when it is a list


def read_document(path: str, text: str) -> Document:
    """The Python blocks of a notebook, Markdown or reStructuredText file (chosen by suffix).

    Raises DocumentError for a notebook that is not valid JSON, contains a NUL byte or is in
    nbformat 3 or older (those are not read at all: upgrading them is one nbconvert call).
    """
    return _read(path, text)[0]


def rewrite(document: Document, text: str, new_sources: Dict[int, str]) -> str:
    """``text`` with the blocks in ``new_sources`` (block index -> source in the form of
    Block.source) written back and every other character unchanged.

    Raises DocumentError when ``text`` is not the text ``document`` was read from, or when a
    block cannot be written back so that reading the result gives exactly the new source.
    """
    current, layouts = _read(document.path, text)
    if current.blocks != document.blocks:
        raise DocumentError(f"{document.path} changed since it was read")
    for index in new_sources:
        if not 0 <= index < len(layouts):
            raise DocumentError(f"{document.path} has no block {index}")
    changed = {index: source for index, source in new_sources.items() if source != document.blocks[index].source}
    if not changed:
        return text
    if document.kind == "notebook":
        result = _rewrite_notebook(text, layouts, changed)
    else:
        result = _rewrite_text(text, layouts, changed)
    _check(document, result, changed)
    return result


def _read(path: str, text: str) -> Tuple[Document, List[_Layout]]:
    kind = SUFFIXES.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise DocumentError(f"{path} is not a notebook, Markdown or reStructuredText file")
    reader = _Reader(Document(path, kind, [], []))
    if kind == "notebook":
        _read_notebook(reader, text)
    elif kind == "markdown":
        _read_markdown(reader, _split_lines(text))
    else:
        _read_rst(reader, _split_lines(text))
    return reader.document, reader.layouts


class _Reader:
    """Turns layouts into blocks (or skipped entries) and keeps the layouts for rewrite."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.layouts: List[_Layout] = []

    def skip(self, where: int, reason: str) -> None:
        self.document.skipped.append((where, reason))

    def add(self, layout: _Layout, kind: str, where: int, ipython: bool = False, quiet: bool = False,
            cell: Optional[int] = None, json_lines: Tuple[int, ...] = ()) -> None:
        """``quiet``: a `::` literal block, kept only when it parses and looks like Python, and
        never reported as skipped (most literal blocks are shell sessions or output)."""
        texts = [line.text for line in layout.lines if not line.output]
        if ipython and is_writefile(texts):
            kind = "writefile"  # the body is another file: a program of its own
        if ipython:
            replaced = _ipython(texts)
            if isinstance(replaced, str):
                self.skip(where, replaced)
                return
            texts, layout.placeholders = replaced
        if not any(text.strip() for text in texts):
            return
        source = "".join(text + "\n" for text in texts)
        if cell is not None:
            code = [line for line in layout.lines if not line.output]
            origin = tuple((number, len(line.indent)) for number, line in enumerate(code, 1))
        else:
            origin = tuple((layout.start + position + 1, len(line.indent) + len(line.prompt))
                           for position, line in enumerate(layout.lines) if not line.output)
        tree, message, lineno = _parse(source)
        if tree is None:
            if not quiet:
                line = origin[min(max(lineno, 1), len(origin)) - 1][0]
                self.skip(where, f"does not parse: {message} (line {line})")
            return
        if quiet and not layout.session and not _looks_like_python(tree):
            return
        blocks = self.document.blocks
        blocks.append(Block(len(blocks), source, origin, cell, json_lines, kind))
        self.layouts.append(layout)


def _parse(source: str) -> Tuple[Optional[ast.Module], str, int]:
    """The tree, or None with the first line of the error and its line in ``source``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences and the like are not our business
        try:
            return ast.parse(source), "", 0
        except SyntaxError as error:
            return None, (error.msg or "invalid syntax").splitlines()[0], error.lineno or 1
        except (ValueError, RecursionError) as error:  # a NUL character, absurd nesting
            return None, str(error).splitlines()[0], 1


def _looks_like_python(tree: ast.Module) -> bool:
    return any(isinstance(node, _PYTHON_NODES) or (isinstance(node, ast.AnnAssign) and node.value is not None)
               for node in ast.walk(tree))


def is_writefile(lines: List[str]) -> bool:
    """Whether a cell writes its body to a Python file (``%%writefile [-a] train.py``)."""
    first = next((line.lstrip() for line in lines if line.strip()), "")
    words = first[2:].split() if first.startswith("%%") else []
    return len(words) > 1 and words[0] == "writefile" and words[-1].strip("'\"").endswith(".py")


def _ipython(lines: List[str]) -> Union[str, Tuple[List[str], FrozenSet[int]]]:
    """The lines with IPython-only syntax replaced by placeholders at the same indentation, and
    the 1-based numbers of the lines replaced; or why the block is not Python (a cell magic)."""
    out = list(lines)
    replaced = set()
    first = next((k for k, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        words = lines[first].lstrip()[2:].split() or [""]
        name = words[0]
        if is_writefile(lines):
            # the body is a Python file written as it stands: no IPython syntax to replace in it
            out[first] = _indentation(lines[first]) + "pass" + _MARKER.format(first + 1)
            return out, frozenset({first + 1})
        if name not in _PYTHON_CELL_MAGICS:
            return f"cell magic %%{name}"
        out[first] = _indentation(lines[first]) + "pass" + _MARKER.format(first + 1)
        replaced.add(first + 1)
    # plain Python needs nothing: this keeps `!` or `%` lines inside strings of such cells intact
    if _parse("".join(line + "\n" for line in out))[0] is not None:
        return out, frozenset(replaced)
    k = 0
    while k < len(out):
        line = out[k]
        placeholder = None if k + 1 in replaced else _placeholder(line, k + 1)
        if placeholder is None:
            k += 1
            continue
        out[k] = placeholder
        replaced.add(k + 1)
        indent = _indentation(line)
        # a magic or shell command continues onto the next line after a backslash (help lines do not)
        while line.rstrip().endswith("\\") and not _HELP.match(line.lstrip()) and k + 1 < len(out):
            k += 1
            line = out[k]
            out[k] = indent + "pass" + _MARKER.format(k + 1)
            replaced.add(k + 1)
        k += 1
    return out, frozenset(replaced)


def _placeholder(line: str, number: int) -> Optional[str]:
    """A line that parses in place of an IPython-only ``line``, or None for a Python line. An
    assignment from a magic keeps its target, so the names it binds stay bound."""
    stripped = line.lstrip()
    indent = line[:len(line) - len(stripped)]
    if _MAGIC.match(stripped) or _HELP.match(stripped):
        return indent + "pass" + _MARKER.format(number)
    assign = _ASSIGN.match(stripped)
    if assign and _is_target(assign.group(1)):
        return indent + assign.group(1).strip() + " = ..." + _MARKER.format(number)
    return None


def _is_target(text: str) -> bool:
    tree = _parse(text + " = None\n")[0]
    return tree is not None and len(tree.body) == 1 and type(tree.body[0]) is ast.Assign


def _indentation(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _split_lines(text: str) -> List[str]:
    """Lines with their endings, split where Python splits them (\\n, \\r\\n, \\r)."""
    return io.StringIO(text, newline="").readlines()


def _split_ending(line: str) -> Tuple[str, str]:
    if line.endswith("\r\n"):
        return line[:-2], "\r\n"
    if line.endswith(("\n", "\r")):
        return line[:-1], line[-1]
    return line, ""


def _newline(text: str) -> str:
    match = re.search(r"\r\n|\r|\n", text)
    return match.group() if match else "\n"


def _width(indent: str, tabsize: int) -> int:
    """The columns ``indent`` (spaces and tabs) spans."""
    column = 0
    for char in indent:
        column = column + 1 if char == " " else (column // tabsize + 1) * tabsize
    return column


def _cut(body: str, width: int, tabsize: int) -> Optional[int]:
    """How many leading characters of ``body`` make up (at most) ``width`` columns; None when a
    tab straddles the boundary, so the indentation cannot be removed without rewriting it."""
    column = k = 0
    while k < len(body) and column < width and body[k] in " \t":
        column = column + 1 if body[k] == " " else (column // tabsize + 1) * tabsize
        k += 1
    return None if column > width else k


def _prompt(text: str) -> Optional[str]:
    """The interpreter prompt ``text`` starts with, or None for an output line."""
    for prompt in (">>> ", "... "):
        if text.startswith(prompt):
            return prompt
        if text == prompt[:3]:
            return text
    return None


def _starts_session(line: str) -> bool:
    return (_prompt(line.strip()) or "").startswith(">>>")


def _text_layout(lines: List[str], first: int, end: int, width: int, tabsize: int,
                 session: bool) -> Union[_Layout, str]:
    """The layout of file lines[first:end], indented by ``width`` columns, or why it cannot be
    linted. In a session, only prompt lines are code; the rest is output."""
    out: List[_Line] = []
    for k in range(first, end):
        body, ending = _split_ending(lines[k])
        if not body.strip():
            out.append(_Line(body, "", "", ending, output=session))
            continue
        cut = _cut(body, width, tabsize)
        rest = body[cut:] if cut is not None else body.lstrip()
        prompt = _prompt(rest) if session else ""
        if prompt is None:
            out.append(_Line("", "", body, ending, output=True))
            continue
        if cut is None:
            return "inconsistent indentation"
        out.append(_Line(body[:cut], prompt, rest[len(prompt):], ending))
    indent = next((line.indent for line in out if (line.text or line.prompt) and not line.output), " " * width)
    return _Layout(out, first, indent, session)


# Markdown


def _session_paragraph(reader: _Reader, lines: List[str], i: int, width: int, tabsize: int, kind: str) -> int:
    """Read the ``>>>`` session that starts at line ``i`` and runs to the next blank line; return
    where it ends."""
    end = i
    while end < len(lines) and lines[end].strip():
        end += 1
    layout = _text_layout(lines, i, end, width, tabsize, True)
    if isinstance(layout, str):
        reader.skip(i + 1, layout)
    else:
        reader.add(layout, kind, i + 1)
    return end


def _read_markdown(reader: _Reader, lines: List[str]) -> None:
    i = 0
    while i < len(lines):
        body = _split_ending(lines[i])[0]
        fence = _FENCE.fullmatch(body)
        if fence and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            i = _markdown_fence(reader, lines, i, fence)
            continue
        stripped = body.lstrip()
        width = _width(body[:len(body) - len(stripped)], 4)
        blank_before = i == 0 or not lines[i - 1].strip()
        if blank_before and width >= 4 and _starts_session(stripped):
            # an indented code block holding an interpreter session
            i = _session_paragraph(reader, lines, i, width, 4, "pycon")
            continue
        i += 1


def _markdown_fence(reader: _Reader, lines: List[str], i: int, fence: re.Match) -> int:
    """Reads the fenced block opening at lines[i]; returns the index of the line after it."""
    indent, marker, info = fence.groups()
    width = _width(indent, 4)
    language = _language(info)
    python = language in PYTHON_LANGUAGES
    end = i + 1
    # a closing fence may be indented up to 3 columns more than the opening one (CommonMark)
    while end < len(lines) and not _closes(lines[end], marker, width + 3):
        end += 1
    if end == len(lines):
        if python:
            reader.skip(i + 1, "unterminated fence")
        return end  # an unclosed fence runs to the end of the document
    if python:
        first = next((line for line in lines[i + 1:end] if line.strip()), "")
        session = language == "pycon" or _starts_session(first)
        layout = _text_layout(lines, i + 1, end, width, 4, session)
        if isinstance(layout, str):
            reader.skip(i + 1, layout)
        else:
            reader.add(layout, "pycon" if session else "fence", i + 1, ipython=language in _IPYTHON_LANGUAGES)
    return end + 1


def _closes(line: str, marker: str, max_width: int) -> bool:
    match = _CLOSING_FENCE.fullmatch(_split_ending(line)[0])
    return (match is not None and match.group(2)[0] == marker[0] and len(match.group(2)) >= len(marker)
            and _width(match.group(1), 4) <= max_width)


def _language(info: str) -> str:
    """The language of a fence's info string: its first word, also in the ``{.python}`` and
    MyST ``{code-cell} ipython3`` spellings."""
    words = info.replace("{", " ").replace("}", " ").split()
    if words and words[0] == "code-cell":
        words = words[1:]
    return words[0].lstrip(".").lower() if words else ""


# reStructuredText (docutils expands tabs to 8 columns)


def _read_rst(reader: _Reader, lines: List[str]) -> None:
    i = 0
    while i < len(lines):
        body = _split_ending(lines[i])[0]
        directive = _DIRECTIVE.fullmatch(body)
        if directive:
            i = _rst_directive(reader, lines, i, directive)
            continue
        stripped = body.strip()
        width = _width(body[:len(body) - len(body.lstrip())], 8)
        # a paragraph ending in `::` (not a directive, nor a section adornment of colons)
        if stripped.endswith("::") and not stripped.startswith("..") and (stripped == "::" or set(stripped) != {":"}):
            end = _rst_literal(reader, lines, i, width)
            if end is not None:
                i = end
                continue
        blank_before = i == 0 or not lines[i - 1].strip()
        if blank_before and _starts_session(stripped):
            i = _session_paragraph(reader, lines, i, width, 8, "doctest")
            continue
        i += 1


def _indented_block(lines: List[str], j: int, outer: int) -> Tuple[int, int]:
    """The lines from ``j`` on, blank lines first skipped, indented deeper than ``outer`` columns:
    (first, end), without trailing blank lines; first == end when there are none."""
    while j < len(lines) and not lines[j].strip():
        j += 1
    first = end = j
    while j < len(lines):
        if lines[j].strip():
            if _width(_indentation(lines[j]), 8) <= outer:
                break
            end = j + 1
        j += 1
    return first, end


def _block_width(lines: List[str], first: int, end: int) -> int:
    """The indentation docutils removes from a block: that of its least indented line."""
    return min(_width(_indentation(lines[k]), 8) for k in range(first, end) if lines[k].strip())


def _rst_directive(reader: _Reader, lines: List[str], i: int, directive: re.Match) -> int:
    indent, name, argument = directive.groups()
    outer = _width(indent, 8)
    j = i + 1
    while j < len(lines) and lines[j].lstrip().startswith(":") and _width(_indentation(lines[j]), 8) > outer:
        j += 1  # options: :linenos:, :caption: ...
    first, end = _indented_block(lines, j, outer)
    if first == end:
        return j
    words = argument.split()
    language = "python" if name in _TEST_DIRECTIVES else (words[0].lower() if words else "")
    if not language:
        reader.skip(i + 1, f"{name} without a language")
    elif language in PYTHON_LANGUAGES:
        first_line = next(line for line in lines[first:end] if line.strip())
        session = language == "pycon" or _starts_session(first_line)
        layout = _text_layout(lines, first, end, _block_width(lines, first, end), 8, session)
        if isinstance(layout, str):
            reader.skip(i + 1, layout)
        else:
            reader.add(layout, "code-block", i + 1, ipython=language in _IPYTHON_LANGUAGES)
    return end


def _rst_literal(reader: _Reader, lines: List[str], i: int, outer: int) -> Optional[int]:
    """Reads the literal block after the `::` paragraph ending at lines[i]; returns the index of
    the line after it, or None when no literal block follows."""
    if i + 1 >= len(lines) or lines[i + 1].strip():
        return None
    first, end = _indented_block(lines, i + 1, outer)
    if first == end:
        return None
    session = _starts_session(lines[first])
    layout = _text_layout(lines, first, end, _block_width(lines, first, end), 8, session)
    if not isinstance(layout, str):
        reader.add(layout, "literal", first + 1, quiet=True)
    return end


# notebooks


def _read_notebook(reader: _Reader, text: str) -> None:
    if "\x00" in text:
        raise DocumentError("not a notebook: the file contains a NUL byte")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DocumentError(f"not a notebook: invalid JSON at line {error.lineno} column {error.colno}: "
                            f"{error.msg}") from None
    except RecursionError:
        raise DocumentError("not a notebook: the JSON is nested too deeply") from None
    if not isinstance(data, dict):
        raise DocumentError("not a notebook: the JSON is not an object")
    version = data.get("nbformat")
    if "worksheets" in data or (type(version) is int and version < 4):
        raise DocumentError(_NBFORMAT_3.format(version if type(version) is int else 3))
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise DocumentError('not a notebook: no "cells" list')
    language = _kernel_language(data.get("metadata"))
    if language is not None and not language.lower().startswith(("python", "ipython")):
        reader.skip(0, f"not a Python notebook (kernel language {language})")
        return
    cell_spans = _elements(text, _members(text, _skip(text, 0))["cells"][0])
    counter = _LineCounter(text)
    for number, (cell, (cell_start, _)) in enumerate(zip(cells, cell_spans), 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        stored_as_list = isinstance(source, list) and all(isinstance(part, str) for part in source)
        if not stored_as_list and not isinstance(source, str):
            reader.skip(number, "the cell's source is not text")
            continue
        joined = "".join(source)
        if not joined.strip():
            continue
        span = _members(text, cell_start)["source"]
        lines = [_Line("", "", *_split_ending(line)) for line in _split_lines(joined)]
        indent = _cell_indent(lines)
        layout = _Layout(lines, 0, indent, span=span)
        json_lines: Tuple[int, ...] = ()
        if stored_as_list:
            layout.elements = _elements(text, span[0])
            json_lines = _json_lines(lines, source, layout.elements, counter)
        reader.add(layout, "cell", number, ipython=True, cell=number, json_lines=json_lines)


def _cell_indent(lines: List[_Line]) -> str:
    """IPython removes the indentation of a cell's first non-blank line from every line that
    starts with it before running the cell; so do we (the removed text stays in ``_Line.indent``,
    so positions and the rewrite keep it)."""
    first = next((line for line in lines if line.text.strip()), None)
    indent = _indentation(first.text) if first is not None else ""
    if indent:
        for line in lines:
            if line.text.startswith(indent):
                line.indent, line.text = indent, line.text[len(indent):]
    return indent


def _kernel_language(metadata: object) -> Optional[str]:
    if not isinstance(metadata, dict):
        return None
    for key, name in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(key)
        if isinstance(value, dict) and isinstance(value.get(name), str):
            return value[name]
    return None


class _LineCounter:
    """1-based line numbers of increasing offsets into a text, in time linear in the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offset = 0
        self.line = 1

    def at(self, offset: int) -> int:
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line


def _json_lines(lines: List[_Line], parts: List[str], elements: List[Tuple[int, int]],
                counter: _LineCounter) -> Tuple[int, ...]:
    """For each source line, the file line of the JSON string its first character is in (a
    string holds no raw newline, so it sits on one line)."""
    out = []
    part, part_end, offset = 0, len(parts[0]), 0
    for line in lines:
        while offset >= part_end:
            part += 1
            part_end += len(parts[part])
        out.append(counter.at(elements[part][0]))
        offset += len(line.indent) + len(line.text) + len(line.ending)
    return tuple(out)


def _skip(text: str, i: int) -> int:
    return _JSON_SPACE.match(text, i).end()


def _members(text: str, i: int) -> Dict[str, Tuple[int, int]]:
    """Where the value of each member of the (valid) JSON object at text[i] starts and ends; the
    last of duplicate keys wins, as in json.loads."""
    spans: Dict[str, Tuple[int, int]] = {}
    i = _skip(text, i + 1)
    while text[i] != "}":
        key, i = _JSON.raw_decode(text, i)
        start = _skip(text, _skip(text, i) + 1)  # past the colon
        end = _JSON.raw_decode(text, start)[1]
        spans[key] = (start, end)
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return spans


def _elements(text: str, i: int) -> List[Tuple[int, int]]:
    """Where each element of the (valid) JSON array at text[i] starts and ends."""
    spans = []
    i = _skip(text, i + 1)
    while text[i] != "]":
        end = _JSON.raw_decode(text, i)[1]
        spans.append((i, end))
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return spans


# writing back


def _rewrite_notebook(text: str, layouts: List[_Layout], changed: Dict[int, str]) -> str:
    pieces, done = [], 0
    for index in sorted(changed):  # blocks, and so their spans, are in file order
        layout = layouts[index]
        start, end = layout.span
        pieces += [text[done:start], _json_source(text, layout, _rewrite_block(layout, changed[index]))]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _json_source(text: str, layout: _Layout, source: str) -> str:
    """The JSON value for a cell's new source, stored as the old one was (a string, or a list of
    lines laid out like the old list); unchanged lines keep their exact old JSON text."""
    if layout.elements is None:
        return json.dumps(source, ensure_ascii=False)
    elements = layout.elements
    old = {json.loads(text[start:end]): text[start:end] for start, end in elements}
    items = [old.get(part) or json.dumps(part, ensure_ascii=False) for part in source.splitlines(True)]
    if not items:
        return "[]"
    opening = text[layout.span[0] + 1:elements[0][0]]
    closing = text[elements[-1][1]:layout.span[1] - 1]
    separator = text[elements[0][1]:elements[1][0]] if len(elements) > 1 else "," + opening
    return "[" + opening + separator.join(items) + closing + "]"


def _rewrite_text(text: str, layouts: List[_Layout], changed: Dict[int, str]) -> str:
    lines = _split_lines(text)
    newline = _newline(text)
    pieces: List[str] = []
    done = 0
    for index in sorted(changed, key=lambda k: layouts[k].start):
        layout = layouts[index]
        pieces += lines[done:layout.start]
        pieces.append(_rewrite_block(layout, changed[index], newline))
        done = layout.start + len(layout.lines)
    pieces += lines[done:]
    return "".join(pieces)


def _rewrite_block(layout: _Layout, new_source: str, newline: str = "\n") -> str:
    """The block's original lines with the code replaced by ``new_source``. Old and new code
    lines are aligned: a kept line keeps its text, indentation, prompt and outputs; a line the
    fix adds gets the block's indentation and, in a session, a prompt guessed from the code."""
    lines = layout.lines
    newline = next((line.ending for line in lines if line.ending), newline)
    codes = [k for k, line in enumerate(lines) if not line.output]
    old = [lines[k].text for k in codes]
    new = [_restore(_split_ending(line)[0], layout, old) for line in _split_lines(new_source)]
    # the output lines after each code line (in a session; elsewhere there are none)
    outputs = [lines[k + 1:next_k] for k, next_k in zip(codes, codes[1:] + [len(lines)])]
    out: List[Tuple[str, str]] = [(line.original, line.ending) for line in lines[:codes[0]]]
    pending: List[_Line] = []  # outputs that go after the statement being written
    statement = True  # whether the statement being written kept its first line

    def emit(body: str, ending: str, continuation: bool) -> None:
        nonlocal statement
        if continuation and not statement:
            raise DocumentError("cannot write back a session whose statement lost its first line")
        if not continuation:
            out.extend((line.original, line.ending) for line in pending)
            pending.clear()
            statement = True
        out.append((body, ending))

    for tag, i1, i2, j1, j2 in _opcodes(old, new):
        paired = min(i2 - i1, j2 - j1)
        for t in range(paired):
            line = lines[codes[i1 + t]]
            body = line.original if tag == "equal" else _render(layout, line, new[j1 + t])
            emit(body, line.ending, line.prompt.startswith("..."))
            pending.extend(outputs[i1 + t])
        for j in range(j1 + paired, j2):
            continuation = layout.session and (new[j][:1] in (" ", "\t") or (
                j > 0 and new[j - 1].rstrip().endswith(("(", "[", "{", "\\", ",", ":"))))
            prompt = ("... " if continuation else ">>> ") if layout.session else ""
            emit(_render(layout, _Line(layout.indent, prompt, "", ""), new[j]), "", continuation)
        for i in range(i1 + paired, i2):
            line = lines[codes[i]]
            if not line.prompt.startswith("..."):
                statement = False
            if outputs[i] and not [o for o in outputs[i] if o.text.strip()]:
                continue  # blank lines after a deleted line go with it
            if outputs[i]:
                if not statement:
                    raise DocumentError("cannot remove a session line without losing its output")
                pending.extend(outputs[i])
    out.extend((line.original, line.ending) for line in pending)
    for k in range(len(out) - 1):
        if not out[k][1]:
            out[k] = (out[k][0], newline)
    if out:
        out[-1] = (out[-1][0], lines[-1].ending)
    return "".join(body + ending for body, ending in out)


def _opcodes(old: List[str], new: List[str]) -> List[Tuple[str, int, int, int, int]]:
    """difflib opcodes from ``old`` to ``new``, the common first and last lines matched first: a
    fix changes a few lines, and repeated lines (``xm.mark_step()``) must not pair up across it."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    middle = difflib.SequenceMatcher(None, old[head:len(old) - tail], new[head:len(new) - tail], autojunk=False)
    out = [("equal", 0, head, 0, head)] if head else []
    out += [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in middle.get_opcodes()
            if i1 < i2 or j1 < j2]
    if tail:
        out.append(("equal", len(old) - tail, len(old), len(new) - tail, len(new)))
    return out


def _render(layout: _Layout, line: _Line, text: str) -> str:
    """``text`` written where ``line`` was: same prompt, and the line's indentation (the
    block's for a line that was blank). An empty line gets no trailing spaces."""
    indent = line.indent if line.text else layout.indent
    if line.prompt:
        return indent + line.prompt.rstrip() + (" " + text if text else "")
    return indent + text if text else ""


def _restore(text: str, layout: _Layout, old: List[str]) -> str:
    """The original IPython line behind a placeholder, wherever the fix moved it."""
    match = _MARKER_RE.search(text)
    if match and int(match.group(1)) in layout.placeholders:
        return old[int(match.group(1)) - 1]
    return text


def _canonical(source: str) -> str:
    """A source compared line by line, ignoring which line a placeholder names."""
    lines = [_split_ending(line)[0] for line in _split_lines(source)]
    return _MARKER_RE.sub(_MARKER.format("").rstrip(), "".join(line + "\n" for line in lines))


def _check(document: Document, result: str, changed: Dict[int, str]) -> None:
    """Reads ``result`` back: every block must come back with the source it was given."""
    blocks = _read(document.path, result)[0].blocks
    for k, block in enumerate(document.blocks):
        expected = _canonical(changed.get(block.index, block.source))
        if k >= len(blocks) or blocks[k].kind != block.kind or _canonical(blocks[k].source) != expected:
            where = f"cell {block.cell}" if block.cell is not None else f"the block at line {block.origin[0][0]}"
            raise DocumentError(f"cannot write the fixed code back into {where} of {document.path} safely")
    if len(blocks) != len(document.blocks):
        raise DocumentError(f"writing the fixed code back would change the blocks of {document.path}")
