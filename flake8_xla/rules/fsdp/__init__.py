"""XLA2xx: FSDP and SPMD wrapped or used the way that fails on XLA."""
