"""Which files a run lints: directory walks, excludes, ``.gitignore``, and files that are not
regular files.

Default excludes come in two kinds. Tool and VCS directories (``.git``, ``__pycache__``,
``node_modules``, ...) are never an importable package, so they are skipped at any depth. ``build``,
``dist`` and ``venv`` can also be a package's name (``mylib/dist/``), so they are skipped only
directly under the project root (the directory of the config file, else the working directory).
Excludes the user gives keep flake8's meaning: a pattern without a slash matches a name at any
depth, one with a slash a path relative to the project root.
"""
from __future__ import annotations

import fnmatch
import os
from typing import List, NamedTuple, Optional, Sequence, Tuple

from ..config import Settings
from ..documents import SUFFIXES
from ..session.selection import path_matches
from .errors import UsageError
from .gitignore import GitIgnore
from ..output.terminal import display_name
from ..session.sources import describe_file_type

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
# the documents the documents layer reads, notebooks aside: searched in directories only with --include-docs
DOC_SUFFIXES = tuple(suffix for suffix, kind in SUFFIXES.items() if kind != "notebook")
EXCLUDED_ANYWHERE = (".git", ".hg", ".svn", ".tox", ".nox", ".venv", ".eggs", "*.egg-info", "__pycache__",
                     "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages")
EXCLUDED_AT_ROOT = ("build", "dist", "venv")
DEFAULT_EXCLUDES = EXCLUDED_ANYWHERE + EXCLUDED_AT_ROOT


class Exclusion(NamedTuple):
    """The pattern that dropped a path, and where the pattern came from."""

    pattern: str
    origin: str  # "default exclude", "exclude", "extend-exclude", "path/.gitignore:3", ...

    def describe(self) -> str:
        return f"{self.pattern!r} ({self.origin})"


class FileFinder:
    """Finds the files to lint under the paths given on the command line.

    ``notes`` collects what -v reports: explicitly named paths that an exclude dropped, and files
    with a wanted suffix skipped in a walk because they are not regular files (a FIFO would block
    a read forever; a link to /dev/zero never ends)."""

    def __init__(self, settings: Settings, force_exclude: bool = False, include_docs: bool = False,
                 respect_gitignore: bool = True) -> None:
        self.base_dir = os.path.abspath(settings.base_dir)
        if settings.exclude is None:
            self.anywhere: List[Tuple[str, str]] = [(p, "default exclude") for p in EXCLUDED_ANYWHERE]
            self.at_root: Tuple[str, ...] = EXCLUDED_AT_ROOT
        else:
            self.anywhere, self.at_root = [(p, "exclude") for p in settings.exclude], ()
        self.anywhere += [(p, "extend-exclude") for p in settings.extend_exclude]
        self.force_exclude = force_exclude
        self.suffixes = PYTHON_SUFFIXES + (DOC_SUFFIXES if include_docs else ())
        self.gitignore = GitIgnore() if respect_gitignore else None
        self.notes: List[str] = []
        self.excluded_named: List[str] = []  # paths given explicitly that --force-exclude dropped, and why

    def find(self, paths: Sequence[str]) -> List[str]:
        found: List[str] = []
        for path in paths:
            if path == "-":
                found.append(path)
                continue
            if not os.path.exists(path):
                raise UsageError(f"{display_name(path)}: no such file or directory")
            is_dir = os.path.isdir(path)
            if self.force_exclude:
                reason = self.explicit_exclusion(path, is_dir)
                if reason is not None:
                    self.excluded_named.append(f"{display_name(path)}: excluded by {reason.describe()}")
                    self.notes.append(self.excluded_named[-1])
                    continue
            if is_dir:
                self._walk(path, found)
            else:
                found.append(path)  # not a regular file: reported (E902) when read, never opened blocking
        return found

    def exclusion(self, path: str, is_dir: bool) -> Optional[Exclusion]:
        """Why an entry met in a walk is skipped (its parents were walked, so are not excluded)."""
        absolute = os.path.abspath(path)
        found = self._pattern_exclusion(absolute)
        if found is None and self.gitignore is not None:
            rule = self.gitignore.rule_for(absolute, is_dir)
            if rule is not None and not rule.negated:
                found = Exclusion(rule.pattern, rule.where)
        return found

    def explicit_exclusion(self, path: str, is_dir: bool) -> Optional[Exclusion]:
        """Why a path named on the command line is dropped (--force-exclude): it, or a directory
        above it up to the working directory, is excluded, or git ignores it."""
        current, stop = os.path.abspath(path), os.getcwd()
        while True:
            found = self._pattern_exclusion(current)
            if found is not None:
                return found
            parent = os.path.dirname(current)
            if current == stop or parent == current:
                break
            current = parent
        if self.gitignore is not None:
            rule = self.gitignore.ignoring(path, is_dir)
            if rule is not None:
                return Exclusion(rule.pattern, rule.where)
        return None

    def _pattern_exclusion(self, absolute: str) -> Optional[Exclusion]:
        for pattern, origin in self.anywhere:
            if path_matches(absolute, pattern, self.base_dir):
                return Exclusion(pattern, origin)
        if self.at_root and os.path.dirname(absolute) == self.base_dir:
            name = os.path.basename(absolute)
            for pattern in self.at_root:
                if fnmatch.fnmatch(name, pattern):
                    return Exclusion(pattern, "default exclude, at the project root only")
        return None

    def _walk(self, top: str, found: List[str]) -> None:
        # depth first, a directory's files before its subdirectories, each in name order (as os.walk)
        pending = [top]
        while pending:
            directory = pending.pop()
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError as exc:
                self.notes.append(f"{display_name(directory)}: not read: {exc.strerror or exc}")
                continue
            subdirectories = []
            for entry in entries:
                full = os.path.join(directory, entry.name)
                if entry.is_dir(follow_symlinks=False):
                    if self.exclusion(full, True) is None and not os.path.exists(os.path.join(full, "pyvenv.cfg")):
                        subdirectories.append(full)
                    continue
                if not entry.name.endswith(self.suffixes) or entry.is_symlink() and entry.is_dir():
                    continue  # links to directories are not followed (as os.walk)
                if self.exclusion(full, False) is not None:
                    continue
                if entry.is_file():  # a regular file, or a link to one
                    found.append(full)
                else:
                    self.notes.append(f"{display_name(full)}: skipped: {_non_regular_kind(full)}")
            pending.extend(reversed(subdirectories))


def _non_regular_kind(path: str) -> str:
    try:
        return f"not a regular file ({describe_file_type(os.stat(path).st_mode)})"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc}; a broken symbolic link?)"
