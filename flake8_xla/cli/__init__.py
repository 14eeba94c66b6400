"""The standalone front-end: ``flake8-xla check|fix|explain|rules|clean``.

The same engine, rules, columns and ``# noqa`` semantics as the flake8 plugin, without flake8's
other checkers, so it is fast enough for pre-commit and CI on large trees. Modules, by concern:
``discovery`` (files, excludes, .gitignore), ``summary`` (closing lines, settings), ``file_codes``,
``trace_merge``, and ``commands`` (options, main). Reading, running and writing files is the
session layer's (:mod:`flake8_xla.session`), which the language server shares.
"""
from .commands import main
from .errors import UsageError

__all__ = ["UsageError", "main"]
