"""XLA1xx: deprecated, removed, moved and changed torch_xla APIs, from the lifecycle table."""
