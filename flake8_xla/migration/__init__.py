"""The way off torch_xla, a table on :mod:`flake8_xla.tables`: what each torch_xla use becomes on TorchTPU
(table, matching, fixes, the XLA5xx rules' base), active under ``--migrate-to torchtpu``."""
