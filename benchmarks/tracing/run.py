"""Runnable-scripts harness: trace real torch_xla training and evaluation scripts for a few steps on the
CPU, and measure the static graph rules (XLA3) against what the runs saw.

    python benchmarks/tracing/run.py [--install] [--out DIR] [--trees DIR] [NAME ...]

Each ``scripts/NAME.json`` names a public repository at a pinned commit, the files to extract from its
git mirror (``$MIRRORS/OWNER+NAME/repo``, as the ``fetch`` tool and benchmarks/realcode/fetch.sh leave
them), the script with the arguments that make it small, the shims it needs (modules of ``shims/``, loaded at
start-up by ``shims/sitecustomize.py``: each swaps a dataset download for synthetic data, stubs a logging
service or restores a removed API, and says what it replaces and why), whether to migrate it first with
``flake8-xla fix`` (scripts written for older releases call APIs torch_xla 2.9 removed), and the packages
it needs beyond torch and torch_xla (``--install`` pip-installs them). Nothing of the repositories is
committed.

Per script it runs ``python -m xla_compat.trace --steps N --format json`` in the script's directory,
then ``flake8-xla check --select XLA3 --trace`` on every file of the tree that the run executed, and
prints a table: static findings the run confirmed, static findings on lines that ran without a sync
(likely false alarms), run warnings of the static rules' codes that they missed, run warnings only a
run can give (XLA309, XLA310), and the static findings on lines the run never reached. ``--out`` keeps every trace, check report and log. ``--overhead ROUNDS`` times each script
plain and traced instead (the trace's cost, in alternating pairs).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MIRRORS = Path(os.environ.get("MIRRORS", "/work/.mirror"))
GRAPH_CODES = ("XLA301", "XLA302", "XLA303", "XLA304", "XLA307")


def entries(names: List[str]) -> List[dict]:
    found = []
    for path in sorted((HERE / "scripts").glob("*.json")):
        entry = json.loads(path.read_text())
        entry.setdefault("name", path.stem)
        if not names or entry["name"] in names:
            found.append(entry)
    return found


def extract(entry: dict, trees: Path) -> Path:
    dest = trees / entry["name"]
    if dest.exists():
        return dest
    gitdir = MIRRORS / entry["repo"].replace("/", "+") / "repo"
    if (gitdir / ".git").is_dir():
        gitdir = gitdir / ".git"
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", f"--git-dir={gitdir}", "archive", entry["commit"], "--", *entry["paths"]],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def migrate(entry: dict, tree: Path, out: Path) -> None:
    """``flake8-xla fix`` on the tree once: scripts written for torch_xla 2.1-2.6 call APIs that 2.9
    removed (``xm.xrt_world_size``), and the fixes are what make them run here."""
    marker = tree / ".migrated"
    if marker.exists() or not entry.get("migrate"):
        return
    done = subprocess.run([sys.executable, "-m", "flake8_xla", "fix", "--no-cache", *entry.get("migrate_options", []),
                           "."], cwd=tree, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                          text=True)
    (out / f"{entry['name']}.fix.log").write_text(done.stdout + done.stderr)
    marker.write_text(done.stdout + done.stderr)


def run_one(entry: dict, trees: Path, out: Path) -> dict:
    tree = extract(entry, trees)
    migrate(entry, tree, out)
    script = tree / entry["script"]
    cwd = tree / entry.get("cwd", os.path.dirname(entry["script"]))
    env = dict(os.environ, PJRT_DEVICE="CPU", TRACE_SHIMS=",".join(entry.get("shims", [])), PYTHONPATH=os.pathsep.join(
        [str(HERE / "shims")] + [str(tree / p) for p in entry.get("pythonpath", [])] + [str(REPO)]),
        **entry.get("env", {}))
    trace_file = out / f"{entry['name']}.trace.json"
    command = [sys.executable, "-m", "xla_compat.trace", "--steps", str(entry.get("steps", 5)),
               "--warmup", str(entry.get("warmup", 2)), "--format", "json", "--output", str(trace_file),
               "--project-root", str(tree), str(script), *entry.get("args", [])]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=entry.get("timeout", 900))
    seconds = time.perf_counter() - start
    (out / f"{entry['name']}.log").write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    row = {"name": entry["name"], "status": done.returncode, "seconds": round(seconds, 1)}
    if not trace_file.exists():
        return dict(row, error="no trace written")
    document = json.loads(trace_file.read_text())
    row["steps"] = document.get("steps", 0)
    ran_files = sorted(set(document["lines_ran"]) | {f["path"] for f in document["findings"]})
    ran_files = [f for f in ran_files if f.startswith(str(tree)) and f.endswith(".py")]
    report = out / f"{entry['name']}.check.json"
    check = subprocess.run([sys.executable, "-m", "flake8_xla", "check", "--no-cache", "--exit-zero", "--select",
                            ",".join(GRAPH_CODES + ("XLA309", "XLA310")), "--format", "json", "--output-file",
                            str(report), "--trace", str(trace_file), *ran_files],
                           cwd=tree, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True)
    if check.returncode not in (0, 1):
        return dict(row, error=f"check failed: {check.stderr.strip()[-300:]}")
    records = json.loads(report.read_text())
    row.update(_counts(records, document))
    return row


def overhead(entry: dict, trees: Path, rounds: int) -> dict:
    """Wall time of the whole script, plain and traced (no --steps: both run to the end), alternating
    so that both see the same machine; the medians and their ratio."""
    import statistics

    tree = extract(entry, trees)
    script = tree / entry["script"]
    cwd = tree / entry.get("cwd", os.path.dirname(entry["script"]))
    env = dict(os.environ, PJRT_DEVICE="CPU", TRACE_SHIMS=",".join(entry.get("shims", [])), PYTHONPATH=os.pathsep.join(
        [str(HERE / "shims")] + [str(tree / p) for p in entry.get("pythonpath", [])] + [str(REPO)]),
        **entry.get("env", {}))
    args = [str(script), *entry.get("args", [])]
    commands = {"plain": [sys.executable, *args],
                "traced": [sys.executable, "-m", "xla_compat.trace", "--output", os.devnull,
                           "--project-root", str(tree), *args]}
    times: Dict[str, List[float]] = {"plain": [], "traced": []}
    for _ in range(rounds):
        for kind, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True, timeout=entry.get("timeout", 900))
            times[kind].append(time.perf_counter() - start)
    plain, traced = statistics.median(times["plain"]), statistics.median(times["traced"])
    return {"name": entry["name"], "plain_s": round(plain, 2), "traced_s": round(traced, 2),
            "ratio": round(traced / plain, 3)}


def _counts(records: List[dict], document: dict) -> Dict[str, int]:
    """What check --trace said, by kind; run-only findings split into misses of the static rules
    (their codes) and what only a run can show (XLA309 recompiles, XLA310 reads inside libraries)."""
    counts = {"confirmed": 0, "ran_clean": 0, "missed": 0, "run_only": 0, "not_reached": 0}
    for record in records:
        message = record["message"]
        if message.endswith("[confirmed by the trace]"):
            counts["confirmed"] += 1
        elif message.endswith("likely a false alarm]"):
            counts["ran_clean"] += 1
        elif message.endswith("[seen only by the trace]"):
            counts["missed" if record["code"] in GRAPH_CODES else "run_only"] += 1
        elif record["code"] in GRAPH_CODES:
            counts["not_reached"] += 1
    counts["trace_warnings"] = sum(1 for f in document["findings"] if f["severity"] == "warning")
    return counts


COLUMNS = ("name", "status", "seconds", "steps", "trace_warnings", "confirmed", "ran_clean", "missed", "run_only",
           "not_reached")


def table(rows: List[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " | error |", "|" + "---|" * (len(COLUMNS) + 1)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + f" | {row.get('error', '')} |")
    total = {c: sum(r.get(c, 0) for r in rows) for c in ("confirmed", "ran_clean", "missed")}
    static = total["confirmed"] + total["ran_clean"]
    seen = total["confirmed"] + total["missed"]
    lines.append("")
    lines.append(f"Static XLA3 precision on executed lines: {total['confirmed']}/{static}"
                 + (f" = {total['confirmed'] / static:.2f}" if static else ""))
    lines.append(f"Static XLA3 recall of what the runs saw: {total['confirmed']}/{seen}"
                 + (f" = {total['confirmed'] / seen:.2f}" if seen else ""))
    return "\n".join(lines) + "\n"


def install(entries_: List[dict]) -> None:
    needs = sorted({p for e in entries_ for p in e.get("pip", [])})
    if needs:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *needs], check=True)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="scripts/NAME.json entries to run (default: all)")
    parser.add_argument("--trees", default="/work/trace-trees", help="where the repositories are extracted")
    parser.add_argument("--out", help="keep traces, reports and logs here (default: a temporary directory)")
    parser.add_argument("--install", action="store_true", help="pip-install the packages the scripts need")
    parser.add_argument("--overhead", type=int, metavar="ROUNDS",
                        help="instead: time each script plain and traced, ROUNDS alternating pairs")
    args = parser.parse_args(argv)
    chosen = entries(args.names)
    if args.install:
        install(chosen)
    if args.overhead:
        for entry in chosen:
            print(json.dumps(overhead(entry, Path(args.trees), args.overhead)), flush=True)
        return 0
    out = Path(args.out or tempfile.mkdtemp(prefix="trace-harness-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for entry in chosen:
        try:
            rows.append(run_one(entry, Path(args.trees), out))
        except subprocess.TimeoutExpired:
            rows.append({"name": entry["name"], "error": "timed out"})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    sys.stdout.write(table(rows))
    print(f"traces, reports and logs: {out}", file=sys.stderr)
    return 0 if all(r.get("status") == 0 and "error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
