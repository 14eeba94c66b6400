"""XLA4xx: checkpoints saved in a way that loses data or time on XLA."""
