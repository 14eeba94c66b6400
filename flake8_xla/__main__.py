"""`python -m flake8_xla` runs the standalone CLI."""
import sys

from .cli import main

sys.exit(main())
