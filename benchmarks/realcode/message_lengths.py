#!/usr/bin/env python3
"""How long the first line of each diagnostic is on the real-code trees.

Reads the findings a sweep wrote (``sweep.py --out DIR``) and prints the distribution of message
lengths (the text after the code, as a terminal, an annotation or an editor squiggle shows it):
overall and per code, the median, the 90th percentile, the longest and the share within the budget.

    python benchmarks/realcode/message_lengths.py DIR [--budget 100] [--min-share 0.9]

Exit status 1 when fewer than --min-share of the findings fit the budget.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import statistics
import sys
from typing import Dict, List


def percentile(values: List[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="a sweep's --out directory")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--min-share", type=float, default=0.9)
    args = parser.parse_args(argv)
    by_code: Dict[str, List[int]] = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(args.out, "*.json"))):
        with open(path, encoding="utf-8") as f:
            for finding in json.load(f):
                by_code[finding["code"]].append(len(finding["message"].splitlines()[0]))
    every = [n for lengths in by_code.values() for n in lengths]
    if not every:
        print("no findings", file=sys.stderr)
        return 1
    share = sum(n <= args.budget for n in every) / len(every)
    print(f"{'code':8} {'count':>6} {'median':>6} {'p90':>5} {'max':>5} {'<=' + str(args.budget):>6}")
    for code in sorted(by_code):
        lengths = by_code[code]
        fit = sum(n <= args.budget for n in lengths) / len(lengths)
        print(f"{code:8} {len(lengths):6} {statistics.median(lengths):6.0f} {percentile(lengths, 0.9):5} "
              f"{max(lengths):5} {fit:6.0%}")
    print(f"{'all':8} {len(every):6} {statistics.median(every):6.0f} {percentile(every, 0.9):5} "
          f"{max(every):5} {share:6.0%}")
    return 0 if share >= args.min_share else 1


if __name__ == "__main__":
    sys.exit(main())
