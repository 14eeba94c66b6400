"""The standalone front-end: ``flake8-xla check|fix|explain|rules|clean``.

The same engine, rules, columns and ``# noqa`` semantics as the flake8 plugin, without flake8's
other checkers, so it is fast enough for pre-commit and CI on large trees. Modules, by concern:
``discovery`` (files, excludes, .gitignore), ``reading`` (safe reads, decoding), ``running`` (one
file and worker processes), ``writing`` (fixed files written back), ``output`` (names, report,
colour), ``summary`` (closing lines, settings), ``adding_noqa``, and ``commands`` (options, main).
"""
from ..config import Settings
from .commands import build_selector, main
from .errors import UsageError
from .running import FileResult, Job, run_file, run_files

__all__ = ["FileResult", "Job", "Settings", "UsageError", "build_selector", "main", "run_file", "run_files"]
