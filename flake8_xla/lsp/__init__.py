"""The language server front-end (``flake8-xla server``): the CLI's engine, configuration and
fixes behind LSP. ``buffers`` (an open buffer in the CLI's terms), ``settings`` (project
configuration under the editor's settings), ``server`` (the LSP features, on pygls),
``transport`` (framing and JSON-RPC errors on stdio)."""
