"""Where a cold lint's time goes: each fact's and each rule's own time over a tree, in one process.

    python benchmarks/fact_costs.py /work/bench-trees/pytorch-xla [--top 40] [--json OUT]

Runs ``flake8-xla check --no-cache -j 1 -q`` on the tree in this process, with two timers put in:
around ``FileContext.get`` when it builds a fact, and around each rule's ``check_fixable``. Times are
exclusive: a fact built while a rule (or another fact) runs is charged to itself, not to its asker.
What a fact computes lazily after it is built (memoized queries) is charged to whoever asks first,
usually a rule. The rest of the run (start-up, reading, parsing, the project index, output) is the
``other`` line. Timers add about 1 µs per call: compare runs of this script with each other, and
whole runs with benchmarks/startup.py.
"""
from __future__ import annotations

import argparse
import collections
import json
import runpy
import sys
import time
from typing import Dict, List


class Ledger:
    """Exclusive time per label: a stack of open timers, each one's children subtracted."""

    def __init__(self) -> None:
        self.own: Dict[str, float] = collections.Counter()
        self.calls: Dict[str, int] = collections.Counter()
        self._open: List[list] = []

    def enter(self, label: str) -> None:
        self._open.append([label, time.perf_counter(), 0.0])

    def leave(self) -> None:
        label, start, children = self._open.pop()
        spent = time.perf_counter() - start
        self.own[label] += spent - children
        self.calls[label] += 1
        if self._open:
            self._open[-1][2] += spent


def instrument(ledger: Ledger) -> None:
    from flake8_xla import engine, rule

    build = rule.FileContext.get

    def get(ctx, kind):
        if kind in ctx._facts:
            return ctx._facts[kind]
        ledger.enter(f"fact {kind.__module__.replace('flake8_xla.', '')}.{kind.__name__}")
        try:
            return build(ctx, kind)
        finally:
            ledger.leave()

    rule.FileContext.get = get
    selected = engine.runs_for

    def runs_for(target, rules):
        for chosen in selected(target, rules):
            yield _Timed(chosen, ledger)

    engine.runs_for = runs_for


class _Timed:
    """A rule whose check_fixable runs (to the end) under a timer."""

    def __init__(self, rule, ledger: Ledger) -> None:
        self._rule, self._ledger = rule, ledger

    def __getattr__(self, name):
        return getattr(self._rule, name)

    def check_fixable(self, ctx):
        self._ledger.enter(f"rule {self._rule.code}")
        try:
            return list(self._rule.check_fixable(ctx))
        finally:
            self._ledger.leave()

    def no_fix_reason(self) -> str:
        return self._rule.no_fix_reason()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--json", help="write every label's time and calls here")
    args = ap.parse_args()
    ledger = Ledger()
    instrument(ledger)
    sys.argv = ["flake8-xla", "check", "--no-cache", "-j", "1", "-q", args.tree]
    start = time.perf_counter()
    try:
        runpy.run_module("flake8_xla", run_name="__main__")
    except SystemExit:
        pass
    total = time.perf_counter() - start
    ledger.own["other"] = total - sum(ledger.own.values())
    ranked = sorted(ledger.own.items(), key=lambda item: -item[1])
    print(f"total {total:.2f} s (one process, -j 1)")
    for label, spent in ranked[:args.top]:
        print(f"{spent:8.3f} s {100 * spent / total:5.1f}% {ledger.calls.get(label, 0):6d}  {label}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"tree": args.tree, "total": total,
                       "labels": {label: {"seconds": spent, "calls": ledger.calls.get(label, 0)}
                                  for label, spent in ranked}}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
