#!/usr/bin/env python3
"""What one `flake8-xla check` costs before it lints anything, against `python -c pass` and ruff.

    python benchmarks/startup.py                        # the defaults below, 15 rounds
    python benchmarks/startup.py FILE --tree DIR --rounds 21 --out results/x.json
    python benchmarks/startup.py --rev HEAD~3 --worktree   # two versions side by side

Whole processes, each command once per round, the order reversed every other round (ABBA) so
machine noise falls on all alike, after one warm-up round (it writes the .pyc files and fills the
result caches). Per command: median and minimum wall seconds and median CPU seconds (user + sys of
the process and its children, from wait4); ratios of medians against `python -c pass` (one file)
and against ruff (the tree). Commands, all with default options (so the result cache is on unless
`--no-cache` is named):

* `pass`: `python -c pass`, the interpreter's own start;
* `file warm`: `flake8-xla check FILE` with its result cache filled (the file is not linted; each
  version and command keeps its cache in a temporary `--cache-dir`, since a run deletes the results
  files of other builds);
* `file cold`: `flake8-xla check --no-cache FILE`;
* `ruff file`: `ruff check --select ALL FILE`, when ruff is installed (next to python or on PATH);
* with a tree: `tree cold` `flake8-xla check --no-cache .` and `ruff tree cold` `ruff check --select ALL
  --no-cache .`; `tree warm` and `ruff tree warm` the same with their caches.

FILE defaults to the `.py` file of the tree that names torch_xla and is nearest 380 lines (issue 37's
example); the tree defaults to /work/bench-trees/pytorch-xla (extract it with
`git --git-dir=/work/.mirror/pytorch+xla/repo archive HEAD | tar -x -C /work/bench-trees/pytorch-xla`).
Each command runs in the tree (FILE's directory without one), as a user runs it in their project.

PYTHONDONTWRITEBYTECODE is removed from the children's environment (`--keep-env` keeps it): with it
and an editable install no .pyc exists for flake8_xla and every run compiles its modules, which no
installed user pays. Versions: the installed package (`installed`), or instead, `--rev REV` (that
commit's `flake8_xla/` and `rules/`, git archive; repeatable), `--worktree` (a frozen copy of the
work tree's) and `--source DIR` (a directory holding them), each put first on PYTHONPATH, so several
versions are timed in the same rounds.

The warm one-file run is also run once under `python -X importtime`: the modules it imports and
their cost are in the JSON (`imports`), the costliest printed, so the report says where the time goes.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TREE = "/work/bench-trees/pytorch-xla"
EXAMPLE_LINES = 380


def nearest_file(tree: str, lines: int = EXAMPLE_LINES) -> Optional[str]:
    """The tree's .py file naming torch_xla whose length is nearest ``lines`` (ties: path order)."""
    best: Optional[Tuple[int, str]] = None
    for directory, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if "torch_xla" in text:
                candidate = (abs(text.count("\n") - lines), os.path.relpath(path, tree))
                best = candidate if best is None or candidate < best else best
    return None if best is None else os.path.join(tree, best[1])


def find_tool(name: str) -> Optional[str]:
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.access(beside, os.X_OK) else shutil.which(name)


def export_rev(rev: str) -> Tuple[str, str]:
    sha = subprocess.run(["git", "rev-parse", rev], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    where = tempfile.mkdtemp(prefix=f"startup-{sha[:8]}-")
    tar = subprocess.run(["git", "archive", sha, "flake8_xla", "rules"], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", where], input=tar.stdout, check=True)
    return sha[:10], where


def copy_worktree() -> str:
    """The work tree's sources frozen: other edits during the run change neither the code timed nor
    its fingerprint (which would empty the result cache)."""
    where = tempfile.mkdtemp(prefix="startup-worktree-")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("flake8_xla", "rules"):
        shutil.copytree(os.path.join(REPO, part), os.path.join(where, part), ignore=ignore)
    return where


def run_once(argv: List[str], cwd: str, env: Dict[str, str]) -> Tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + sys, children included) and exit status of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def import_profile(argv: List[str], cwd: str, env: Dict[str, str]) -> dict:
    """``python -X importtime`` of one run: every module's own and cumulative microseconds."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True)
    modules = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        own, cumulative, name = line[len("import time:"):].split("|", 2)
        if own.strip().isdigit():  # not the header line
            modules.append({"module": name.strip(), "own_us": int(own), "cumulative_us": int(cumulative),
                            "depth": (len(name) - len(name.lstrip()) - 1) // 2})
    ours = [m for m in modules if m["module"].split(".")[0] == "flake8_xla"]
    return {
        "total_us": sum(m["own_us"] for m in modules),
        "flake8_xla_own_us": sum(m["own_us"] for m in ours),
        "flake8_xla_modules": [m["module"] for m in ours],
        "modules": modules,
    }


def summary(samples: List[Tuple[float, float, int]]) -> dict:
    walls = [s[0] for s in samples]
    cpus = [s[1] for s in samples]
    return {"wall_median": statistics.median(walls), "wall_min": min(walls), "cpu_median": statistics.median(cpus),
            "cpu_min": min(cpus), "wall": walls, "cpu": cpus, "exit": sorted({s[2] for s in samples})}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", help="the one file (default: the tree's torch_xla file nearest 380 lines)")
    ap.add_argument("--tree", default=DEFAULT_TREE if os.path.isdir(DEFAULT_TREE) else None,
                    help=f"the tree of the tree commands (default: {DEFAULT_TREE} when present)")
    ap.add_argument("--no-tree", action="store_true", help="time the one file only")
    ap.add_argument("--rounds", type=int, default=15, help="timed rounds after the warm-up round")
    ap.add_argument("--rev", action="append", default=[],
                    help="time this commit's sources instead of the installed package (repeatable)")
    ap.add_argument("--worktree", action="store_true",
                    help="time a frozen copy of the work tree's sources instead of the installed package")
    ap.add_argument("--source", action="append", default=[], metavar="DIR",
                    help="time the flake8_xla/ and rules/ in DIR instead of the installed package (repeatable)")
    ap.add_argument("--keep-env", action="store_true", help="keep PYTHONDONTWRITEBYTECODE if it is set")
    ap.add_argument("--out", help="write every sample and the import profile as JSON here")
    args = ap.parse_args(argv)

    tree = None if args.no_tree else args.tree
    file = os.path.abspath(args.file) if args.file else (nearest_file(args.tree) if args.tree else None)
    if file is None:
        ap.error("name a FILE, or a --tree holding a .py file that names torch_xla")
    inside = args.tree and os.path.abspath(file).startswith(os.path.abspath(args.tree) + os.sep)
    cwd = args.tree if inside else os.path.dirname(file)
    script = find_tool("flake8-xla")
    if script is None:
        ap.error("no flake8-xla console script next to this python or on PATH")
    ruff = find_tool("ruff")

    env = dict(os.environ)
    if not args.keep_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    versions: Dict[str, Dict[str, str]] = {} if args.rev or args.worktree or args.source else {"installed": env}
    for where in args.source:
        versions[os.path.basename(os.path.normpath(where))] = dict(env, PYTHONPATH=os.path.abspath(where))
    temporary: List[str] = []  # removed at the end: exported sources, result caches
    for rev in args.rev:
        label, where = export_rev(rev)
        temporary.append(where)
        versions[label] = dict(env, PYTHONPATH=where)
    if args.worktree:
        temporary.append(copy_worktree())
        versions["worktree"] = dict(env, PYTHONPATH=temporary[-1])

    relative = os.path.relpath(file, cwd)
    # a result cache per version and command: a run deletes the results files of other builds
    caches = tempfile.mkdtemp(prefix="startup-caches-")
    temporary.append(caches)
    commands: List[Tuple[str, List[str], Dict[str, str], str]] = [("pass", [sys.executable, "-c", "pass"], env, cwd)]
    for label, venv in versions.items():
        suffix = "" if len(versions) == 1 else f" [{label}]"
        cache = ["--cache-dir", os.path.join(caches, f"file-{label}")]
        commands.append((f"file warm{suffix}", [script, "check", *cache, relative], venv, cwd))
        commands.append((f"file cold{suffix}", [script, "check", "--no-cache", relative], venv, cwd))
    if ruff:
        commands.append(("ruff file", [ruff, "check", "--select", "ALL", relative], env, cwd))
    if tree:
        for label, venv in versions.items():
            suffix = "" if len(versions) == 1 else f" [{label}]"
            commands.append((f"tree cold{suffix}", [script, "check", "--no-cache", "."], venv, tree))
            cache = ["--cache-dir", os.path.join(caches, f"tree-{label}")]
            commands.append((f"tree warm{suffix}", [script, "check", *cache, "."], venv, tree))
        if ruff:
            commands.append(("ruff tree cold", [ruff, "check", "--select", "ALL", "--no-cache", "."], env, tree))
            commands.append(("ruff tree warm", [ruff, "check", "--select", "ALL", "."], env, tree))

    with open(file, "rb") as f:
        lines = f.read().count(b"\n")
    print(f"file: {file} ({lines} lines); tree: {tree}; cwd: {cwd}", file=sys.stderr)
    for name, cmd, venv, where in commands:  # warm-up: .pyc written, result caches filled
        run_once(cmd, where, venv)
    samples: Dict[str, List[Tuple[float, float, int]]] = {name: [] for name, *_ in commands}
    for round_ in range(args.rounds):
        order = commands if round_ % 2 == 0 else commands[::-1]
        for name, cmd, venv, where in order:
            samples[name].append(run_once(cmd, where, venv))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)

    results = {name: summary(values) for name, values in samples.items()}
    imports = {label: import_profile([script, "check", "--cache-dir", os.path.join(caches, f"file-{label}"), relative],
                                     cwd, venv) for label, venv in versions.items()}
    ratios: Dict[str, float] = {}
    for name in results:
        if name.startswith("file "):
            ratios[f"{name} / pass"] = results[name]["wall_median"] / results["pass"]["wall_median"]
            ratios[f"{name} / pass (cpu)"] = results[name]["cpu_median"] / results["pass"]["cpu_median"]
        if name.startswith("tree ") and ruff:
            mode = name.split()[1]
            ruff_result = results[f"ruff tree {mode}"]
            ratios[f"{name} / ruff tree {mode}"] = results[name]["wall_median"] / ruff_result["wall_median"]
            ratios[f"{name} / ruff tree {mode} (cpu)"] = results[name]["cpu_median"] / ruff_result["cpu_median"]

    width = max(len(name) for name in results)
    print(f"{'command':<{width}}  wall median  wall min  cpu median   (seconds, {args.rounds} rounds)")
    for name, r in results.items():
        print(f"{name:<{width}}  {r['wall_median']:11.4f}  {r['wall_min']:8.4f}  {r['cpu_median']:10.4f}")
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}x")
    for label, profile in imports.items():
        top = sorted((m for m in profile["modules"] if m["depth"] == 0), key=lambda m: -m["cumulative_us"])[:6]
        costliest = ", ".join(f"{m['module']} {m['cumulative_us'] / 1000:.1f}" for m in top)
        print(f"imports of `file warm` [{label}]: {profile['total_us'] / 1000:.1f} ms under -X importtime, "
              f"flake8_xla's own {profile['flake8_xla_own_us'] / 1000:.1f} ms in "
              f"{len(profile['flake8_xla_modules'])} modules; costliest top-level: {costliest}")
    if args.out:
        report = {
            "date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "file": file, "tree": tree,
            "rounds": args.rounds,
            "bytecode_written": not args.keep_env or "PYTHONDONTWRITEBYTECODE" not in os.environ,
            "ruff": ruff and subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip(),
            "versions": {label: venv.get("PYTHONPATH", "installed") for label, venv in versions.items()},
            "commands": {name: " ".join(cmd) for name, cmd, _, _ in commands},
            "results": results, "ratios": ratios, "imports": imports,
        }
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    for where in temporary:
        shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
