"""XLA3xx: code that breaks, syncs or recompiles the lazy XLA graph (wording.py: their shared wording)."""
