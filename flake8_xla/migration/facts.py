"""What an XLA5xx diagnostic carries for ``flake8-xla migrate-report`` (``Diagnostic.data``), so that the
report never parses a message: the message is one short clause, the report lists the full advice."""
from __future__ import annotations

from typing import NamedTuple

MECHANICAL, MANUAL, CHECK = "mechanical", "needs a human", "availability check"


class MigrationFacts(NamedTuple):
    api: str  # as written: "xm.mark_step()", "environment variable PJRT_DEVICE", "import of torch_xla"
    rewrite: str  # MECHANICAL, MANUAL or CHECK (a test of torch_xla's presence, XLA504)
    advice: str  # what it becomes in full, and for a human's rewrite "; needs a human[: why]"
