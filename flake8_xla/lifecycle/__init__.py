"""The torch_xla API lifecycle: the typed table (``table``), matching uses of its rows in a
file (``matching``) and the mechanical fixes the rows name (``fixes``)."""
