#!/usr/bin/env python3
"""Memory of `flake8-xla server` over a long editing session: the server's resident set size
(VmRSS, Linux) after 0, N, 2N, ... `didChange` notifications to one open file, each waited for
until its diagnostics are published. Reported: the RSS at each step and the growth per change over
the second half (after the first N changes warmed caches and the allocator).

    python benchmarks/lsp_memory.py [--changes 2000] [--steps 4]

Results: benchmarks/results/<date>-lsp-memory.json and a markdown table on stdout. To compare with
another revision, run it with that revision's tree first on PYTHONPATH.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import pathlib
import platform
import subprocess
import sys
import tempfile

BENCH = pathlib.Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(REPO / "tests")]

from lsp_editor import Editor  # noqa: E402 - the test suite's LSP client

TEXT = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\nfor step in range(10):\n    xm.mark_step()\n"


def rss_kib(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS (not Linux?)")


async def measure(changes: int, steps: int) -> list:
    with tempfile.TemporaryDirectory() as root:
        (pathlib.Path(root) / ".flake8").write_text("[flake8]\nxla-target-version = 2.9\n")
        async with Editor(pathlib.Path(root)) as editor:
            uri = editor.open("train.py", TEXT)
            await editor.diagnostics(uri, version=1)
            points = [(0, rss_kib(editor.process.pid))]
            for step in range(1, steps + 1):
                for number in range(changes):
                    editor.change(uri, TEXT + f"# edit {number}\n")
                await editor.diagnostics(uri, version=editor.versions[uri])
                points.append((step * changes, rss_kib(editor.process.pid)))
            return points


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=2000, help="changes per step")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    points = asyncio.run(measure(args.changes, args.steps))
    half = len(points) // 2
    per_change = (points[-1][1] - points[half][1]) * 1024 / (points[-1][0] - points[half][0])
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip()
    import flake8_xla
    record = {"date": datetime.date.today().isoformat(), "revision": revision,
              "flake8_xla": str(pathlib.Path(flake8_xla.__file__).parent), "python": platform.python_version(),
              "changes_per_step": args.changes, "rss_kib": points, "bytes_per_change_second_half": round(per_change)}
    out = BENCH / "results" / f"{record['date']}-lsp-memory.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print("| changes | RSS (MiB) |\n|---:|---:|")
    for count, kib in points:
        print(f"| {count} | {kib / 1024:.1f} |")
    print(f"\ngrowth over the second half: {per_change:.0f} bytes per change ({record['flake8_xla']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
