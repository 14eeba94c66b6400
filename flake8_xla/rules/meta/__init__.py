"""XLA0xx: findings about flake8-xla's own comments (unused noqa)."""
