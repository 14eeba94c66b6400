"""XLA6xx: mistakes users report on XLA that run without an error."""
