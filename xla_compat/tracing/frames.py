"""Which source line an event belongs to: the innermost frame of the user's project, and the
innermost frame of an installed library when the event happened inside one.

A file is the project's when it lies under the project root and not in an installed-packages
directory or the standard library; torch's own tensor plumbing (``torch/overrides.py``, the Python
``Tensor`` methods) and this package are skipped, so ``print(t)`` points at the ``print`` line, not
at ``torch/_tensor.py``.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType
from typing import Dict, NamedTuple, Optional, Tuple

SKIPPED, PROJECT, LIBRARY = 0, 1, 2

# torch files whose frames only forward a call to its implementation: the Tensor methods written in
# Python, and the torch functions written in Python (torch.split, F.layer_norm), whose calls reach the
# mode from their `handle_torch_function` line
_TORCH_PLUMBING = ("overrides.py", "_tensor.py", "_tensor_str.py", "functional.py", os.path.join("nn", "functional.py"),
                   os.path.join("utils", "_device.py"), os.path.join("utils", "_contextlib.py"), "_jit_internal.py")


class Site(NamedTuple):
    """A source line: ``path`` absolute, ``line`` 1-based, ``function`` the code object's name."""

    path: str
    line: int
    function: str


def _installed_roots() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(sorted(os.path.join(os.path.realpath(r), "") for r in roots if r))


def library_name(path: str) -> str:
    """``transformers/generation/utils.py`` for a file of an installed package; the path otherwise."""
    real = os.path.realpath(path)
    for root in sorted(_installed_roots(), key=len, reverse=True):
        if real.startswith(root):
            return os.path.relpath(real, root)
    return path


class FrameClassifier:
    """Classifies frames by file, once per file: skipped (this package, torch's plumbing), the
    project's, or a library's."""

    def __init__(self, project_root: str) -> None:
        self.project_root = os.path.join(os.path.realpath(project_root), "")
        self._installed = _installed_roots()
        here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the xla_compat package
        self._skipped_dirs = (os.path.join(here, ""),)
        import torch  # the tracer runs with torch imported anyway

        torch_dir = os.path.dirname(os.path.realpath(torch.__file__))
        self._torch_plumbing = frozenset(os.path.join(torch_dir, name) for name in _TORCH_PLUMBING)
        self._kinds: Dict[str, int] = {}

    def kind(self, filename: str) -> int:
        found = self._kinds.get(filename)
        if found is None:
            found = self._kinds[filename] = self._classify(filename)
        return found

    def _classify(self, filename: str) -> int:
        if filename.startswith("<"):  # <string>, <frozen ...>: generated or interpreter code
            return LIBRARY
        real = os.path.realpath(filename)
        if real.startswith(self._skipped_dirs) or real in self._torch_plumbing:
            return SKIPPED
        if real.startswith(self._installed):
            return LIBRARY
        return PROJECT if real.startswith(self.project_root) else LIBRARY

    def callers(self, frame: Optional[FrameType], limit: int = 8) -> Tuple[Tuple[str, int], ...]:
        """The project's frames from ``frame`` outwards, innermost first, but for the innermost:
        the call sites through which the project reached an event (``acc.update(logits)`` for a
        copy inside ``update``)."""
        found = []
        while frame is not None and len(found) <= limit:  # events only: no need for attribute()'s shortcuts
            if self.kind(frame.f_code.co_filename) == PROJECT:
                found.append((frame.f_code.co_filename, frame.f_lineno))
            frame = frame.f_back
        return tuple(found[1:])

    def attribute(self, frame: Optional[FrameType]) -> Tuple[Optional[Site], Optional[Site]]:
        """(innermost project frame, innermost library frame inside it) from ``frame`` outwards;
        the library frame is None when the project's code made the call itself."""
        library: Optional[Site] = None
        kinds = self._kinds
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code.co_filename)
            if kind is None:
                kind = self.kind(code.co_filename)
            if kind == PROJECT:
                return Site(code.co_filename, frame.f_lineno, code.co_name), library
            if kind == LIBRARY and library is None:
                library = Site(code.co_filename, frame.f_lineno, code.co_name)
            frame = frame.f_back
        return None, library
