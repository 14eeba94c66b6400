"""Notebooks, Markdown and reStructuredText: their Python blocks read as one program
(``reading``), linted and fixed in place (``programs``)."""
