"""XLA5xx: what moving to TorchTPU changes (run with --migrate-to torchtpu), from the migration table."""
