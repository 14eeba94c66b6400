#!/usr/bin/env python3
"""Two commits of flake8-xla on one tree, in the same run: `flake8-xla check` cold (`--no-cache`)
and warm (its result cache filled by one earlier run), rounds alternating between the commits so
machine noise falls on both alike.

    python benchmarks/revs.py /work/bench-trees/pytorch-xla 743ddf2 HEAD --rounds 7 -j 1

Each commit's `flake8_xla/` and `rules/` are exported with `git archive` into a temporary
directory put first on PYTHONPATH (the installed dependencies are shared). Prints the median and
minimum wall seconds per commit and mode and the ratio of the medians (second / first), and
writes them as JSON with `--out`. The diagnostics of the two commits are counted, not compared.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export(rev: str) -> str:
    sha = subprocess.run(["git", "rev-parse", rev], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    where = tempfile.mkdtemp(prefix=f"revs-{sha[:8]}-")
    tar = subprocess.run(["git", "archive", sha, "flake8_xla", "rules"], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", where], input=tar.stdout, check=True)
    return where


def timed(src: str, tree: str, args: List[str]) -> tuple:
    env = dict(os.environ, PYTHONPATH=src)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "flake8_xla", "check", "--isolated", "--exit-zero",
                           "--format", "json", *args, "."], cwd=tree, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"flake8-xla failed in {tree}: {proc.stderr[-2000:]}")
    return elapsed, len(json.loads(proc.stdout or "[]"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("base")
    ap.add_argument("head")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("-j", "--jobs", default="1")
    ap.add_argument("--out")
    args = ap.parse_args()
    revs = {args.base: export(args.base), args.head: export(args.head)}
    caches = {rev: tempfile.mkdtemp(prefix="revs-cache-") for rev in revs}
    found: Dict[str, int] = {}
    times: Dict[str, Dict[str, List[float]]] = {rev: {"cold": [], "warm": []} for rev in revs}
    for rev, src in revs.items():  # warm-up: imports compiled, the result caches filled
        timed(src, args.tree, ["--no-cache", "-j", args.jobs])
        _, found[rev] = timed(src, args.tree, ["--cache-dir", caches[rev], "-j", args.jobs])
    for _ in range(args.rounds):
        for rev, src in revs.items():
            times[rev]["cold"].append(timed(src, args.tree, ["--no-cache", "-j", args.jobs])[0])
            times[rev]["warm"].append(timed(src, args.tree, ["--cache-dir", caches[rev], "-j", args.jobs])[0])
    report = {"tree": args.tree, "jobs": args.jobs, "rounds": args.rounds, "diagnostics": found, "seconds": times}
    for mode in ("cold", "warm"):
        medians = {rev: statistics.median(times[rev][mode]) for rev in revs}
        for rev in revs:
            print(f"{mode} {rev}: median {medians[rev]:.3f} s, min {min(times[rev][mode]):.3f} s "
                  f"({found[rev]} diagnostics)")
        ratio = medians[args.head] / medians[args.base]
        report[f"{mode}_ratio"] = ratio
        print(f"{mode} {args.head} / {args.base}: {ratio:.3f}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
