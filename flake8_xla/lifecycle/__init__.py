"""The torch_xla API lifecycle, a table on :mod:`flake8_xla.tables`: the typed table (``table``), matching
uses of its rows in a file (``matching``), the fixes the rows name (``fixes``) and the XLA1xx rules' base
and wording (``rules``)."""
