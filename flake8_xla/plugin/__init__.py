"""The flake8 front-end: the checkers flake8 runs (``checker``, entry points ``XLA`` and ``XLA9``)
and the report formatters it writes with (``formatters``, ``--format=xla-json`` / ``xla-sarif``),
which learn a diagnostic's fix applicability from its text (``fix_mark``)."""
