"""How a diagnostic's fix applicability crosses flake8: flake8 hands a report formatter only the
text of a violation (the only thing it carries back from its worker processes), so the checker
writes the applicability into the text as a mark and the formatter takes it out again. Only with
one of FIX_REPORTING_FORMATS does the checker build the fixes and mark; plain flake8 runs never do.
"""
from __future__ import annotations

from typing import Optional, Tuple

from ..rule import Applicability

# the formatters (flake8_xla.plugin.formatters) that report whether `flake8-xla fix` fixes a diagnostic
FIX_REPORTING_FORMATS = frozenset({"xla-json", "xla-sarif"})
# `XLA102 [*] message` is the CLI's text form of a safe fix; an unsafe one has a mark of its own
_MARKS = {"safe": "[*] ", "unsafe": "[~] "}


def marked(message: str, applicability: Optional[Applicability]) -> str:
    """The message with its applicability's mark in front (none without a fix)."""
    return _MARKS[applicability] + message if applicability else message


def unmarked(code: str, text: str) -> Tuple[str, Optional[Applicability]]:
    """The message and the applicability :func:`marked` wrote into ``text``. Another plugin's text
    is taken as it is."""
    if code.startswith("XLA"):
        for applicability, mark in _MARKS.items():
            if text.startswith(mark):
                return text[len(mark):], applicability  # type: ignore[return-value]
    return text, None


__all__ = ["FIX_REPORTING_FORMATS", "marked", "unmarked"]
