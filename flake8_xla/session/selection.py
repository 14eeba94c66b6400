"""Which codes are reported for which file: select / extend-select / ignore / per-file-ignores.

flake8's rule: the longest matching prefix decides, and a tie goes to ignore. An off-by-default
(opt-in) code is reported only when a select or extend-select prefix longer than the default one
names it (``XLA9``, ``XLA901``), as in flake8, where the default ``XLA`` does not enable it.
"""
from __future__ import annotations

import fnmatch
import functools
import os
import re
from typing import Callable, Iterable, Sequence, Tuple

from ..config import ConfigError, Settings
from ..rules import rule_index


def _longest(code: str, prefixes: Iterable[str]) -> int:
    return max((len(p) for p in prefixes if code.startswith(p)), default=-1)


def path_matches(path: str, pattern: str, base_dir: str) -> bool:
    """flake8's file matching: a pattern with a slash is a path relative to the config's
    directory, one without matches the file name or the absolute path."""
    return _compiled(pattern, base_dir)(os.path.abspath(path))


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str, base_dir: str) -> Callable[[str], bool]:
    """``path_matches`` for one pattern, translated once: discovery asks it for every path walked."""
    if "/" in pattern or os.sep in pattern:
        whole = re.compile(fnmatch.translate(os.path.normcase(os.path.abspath(os.path.join(base_dir, pattern)))))
        return lambda absolute: whole.match(os.path.normcase(absolute)) is not None
    match = re.compile(fnmatch.translate(os.path.normcase(pattern))).match

    def matches(absolute: str) -> bool:
        absolute = os.path.normcase(absolute)
        return match(os.path.basename(absolute)) is not None or match(absolute) is not None

    return matches


class CodeSelector:
    def __init__(self, settings: Settings, known: Sequence[str], default: Sequence[str],
                 off_by_default: Sequence[str] = ()) -> None:
        for where, codes in (("select", settings.select or ()), ("extend-select", settings.extend_select),
                             ("ignore", settings.ignore)):
            _check_known(where, codes, known)
        for glob, codes in settings.per_file_ignores:
            _check_known(f"per-file-ignores {glob!r}", codes, known)
        self.select: Tuple[str, ...] = tuple(settings.select if settings.select is not None else default)
        self.select += tuple(settings.extend_select)
        self.ignore = tuple(settings.ignore)
        self.default = tuple(default)
        self.off_by_default = frozenset(off_by_default)
        self.per_file = settings.per_file_ignores
        self.base_dir = settings.base_dir

    def selected(self, code: str) -> bool:
        chosen = _longest(code, self.select)
        if code in self.off_by_default and chosen <= _longest(code, self.default):
            return False
        return chosen > _longest(code, self.ignore)

    def for_file(self, path: str) -> "FileSelector":
        extra = tuple(c for glob, codes in self.per_file if path_matches(path, glob, self.base_dir) for c in codes)
        return FileSelector(self, extra)


class FileSelector:
    def __init__(self, selector: CodeSelector, ignored_here: Tuple[str, ...]) -> None:
        self.selector = selector
        self.ignored_here = ignored_here

    def __call__(self, code: str) -> bool:
        if not self.selector.selected(code):
            return False
        return not (self.ignored_here and _longest(code, self.ignored_here) >= _longest(code, self.selector.select))


def _check_known(where: str, codes: Iterable[str], known: Sequence[str]) -> None:
    for code in codes:
        if code != code.upper() or not any(k.startswith(code) for k in known):
            raise ConfigError(f"{where}: unknown code or prefix {code!r}; `flake8-xla rules` lists the codes")


def build_selector(settings: Settings) -> CodeSelector:
    """flake8's defaults: the plugin's prefix is selected; off-by-default codes only when a
    select or extend-select prefix longer than that names them (``--extend-select XLA9``)."""
    index = rule_index()  # from the rule files' names: no rule is imported before a file needs it
    known = [code for code, _, _ in index]
    off = tuple(code for code, _, opt_in in index if opt_in)
    return CodeSelector(settings, known, ("XLA",), off)
