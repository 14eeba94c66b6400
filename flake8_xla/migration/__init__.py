"""The way off torch_xla: what each torch_xla use becomes on TorchTPU (table, matching, fixes, the
XLA5xx rules' base), active under ``--migrate-to torchtpu``."""
