"""XLA9xx: opt-in heuristics, worth a look but often fine."""
