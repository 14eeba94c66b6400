"""Notebooks, Markdown and reStructuredText: their Python blocks read as one program
(``reading``), linted and fixed in place (``programs``). Which files are documents is decided
here, without loading either: a run over Python files never needs them."""
import os

SUFFIXES = {".ipynb": "notebook", ".md": "markdown", ".markdown": "markdown", ".rst": "rst"}


def is_document(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in SUFFIXES
