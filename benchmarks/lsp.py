#!/usr/bin/env python3
"""Editor latency of `flake8-xla server`: from a `didChange` to the `publishDiagnostics` for that
version, on a 1,000-line torch_xla file (median of 20 edits, each one line).

Two files: `real`, the torch_xla file of the xla-dense corpus (benchmarks/run.py builds it) whose
length is nearest 1,000 lines, and `dense`, the bundled examples/train_old_api.py repeated to 1,000
lines (a diagnostic every few lines: the most a publish carries). The server runs as an editor
starts it (a subprocess on stdio, in this interpreter), the client is the test suite's
(tests/lsp_editor.py). The latency includes the server's pause after an edit
(flake8_xla.lsp.server.DEBOUNCE_SECONDS), which is reported alongside; `lint` is the same file
linted in-process (flake8_xla.session.running.run_file, best of 5) for comparison.

    python benchmarks/lsp.py [--edits 20]

Results: benchmarks/results/<date>-lsp.json and a markdown table on stdout.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(REPO / "tests"), str(BENCH)]

from lsp_editor import Editor  # noqa: E402 - the test suite's LSP client
from run import CORPORA, one_file_of  # noqa: E402 - the corpus and file choice of the main harness

from flake8_xla.config import Settings  # noqa: E402
from flake8_xla.session.running import Job, run_file  # noqa: E402
from flake8_xla.session.selection import build_selector  # noqa: E402
from flake8_xla.lsp.server import DEBOUNCE_SECONDS  # noqa: E402

LINES = 1000


def files() -> dict:
    out = {}
    corpus = pathlib.Path(CORPORA) / "xla-dense"
    chosen = one_file_of(str(corpus)) if corpus.is_dir() else None
    if chosen:
        out["real"] = (f"xla-dense/{chosen}", (corpus / chosen).read_text(encoding="utf-8"))
    else:
        print("note: no xla-dense corpus (run `python benchmarks/run.py` once to build it); `real` skipped",
              file=sys.stderr)
    example = (REPO / "examples" / "train_old_api.py").read_text(encoding="utf-8").splitlines(True)
    copies = LINES // len(example)  # whole copies (a cut one would not parse), then comment lines
    dense = example * copies + ["# padding\n"] * (LINES - copies * len(example))
    out["dense"] = (f"examples/train_old_api.py x{copies}", "".join(dense))
    return out


def lint_seconds(text: str, path: str) -> float:
    settings = Settings(target_version="2.9", base_dir=os.path.dirname(path))
    job = Job(settings, build_selector(settings), stdin_filename=path)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        run_file(job, "-", text=text)
        best = min(best, time.perf_counter() - start)
    return best


async def latencies(text: str, edits: int) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / ".flake8").write_text("[flake8]\nxla-target-version = 2.9\n")
        async with Editor(root) as editor:
            uri = editor.open("bench.py", text)
            first = len(await editor.diagnostics(uri, version=1))
            lines = text.splitlines(True)
            times = []
            for n in range(edits):  # one line changes: a comment added to a line in the middle
                edited = list(lines)
                middle = len(lines) // 2 + n
                edited[middle] = edited[middle].rstrip("\n") + f"  # edit {n}\n"
                start = time.perf_counter()
                editor.change(uri, "".join(edited))
                await editor.diagnostics(uri, version=n + 2)
                times.append(time.perf_counter() - start)
    return {"diagnostics": first, "seconds": times}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args(argv)
    result = {"date": datetime.date.today().isoformat(), "python": platform.python_version(),
              "cpus": os.cpu_count(), "debounce_seconds": DEBOUNCE_SECONDS, "edits": args.edits, "files": {}}
    for name, (origin, text) in files().items():
        measured = asyncio.run(latencies(text, args.edits))
        seconds = measured["seconds"]
        result["files"][name] = {
            "file": origin, "lines": text.count("\n"), "diagnostics": measured["diagnostics"],
            "median": statistics.median(seconds), "min": min(seconds), "max": max(seconds),
            "lint_in_process": lint_seconds(text, str(REPO / "bench.py")), "all": seconds}
    out = BENCH / "results" / f"{result['date']}-lsp.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"didChange -> publishDiagnostics, {args.edits} one-line edits, pause {DEBOUNCE_SECONDS * 1000:.0f} ms "
          f"included ({out.relative_to(REPO)}):\n")
    print("| file | lines | diagnostics | median ms | min ms | max ms | lint in-process ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, entry in result["files"].items():
        print(f"| {name}: {entry['file']} | {entry['lines']} | {entry['diagnostics']} | {entry['median'] * 1000:.0f} "
              f"| {entry['min'] * 1000:.0f} | {entry['max'] * 1000:.0f} | {entry['lint_in_process'] * 1000:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
