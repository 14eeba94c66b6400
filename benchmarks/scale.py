"""How check and fix grow with input size (issue 12: nothing may be quadratic).

Generates three inputs at sizes N, 2N and 4N and times, in separate processes, `flake8-xla check`,
`flake8-xla fix --diff` and bare `flake8 --select E9,F63` (flake8's parse only, pyflakes' syntax
checks) on the same file, in the same run:

- ``diagnostics``: N lines of ``n = xm.xrt_world_size()`` (N diagnostics, N fixes);
- ``long``: a 2N-line module with one diagnostic at its end (a long file);
- ``markdown``: a Markdown guide whose one Python block has N lines and one diagnostic.

The growth exponent between sizes is log2(t(2N) / t(N)): about 1 is linear, 2 quadratic.

    python benchmarks/scale.py [--sizes 5000,10000,20000] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

IMPORT = "import torch_xla.core.xla_model as xm\n"


def diagnostics(n: int) -> str:
    return IMPORT + "n = xm.xrt_world_size()\n" * n


def long_module(n: int) -> str:
    return IMPORT + "".join(f"value_{i} = {i} * 2 + offset  # filler\n" for i in range(2 * n)) + "xm.mark_step()\n"


def markdown(n: int) -> str:
    body = "".join(f"y_{i} = {i}\n" for i in range(n))
    return f"# Guide\n\n```python\n{IMPORT}{body}xm.mark_step()\n```\n"


INPUTS: Dict[str, Callable[[int], str]] = {"diagnostics": diagnostics, "long": long_module, "markdown": markdown}


def timed(cmd: List[str], cwd: str) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1) or "Traceback" in result.stderr:
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return elapsed


def measure(sizes: List[int]) -> dict:
    out: dict = {"python": sys.version.split()[0], "sizes": sizes, "inputs": {}}
    cli = [sys.executable, "-m", "flake8_xla"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in INPUTS.items():
            rows = []
            for size in sizes:
                filename = "guide.md" if name == "markdown" else "big.py"
                with open(os.path.join(tmp, filename), "w", encoding="utf-8") as f:
                    f.write(make(size))
                row = {"size": size, "bytes": os.path.getsize(os.path.join(tmp, filename)),
                       "check": timed(cli + ["check", "--no-cache", "--isolated", "--include-docs", filename], tmp),
                       "fix": timed(cli + ["fix", "--diff", "--isolated", "--include-docs", filename], tmp)}
                if filename.endswith(".py"):
                    row["flake8_parse"] = timed([sys.executable, "-m", "flake8", "--isolated", "--select", "E9,F63",
                                                 filename], tmp)
                rows.append(row)
                print(name, json.dumps(row), flush=True)
            for before, after in zip(rows, rows[1:]):
                for key in ("check", "fix"):
                    after[f"{key}_growth"] = round(math.log2(after[key] / before[key]) /
                                                   math.log2(after["size"] / before["size"]), 2)
            out["inputs"][name] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,10000,20000")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    result = measure([int(s) for s in args.sizes.split(",")])
    text = json.dumps(result, indent=2)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
