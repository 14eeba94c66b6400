"""Output formats of the standalone CLI: text, json, sarif, github.

Every format renders the same :class:`Finding` records; the flake8 report formatters
(:mod:`flake8_xla.flake8_formats`) build Findings from flake8's errors and reuse these renderers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Sequence

from . import __version__
from .rule import Diagnostic

DOCS_URL = "https://github.com/flake8-xla/flake8-xla/blob/main/docs/rules/{code}.md"
FIXABLE_MARKER = "[*]"


@dataclass(frozen=True)
class Finding:
    """One diagnostic located in one file, as a front-end reports it."""

    path: str  # as shown to the user (relative to the working directory when possible)
    diagnostic: Diagnostic  # line 1-based, col 0-based characters
    fixable: bool = False  # `flake8-xla fix` can fix it (with --unsafe-fixes when not safe)


def docs_url(code: str) -> str:
    return DOCS_URL.format(code=code)


def render_text(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        d = f.diagnostic
        marker = f" {FIXABLE_MARKER}" if f.fixable else ""
        lines.append(f"{f.path}:{d.line}:{d.col + 1}: {d.code}{marker} {d.message}\n")
    return "".join(lines)


RENDERERS: Dict[str, Callable[[Sequence[Finding]], str]] = {"text": render_text}

__all__ = ["DOCS_URL", "FIXABLE_MARKER", "Finding", "RENDERERS", "docs_url", "render_text", "__version__"]
