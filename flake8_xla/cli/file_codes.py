"""The codes that are not rules: they say a file could not be checked at all. `flake8-xla explain`
prints these texts; the codes are flake8's own (E902, E999) so that reports mix with flake8's."""
from __future__ import annotations

from typing import Dict, NamedTuple


class FileCode(NamedTuple):
    title: str
    what: str  # when it is reported
    then: str  # what to do about it


FILE_CODES: Dict[str, FileCode] = {
    "E902": FileCode(
        "the file could not be read",
        "The file was not linted because it could not be read as source: it does not exist or cannot be "
        "opened (permissions, a broken link, a FIFO or device), it is larger than --max-file-size, it holds "
        "NUL bytes (a binary file), its bytes do not decode in its declared encoding (or UTF-8), its "
        "encoding declaration names no encoding, or it is a notebook whose JSON is broken. The message "
        "says which.",
        "Fix the file, raise --max-file-size (e.g. --max-file-size 20M), or exclude it (--extend-exclude). "
        "It is never given a `# noqa`: no line of the file was read as code.",
    ),
    "E999": FileCode(
        "the file does not parse",
        "Python's parser rejected the file (a SyntaxError, the line and column are where the parser "
        "stopped), or its nesting is deeper than the parser or the analysis can follow. No rule ran on "
        "the file.",
        "Fix the syntax error; `python -m py_compile FILE` shows the same error. A file written for "
        "another Python version parses only on the interpreter running flake8-xla.",
    ),
    "XLA000": FileCode(
        "an internal error of flake8-xla",
        "A bug in flake8-xla while it analysed this file: the run went on with the other files, and "
        "this file's other diagnostics are missing.",
        "Please report it with the message and, if you can, the smallest file that shows it: "
        "https://github.com/flake8-xla/flake8-xla/issues. Meanwhile --extend-exclude skips the file "
        "(--ignore XLA000 only hides the message).",
    ),
}


def explain_file_code(code: str) -> str:
    """``explain``'s text for a non-rule code, in the terminal form of a rule's page."""
    import textwrap

    entry = FILE_CODES[code]
    paragraphs = (f"{code}: {entry.title}", entry.what, f"What to do: {entry.then}")
    return "\n\n".join(textwrap.fill(p, 100, break_on_hyphens=False, break_long_words=False) for p in paragraphs) + "\n"
