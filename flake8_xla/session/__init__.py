"""What every front-end does between the user and the engine: the CLI, the language server and the
flake8 plugin import this layer (and ``output``), never each other. ``selection`` (which codes
are reported for which file), ``sources`` (safe reads, decoding), ``running`` (a file job: target,
check, fix, add-noqa; many files in worker processes), ``writing`` (fixed files written back),
``adding_noqa``, ``cache`` (the result cache) and ``project_index`` (the other modules of a
file's project)."""
