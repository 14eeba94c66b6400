"""flake8 report formatters that write one JSON or SARIF document for the whole run.

    flake8 --format=xla-json ...
    flake8 --format=xla-sarif --output-file=flake8.sarif ...

They cover every code flake8 reports (pycodestyle, pyflakes and other plugins too), not only XLA ones.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Callable, ClassVar, Iterator, List, Optional, Sequence

from flake8.formatting.base import BaseFormatter
from flake8.statistics import Statistics
from flake8.violation import Violation

from ..output.formats import Finding, render_json, render_sarif
from ..rule import Diagnostic
from .fix_mark import unmarked


def finding_from_violation(error: Violation) -> Finding:
    # flake8 columns are 1-based, Diagnostic columns 0-based. `fixable` means what it means in
    # `flake8-xla check`: `flake8-xla fix` (without --unsafe-fixes) fixes it.
    text, applicability = unmarked(error.code, error.text)
    diagnostic = Diagnostic(error.line_number, max(error.column_number - 1, 0), error.code, text,
                            applicability=applicability)
    return Finding(error.filename, diagnostic)


class _DocumentFormatter(BaseFormatter):
    """Collects every violation and writes one document when flake8 stops reporting.

    The document is the only thing these formatters write to the output, so that it always parses:
    source lines (--show-source) are left out and statistics and benchmarks go to stderr.
    """

    render: ClassVar[Callable[[Sequence[Finding]], str]]

    def after_init(self) -> None:
        self.findings: List[Finding] = []
        self._stderr_only = False

    def start(self) -> None:
        super().start()
        # flake8 opens --output-file for appending, which suits lines but would put a second document
        # after the first: a document replaces what the file held.
        if self.output_fd is not None:
            self.output_fd.truncate(0)

    def handle(self, error: Violation) -> None:
        self.findings.append(finding_from_violation(error))

    def format(self, error: Violation) -> Optional[str]:
        return None  # handle() collects instead; nothing is written per violation

    def show_source(self, error: Violation) -> Optional[str]:
        return None

    def show_statistics(self, statistics: Statistics) -> None:
        # flake8 keeps each code's first text, which may carry the checker's fix mark
        for code in statistics.error_codes():
            for statistic in statistics.statistics_for(code):
                statistic.message, _ = unmarked(code, statistic.message)
        with self._writing_to_stderr():
            super().show_statistics(statistics)

    def show_benchmarks(self, benchmarks: list) -> None:
        with self._writing_to_stderr():
            super().show_benchmarks(benchmarks)

    @contextlib.contextmanager
    def _writing_to_stderr(self) -> Iterator[None]:
        self._stderr_only = True
        try:
            yield
        finally:
            self._stderr_only = False

    def _write(self, output: str) -> None:
        if self._stderr_only:
            print(output, file=sys.stderr)
        else:
            super()._write(output)

    def stop(self) -> None:
        # Renderers end the document with a newline and _write adds one.
        self._write(self.render(self.findings).rstrip("\n"))
        super().stop()


class JsonFormatter(_DocumentFormatter):
    """``--format=xla-json``: a JSON array of findings (see :func:`flake8_xla.output.formats.render_json`)."""

    render = staticmethod(render_json)


class SarifFormatter(_DocumentFormatter):
    """``--format=xla-sarif``: a SARIF 2.1.0 log (see :func:`flake8_xla.output.formats.render_sarif`)."""

    render = staticmethod(render_sarif)

    def handle(self, error: Violation) -> None:
        # the line its fingerprint hashes, read as flake8 reads it for `# noqa` (flake8's own
        # physical_line is the whole statement for one that spans lines)
        import linecache

        line = linecache.getline(error.filename, error.line_number)
        self.findings.append(finding_from_violation(error)._replace(source_line=line or None))


__all__ = ["JsonFormatter", "SarifFormatter", "finding_from_violation"]
