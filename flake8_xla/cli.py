"""The standalone front-end: `flake8-xla check|fix|explain|rules` (work in progress)."""
from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    print("flake8-xla: the standalone CLI is being built", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
