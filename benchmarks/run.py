#!/usr/bin/env python3
"""Benchmark harness: how much does flake8-xla add to a whole `python -m flake8` run?

Stdlib only. See benchmarks/README.md. In short:

1. two virtualenvs under benchmarks/.cache/venvs: `bare` (flake8 only) and `xla` (the same
   flake8 version plus this repository, installed non-editably from a snapshot copy);
2. corpora under benchmarks/.cache/corpora: `stdlib` (the standard library minus its test
   suites) and `xla-dense` (torch_xla 2.9.0's own sources plus the files of accelerate,
   lightning and transformers that mention torch_xla), taken from wheels, never installed;
3. whole-process wall time of `python -m flake8 --isolated --exit-zero -jN .` in each venv,
   one warm-up each, then N alternating runs (ABBA order); medians, minimums, ratio xla/bare;
4. one `--select XLA` run per corpus: diagnostic counts, full output in .cache/<corpus>-xla.txt;
5. when a ratio misses its target (or with --profile): cProfile of flake8_xla.engine.lint over
   the corpus, top flake8_xla hotspots in .cache/<corpus>-profile.txt.
6. with --cli: in the `xla` venv, `python -m flake8 --select XLA` (A) against the standalone
   `flake8-xla check` (B), same ABBA timing, speed-up median(A)/median(B), and whether the two
   report the same set of (path, line, col, code).

Results go to benchmarks/results/<date>.json and a markdown table on stdout.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import glob
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
import zipfile

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
CACHE = os.path.join(BENCH, ".cache")
VENVS = os.path.join(CACHE, "venvs")
CORPORA = os.path.join(CACHE, "corpora")
DOWNLOADS = os.path.join(CACHE, "downloads")
RESULTS = os.path.join(BENCH, "results")
README = os.path.join(BENCH, "README.md")

TARGETS = {"stdlib": 1.05, "xla-dense": 1.15}
CLI_SPEEDUP_TARGET = 10.0  # --cli: median(flake8 --select XLA) / median(flake8-xla check)
ONE_FILE_TARGET = 0.12  # --cli: seconds for `flake8-xla check` on one ~1,000-line torch_xla file (issue 13)
CORPUS_NAMES = ("stdlib", "xla-dense")

TORCH_XLA = "torch_xla==2.9.0"
TORCH_XLA_WHEEL_CACHE = "/work/cache/wheels"  # reused when it holds the wheel; else pip download
# Pinned so the corpus is the same on every machine and every day.
DEFAULT_EXTRAS = ("accelerate==1.15.0", "lightning==2.6.6", "transformers==5.24.0")

# Standard-library parts left out of the `stdlib` corpus: test suites (about 60% of the lines:
# 2.6x slower runs for no new kind of code) and installed third-party packages.
STDLIB_EXCLUDED_DIRS = {"site-packages", "test", "tests", "idle_test", "__pycache__"}

# What makes the repository's build, hashed to decide whether the `xla` venv is stale.
SOURCE_PARTS = ("flake8_xla", "rules", "xla_compat", "setup.cfg", "pyproject.toml", "setup.py", "README.md",
                "LICENSE", "MANIFEST.in")
SNAPSHOT_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")

# The corpus root gets this file so flake8-xla's target-version inference (which walks up to
# the first pyproject.toml/setup.cfg/.git) stops at the corpus and never reads this repo's
# setup.cfg. It declares no torch_xla requirement, and the venvs have no torch_xla installed, so
# the target is the newest release the rule data knows.
CORPUS_MARKER = ("# flake8-xla benchmark corpus root. It stops flake8-xla's project walk here;\n"
                 "# no torch_xla requirement, so the target is the newest known release.\n")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("check", True)
    # Never the repository: `python -c`/`-m` put the cwd on sys.path, and the repo's
    # flake8_xla.egg-info there would make flake8-xla visible to the bare venv too.
    kw.setdefault("cwd", CACHE)
    return subprocess.run(cmd, **kw)


def child_env() -> dict:
    """The environment for every timed child: no outer venv or PYTHON* settings leak in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON") and k not in ("VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    env["PYTHONHASHSEED"] = "0"
    return env


# --------------------------------------------------------------------------------------------
# virtualenvs
# --------------------------------------------------------------------------------------------
def venv_python(name: str) -> str:
    return os.path.join(VENVS, name, "bin", "python")


def dist_versions(python: str, names) -> dict:
    code = ("import json, sys, importlib.metadata as m\n"
            "out = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: out[n] = None\n"
            "print(json.dumps(out))\n")
    res = run([python, "-c", code, *names], capture_output=True, text=True, env=child_env())
    return json.loads(res.stdout)


def source_fingerprint() -> str:
    h = hashlib.sha256()
    for part in SOURCE_PARTS:
        path = os.path.join(REPO, part)
        if os.path.isfile(path):
            files = [path]
        elif os.path.isdir(path):
            files = sorted(f for f in glob.glob(os.path.join(path, "**", "*"), recursive=True)
                           if os.path.isfile(f) and "__pycache__" not in f)
        else:
            continue
        for f in files:
            h.update(os.path.relpath(f, REPO).encode() + b"\0")
            with open(f, "rb") as fh:
                h.update(fh.read())
            h.update(b"\0")
    return h.hexdigest()[:16]


def git_state() -> dict:
    def git(*args):
        try:
            return run(["git", "-C", REPO, *args], capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
    dirty = git("status", "--porcelain", "--", "flake8_xla", "rules", "xla_compat", "setup.cfg", "pyproject.toml")
    return {"head": git("rev-parse", "HEAD"), "source_dirty": bool(dirty)}


def snapshot_repo() -> str:
    """Copy the repository's build inputs to .cache, so pip's in-tree build writes nothing here."""
    dest = os.path.join(CACHE, "src-snapshot")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    for part in SOURCE_PARTS:
        src = os.path.join(REPO, part)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, part), ignore=SNAPSHOT_IGNORE)
        elif os.path.isfile(src):
            shutil.copy2(src, os.path.join(dest, part))
    return dest


def create_venv(name: str, python: str) -> str:
    path = os.path.join(VENVS, name)
    shutil.rmtree(path, ignore_errors=True)
    log(f"[venv] creating {path} with {python}")
    run([python, "-m", "venv", path])
    return venv_python(name)


def pip_install(py: str, *args: str) -> None:
    run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args], env=child_env())


def ensure_venvs(args) -> dict:
    """Both venvs, sharing the flake8 version that the `bare` install resolved."""
    os.makedirs(VENVS, exist_ok=True)
    bare = venv_python("bare")
    if args.rebuild_venvs or not os.path.exists(bare) or \
            dist_versions(bare, ["flake8"])["flake8"] is None:
        bare = create_venv("bare", args.python)
        pip_install(bare, args.flake8_spec)
    flake8_version = dist_versions(bare, ["flake8"])["flake8"]

    fingerprint = source_fingerprint()
    xla = venv_python("xla")
    stamp_path = os.path.join(VENVS, "xla", "bench-stamp.json")
    stamp = {}
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            stamp = json.load(f)
    fresh = args.rebuild_venvs or not os.path.exists(xla)
    if fresh:
        xla = create_venv("xla", args.python)
    if fresh or stamp.get("fingerprint") != fingerprint or stamp.get("flake8") != flake8_version:
        if not fresh:
            log(f"[venv] repository sources changed ({stamp.get('fingerprint')} -> {fingerprint}): "
                "reinstalling flake8-xla into the xla venv")
        snap = snapshot_repo()
        if not fresh:
            run([xla, "-m", "pip", "uninstall", "--quiet", "--yes", "flake8-xla"], env=child_env())
        pip_install(xla, f"flake8=={flake8_version}", snap)  # pinned flake8, the repo and its PyYAML
        stamp = {"fingerprint": fingerprint, "flake8": flake8_version}
        with open(stamp_path, "w") as f:
            json.dump(stamp, f)

    pkgs = ["flake8", "pycodestyle", "pyflakes", "mccabe", "flake8-xla", "PyYAML"]
    versions = {"bare": dist_versions(bare, pkgs), "xla": dist_versions(xla, pkgs)}
    for dep in ("flake8", "pycodestyle", "pyflakes", "mccabe"):
        if versions["bare"][dep] != versions["xla"][dep]:
            sys.exit(f"venvs differ in {dep}: bare {versions['bare'][dep]} vs xla {versions['xla'][dep]}"
                     " (rerun with --rebuild-venvs)")
    if versions["bare"]["flake8-xla"] is not None:
        sys.exit("the bare venv has flake8-xla installed; rerun with --rebuild-venvs")
    banner = {}
    for name, py in (("bare", bare), ("xla", xla)):
        res = run([py, "-m", "flake8", "--version"], capture_output=True, text=True, env=child_env())
        banner[name] = res.stdout.strip()
    if "flake8-xla" not in banner["xla"]:
        sys.exit(f"the xla venv's flake8 does not load the plugin: {banner['xla']}")
    for name in ("bare", "xla"):
        log(f"[venv] {name}: python -m flake8 --version -> {banner[name]}")
    return {"bare": bare, "xla": xla, "versions": versions, "flake8_version_banner": banner,
            "flake8_xla_source_fingerprint": fingerprint, "git": git_state()}


# --------------------------------------------------------------------------------------------
# corpora
# --------------------------------------------------------------------------------------------
def corpus_stats(root: str) -> dict:
    files = lines = size = mentions = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if not name.endswith(".py"):
                continue
            with open(os.path.join(dirpath, name), "rb") as f:
                data = f.read()
            files += 1
            lines += data.count(b"\n")
            size += len(data)
            mentions += b"torch_xla" in data
    return {"files": files, "lines": lines, "bytes": size, "files_mentioning_torch_xla": mentions}


def finish_corpus(root: str, meta: dict) -> dict:
    with open(os.path.join(root, "pyproject.toml"), "w") as f:
        f.write(CORPUS_MARKER)
    meta["stats"] = corpus_stats(root)
    with open(os.path.join(root, ".bench-corpus.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def load_corpus(name: str, expect: dict):
    root = os.path.join(CORPORA, name)
    try:
        with open(os.path.join(root, ".bench-corpus.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    if any(meta.get(k) != v for k, v in expect.items()):
        return None
    return meta


def build_stdlib(args) -> dict:
    src = sysconfig.get_paths()["stdlib"]
    expect = {"source": src, "python": platform.python_version(), "excluded_dirs": sorted(STDLIB_EXCLUDED_DIRS)}
    meta = None if args.rebuild_corpora else load_corpus("stdlib", expect)
    if meta:
        return meta
    root = os.path.join(CORPORA, "stdlib")
    shutil.rmtree(root, ignore_errors=True)
    log(f"[corpus] stdlib: copying *.py from {src} without {sorted(STDLIB_EXCLUDED_DIRS)}")
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in STDLIB_EXCLUDED_DIRS)
        for name in filenames:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, name), src)
                os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
                shutil.copy2(os.path.join(dirpath, name), os.path.join(root, rel))
    return finish_corpus(root, expect)


def fetch_wheel(spec: str, extra_args=()) -> str:
    """A wheel for ``spec`` from the download cache, else pip download (the index, no install)."""
    name, version = spec.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    os.makedirs(DOWNLOADS, exist_ok=True)
    for directory in (DOWNLOADS, TORCH_XLA_WHEEL_CACHE):
        hits = sorted(glob.glob(os.path.join(directory, stem + "*.whl")))
        if hits:
            return hits[0]
    log(f"[corpus] pip download {spec}")
    run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--only-binary=:all:", "-d", DOWNLOADS, *extra_args, spec], env=child_env())
    hits = sorted(glob.glob(os.path.join(DOWNLOADS, stem + "*.whl")))
    if not hits:
        sys.exit(f"pip download {spec} produced no wheel in {DOWNLOADS}")
    return hits[0]


def extract_py(wheel: str, root: str, keep) -> int:
    n = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.endswith(".py") or ".data/" in name.split("/", 1)[0]:
                continue
            data = zf.read(info)
            if not keep(name, data):
                continue
            dest = os.path.join(root, *name.split("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
            n += 1
    return n


def build_xla_dense(args) -> dict:
    extras = [] if args.no_extras else list(args.extras)
    expect = {"torch_xla": TORCH_XLA, "extras": extras}
    meta = None if args.rebuild_corpora else load_corpus("xla-dense", expect)
    if meta:
        return meta
    root = os.path.join(CORPORA, "xla-dense")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    sources = {}
    wheel = fetch_wheel(TORCH_XLA, ("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"))
    n = extract_py(wheel, root, lambda name, data: name.startswith("torch_xla/"))
    sources[os.path.basename(wheel)] = n
    log(f"[corpus] xla-dense: {n} files from {os.path.basename(wheel)} (torch_xla/**/*.py)")
    for spec in extras:
        wheel = fetch_wheel(spec)
        n = extract_py(wheel, root, lambda name, data: b"torch_xla" in data)
        sources[os.path.basename(wheel)] = n
        log(f"[corpus] xla-dense: {n} files from {os.path.basename(wheel)} (*.py containing torch_xla)")
    expect["files_per_wheel"] = sources
    return finish_corpus(root, expect)


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------
def flake8_cmd(python: str, jobs: int, extra=()) -> list:
    return [python, "-m", "flake8", "--isolated", "--exit-zero", f"--jobs={jobs}", *extra, "."]


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd, cwd: str, capture: bool = False):
    """(wall seconds, CPU seconds of the process tree (user+sys, -j workers included), result)."""
    c0 = children_cpu()
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, env=child_env(), stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    cpu = children_cpu() - c0
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} in {cwd} exited {res.returncode}:\n{res.stderr.decode(errors='replace')[-2000:]}")
    return elapsed, cpu, res


def summarize(times) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "mean": statistics.fmean(times),
            "stdev": statistics.stdev(times) if len(times) > 1 else 0.0, "runs": times}


def bench_corpus(name: str, root: str, envs: dict, args) -> dict:
    # Warm-up: one run each (fills the page cache and writes .pyc files), output kept to check
    # that the two runs agree on everything but XLA codes.
    warm = {}
    for venv in ("bare", "xla"):
        t, cpu, res = timed(flake8_cmd(envs[venv], args.jobs), root, capture=True)
        warm[venv] = {"seconds": t, "cpu_seconds": cpu, "output_lines": res.stdout.count(b"\n")}
        if venv == "xla":
            xla_out = [ln for ln in res.stdout.decode(errors="replace").splitlines() if re.search(r": XLA\d", ln)]
            warm[venv]["xla_lines"] = len(xla_out)
        if res.stderr.strip():
            warm[venv]["stderr"] = res.stderr.decode(errors="replace")[-2000:]
        log(f"[time] {name}: warm-up {venv} {t:.2f}s ({warm[venv]['output_lines']} output lines)")
    times = {"bare": [], "xla": []}
    cpus = {"bare": [], "xla": []}
    for i in range(args.runs):
        order = ("bare", "xla") if i % 2 == 0 else ("xla", "bare")  # ABBA: no side always goes first
        for venv in order:
            t, cpu, _ = timed(flake8_cmd(envs[venv], args.jobs), root)
            times[venv].append(t)
            cpus[venv].append(cpu)
        log(f"[time] {name}: run {i + 1}/{args.runs} bare {times['bare'][-1]:.3f}s (cpu {cpus['bare'][-1]:.3f}s) "
            f"xla {times['xla'][-1]:.3f}s (cpu {cpus['xla'][-1]:.3f}s)")
    bare, xla = summarize(times["bare"]), summarize(times["xla"])
    bare_cpu, xla_cpu = summarize(cpus["bare"]), summarize(cpus["xla"])
    pair_ratios = [x / b for x, b in zip(times["xla"], times["bare"])]
    return {
        "bare": bare, "xla": xla,
        "ratio_median": xla["median"] / bare["median"],
        "ratio_min": xla["min"] / bare["min"],
        "ratio_paired_median": statistics.median(pair_ratios),
        "bare_cpu": bare_cpu, "xla_cpu": xla_cpu,
        "cpu_ratio_median": xla_cpu["median"] / bare_cpu["median"],
        "cpu_ratio_min": xla_cpu["min"] / bare_cpu["min"],
        "warmup": warm,
    }


def cli_script(python: str) -> str:
    return os.path.join(os.path.dirname(python), "flake8-xla")


def cli_routes(envs: dict, jobs: int) -> dict:
    """The two ways to get XLA diagnostics, both in the xla venv: A = flake8 route, B = standalone CLI."""
    cli = [cli_script(envs["xla"]), "check", "--isolated", "--exit-zero", f"-j{jobs}"]
    return {"flake8": [envs["xla"], "-m", "flake8", "--isolated", "--exit-zero", "--select", "XLA", f"-j{jobs}", "."],
            # cold: every file parsed and linted; cached: the result cache a previous run left (unchanged files)
            "cli": cli + ["--no-cache", "."],
            "cli-cached": cli + ["--cache-dir", os.path.join(CACHE, "cli-result-cache"), "."]}


def flake8_keys(out: bytes) -> list:
    keys = []
    for ln in out.decode(errors="replace").splitlines():
        m = re.match(r"(.*?):(\d+):(\d+): (XLA\d+)", ln)
        if m:
            keys.append((os.path.normpath(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)))
    return keys


def cli_json_keys(out: bytes) -> list:
    return [(os.path.normpath(d["filename"]), int(d["line"]), int(d["column"]), d["code"]) for d in json.loads(out)]


def one_file_of(root: str, lines: int = 1000) -> "str | None":
    """The corpus file mentioning torch_xla whose length is nearest ``lines`` (ties: the path);
    None when no file mentions it (the stdlib corpus)."""
    best = None
    for directory, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(directory, f)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
                if "torch_xla" in text:
                    key = (abs(text.count("\n") - lines), os.path.relpath(path, root))
                    best = min(best, key) if best else key
    return best[1] if best else None


def bench_one_file(name: str, root: str, envs: dict, args) -> dict:
    """`flake8-xla check` on one ~1,000-line torch_xla file: what a pre-commit hook or an editor pays
    per changed file (start-up, rule data, one parse and lint), without and with the result cache."""
    path = one_file_of(root)
    if path is None:
        return {}
    cli = [cli_script(envs["xla"]), "check", "--isolated", "--exit-zero"]
    cmds = {"cold": cli + ["--no-cache", path],
            "cached": cli + ["--cache-dir", os.path.join(CACHE, "one-file-cache"), path]}
    for cmd in cmds.values():
        timed(cmd, root)  # warm-up; fills the cache and the rule-data copies
    times = {k: [] for k in cmds}
    for i in range(max(args.runs, 1) * 4):
        for route, cmd in cmds.items():
            times[route].append(timed(cmd, root)[0])
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as handle:
        lines = handle.read().count("\n")
    out = {"file": path, "lines": lines, "cold": summarize(times["cold"]), "cached": summarize(times["cached"]),
           "commands": {k: " ".join([os.path.basename(c[0])] + c[1:]) for k, c in cmds.items()}}
    log(f"[one-file] {name}: {path} ({lines} lines): cold median {out['cold']['median']:.3f}s "
        f"(min {out['cold']['min']:.3f}s), cached median {out['cached']['median']:.3f}s")
    return out


def bench_cli(name: str, root: str, envs: dict, args) -> dict:
    """Whole-process time of the flake8 route (A) vs `flake8-xla check` (B), and their diagnostic sets."""
    cmds = cli_routes(envs, args.jobs)
    # Warm-up, output kept: A's text output and B's JSON output are the diagnostic comparison.
    warm, keys = {}, {}
    for route, cmd in (("flake8", cmds["flake8"]), ("cli", cmds["cli"][:-1] + ["--format", "json", "."])):
        t, cpu, res = timed(cmd, root, capture=True)
        keys[route] = flake8_keys(res.stdout) if route == "flake8" else cli_json_keys(res.stdout)
        warm[route] = {"seconds": t, "cpu_seconds": cpu, "diagnostics": len(keys[route]),
                       "command": " ".join([os.path.basename(cmd[0])] + cmd[1:])}
        if res.stderr.strip():
            warm[route]["stderr"] = res.stderr.decode(errors="replace")[-2000:]
        log(f"[cli] {name}: warm-up {route} {t:.2f}s ({len(keys[route])} diagnostics)")
    a, b = set(keys["flake8"]), set(keys["cli"])
    only_a, only_b = sorted(a - b), sorted(b - a)
    same = {"flake8_only": len(only_a), "cli_only": len(only_b), "differences": len(only_a) + len(only_b),
            "flake8_duplicates": len(keys["flake8"]) - len(a), "cli_duplicates": len(keys["cli"]) - len(b),
            "examples_flake8_only": [list(k) for k in only_a[:10]], "examples_cli_only": [list(k) for k in only_b[:10]]}
    log(f"[cli] {name}: diagnostic sets: {len(a)} (flake8) vs {len(b)} (cli), {len(only_a)} only in flake8, "
        f"{len(only_b)} only in cli")
    timed(cmds["cli-cached"], root)  # fills the cache the cached route reads
    routes = ("flake8", "cli", "cli-cached")
    times = {r: [] for r in routes}
    cpus = {r: [] for r in routes}
    for i in range(args.runs):
        order = routes if i % 2 == 0 else routes[::-1]  # ABC CBA ...
        for route in order:
            t, cpu, _ = timed(cmds[route], root)
            times[route].append(t)
            cpus[route].append(cpu)
        log(f"[cli] {name}: run {i + 1}/{args.runs} " + ", ".join(
            f"{r} {times[r][-1]:.3f}s (cpu {cpus[r][-1]:.3f}s)" for r in routes))
    fl, cli, cached = (summarize(times[r]) for r in routes)
    fl_cpu, cli_cpu, cached_cpu = (summarize(cpus[r]) for r in routes)
    return {
        "commands": {r: " ".join([os.path.basename(c[0])] + c[1:]) for r, c in cmds.items()},
        "flake8": fl, "cli": cli, "cli_cached": cached, "flake8_cpu": fl_cpu, "cli_cpu": cli_cpu,
        "cli_cached_cpu": cached_cpu,
        "speedup_median": fl["median"] / cli["median"], "speedup_min": fl["min"] / cli["min"],
        "cached_speedup_median": fl["median"] / cached["median"],
        "cpu_speedup_median": fl_cpu["median"] / cli_cpu["median"],
        "same_diagnostics": same, "warmup": warm,
        "one_file": bench_one_file(name, root, envs, args),
    }


# --------------------------------------------------------------------------------------------
# diagnostics and profile
# --------------------------------------------------------------------------------------------
def diagnostics(name: str, root: str, envs: dict, args) -> dict:
    _, _, res = timed(flake8_cmd(envs["xla"], args.jobs, ["--select", "XLA"]), root, capture=True)
    lines = sorted(res.stdout.decode(errors="replace").splitlines(),
                   key=lambda ln: (ln.split(":", 1)[0], [int(p) if p.isdigit() else 0 for p in ln.split(":")[1:3]]))
    path = os.path.join(CACHE, f"{name}-xla.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + ("\n" if lines else ""))
    codes = collections.Counter(m.group(1) for m in (re.search(r":\d+:\d+: (XLA\d+) ", ln) for ln in lines) if m)
    files = {ln.split(":", 1)[0] for ln in lines}
    return {"total": len(lines), "by_code": dict(sorted(codes.items())), "files_with_diagnostics": len(files),
            "internal_errors": codes.get("XLA000", 0), "path": os.path.relpath(path, REPO),
            "stderr": res.stderr.decode(errors="replace")[-2000:] or None}


# The corpus files read and parsed as flake8 does (tokenize.open + readlines, ast.parse of the
# joined lines), outside any timer: flake8 parses every file for pyflakes anyway.
_LOAD_FILES = r"""
import ast, os, sys, time, tokenize
def load(root):
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py"))
    files = []
    for p in paths:
        try:
            with tokenize.open(p) as fh:
                lines = fh.readlines()
            files.append((p, lines, ast.parse("".join(lines), p)))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            pass  # flake8 reports E999 and runs no AST plugin on these
    return files
"""

# Plugin import time and lint() over the corpus: the first pass (what one flake8 process pays,
# including anything loaded lazily on first use, e.g. the API table) and the best of 3 more.
LINT_COST_SCRIPT = _LOAD_FILES + r"""
t0 = time.perf_counter()
import flake8_xla.plugin.checker  # as flake8 loads it
t_import = time.perf_counter() - t0
from flake8_xla import engine
files = load(sys.argv[1])
passes = []
for _ in range(4):
    t0 = time.perf_counter()
    for p, lines, tree in files:
        engine.lint(lines, tree, p)
    passes.append(time.perf_counter() - t0)
matched = sum(engine.might_match("".join(lines)) for _, lines, _ in files)
print(t_import, passes[0], min(passes[1:]), len(files), matched)
"""

PROFILE_SCRIPT = _LOAD_FILES + r"""
import cProfile, io, pstats
import flake8_xla.plugin.checker
from flake8_xla import engine
root, top = sys.argv[1], int(sys.argv[2])
files = load(root)
prof = cProfile.Profile()
for p, lines, tree in files:
    prof.enable()
    engine.lint(lines, tree, p)
    prof.disable()
ours = r"^(engine|semantic|lifecycle|lifecycle_match|rule|versions|plugin|xla1\d\d_\w+)\.py:"
for title, key, restrict in (("flake8_xla code, by own time", "tottime", (ours, top)),
                             ("flake8_xla code, by cumulative time", "cumulative", (ours, top)),
                             ("everything under lint(), by own time", "tottime", (top,))):
    out = io.StringIO()
    pstats.Stats(prof, stream=out).strip_dirs().sort_stats(key).print_stats(*restrict)
    print(f"==== {title} ====")
    print(out.getvalue().strip("\n"))
    print()
"""


def write_script(name: str, text: str) -> str:
    scripts = os.path.join(CACHE, "scripts")
    os.makedirs(scripts, exist_ok=True)
    path = os.path.join(scripts, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def lint_cost(name: str, root: str, envs: dict) -> dict:
    """In-process cost of the plugin, far less noisy than the whole-process difference."""
    script = write_script("lint_cost.py", LINT_COST_SCRIPT)
    res = run([envs["xla"], script, root], capture_output=True, text=True, env=child_env(), cwd=root)
    t_import, t_first, t_lint, n_files, matched = res.stdout.split()
    out = {"plugin_import_seconds": float(t_import), "lint_first_pass_seconds": float(t_first),
           "lint_seconds_best_of_3": float(t_lint),
           "files_parsed": int(n_files), "files_passing_prefilter": int(matched)}
    log(f"[cost] {name}: plugin import {out['plugin_import_seconds'] * 1000:.0f} ms, lint() over {n_files} files "
        f"({matched} pass the prefilter): first pass {out['lint_first_pass_seconds']:.3f}s, "
        f"then {out['lint_seconds_best_of_3']:.3f}s (best of 3)")
    return out


def profile(name: str, root: str, envs: dict, args) -> dict:
    script = write_script("profile_lint.py", PROFILE_SCRIPT)
    res = run([envs["xla"], script, root, str(args.profile_top)], capture_output=True, text=True,
              env=child_env(), cwd=root)
    path = os.path.join(CACHE, f"{name}-profile.txt")
    with open(path, "w") as f:
        f.write(res.stdout)
    log(f"[profile] {name}: cProfile of flake8_xla.engine.lint -> {os.path.relpath(path, REPO)}")
    return {"path": os.path.relpath(path, REPO)}


# --------------------------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------------------------
def estimated_ratio(entry: dict) -> float:
    """What the whole-process ratio would be if the plugin cost only its import and lint().

    Measured against the bare run's CPU time, so it holds for --jobs > 1 too (the lint work is
    split over the workers, the table is parsed once before they fork). At --jobs=1 CPU time and
    wall time agree within 0.2%.
    """
    c, t = entry["lint_cost"], entry["timing"]
    first = c.get("lint_first_pass_seconds", c["lint_seconds_best_of_3"])  # older results lack it
    return 1 + (c["plugin_import_seconds"] + first) / t["bare_cpu"]["median"]


def markdown(result: dict) -> str:
    rows = ["| corpus | files | lines | bare median (min) s | xla median (min) s | ratio median | ratio min "
            "| CPU ratio median (min) | in-process estimate | target | XLA diagnostics |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, c in result["corpora"].items():
        t = c.get("timing")
        if not t:
            continue
        st = c["stats"]
        target = TARGETS.get(name)
        ok = "" if target is None else (" ✅" if t["ratio_median"] <= target else " ❌")
        diag = c.get("diagnostics", {})
        by_code = ", ".join(f"{k} {v}" for k, v in diag.get("by_code", {}).items())
        rows.append(
            f"| {name} | {st['files']} | {st['lines']} | {t['bare']['median']:.3f} ({t['bare']['min']:.3f}) "
            f"| {t['xla']['median']:.3f} ({t['xla']['min']:.3f}) | {t['ratio_median']:.3f}{ok} "
            f"| {t['ratio_min']:.3f} | {t['cpu_ratio_median']:.3f} ({t['cpu_ratio_min']:.3f}) "
            f"| {t['estimated_ratio']:.3f} "
            f"| {'≤ %.2f' % target if target else '-'} "
            f"| {diag.get('total', '-')}{' (' + by_code + ')' if by_code else ''} |")
    return "\n".join(rows)


def cli_markdown(result: dict) -> str:
    rows = ["| corpus | files | A flake8 median (min) s | B flake8-xla, no cache, median (min) s "
            "| speed-up median (min) | CPU A / B median s | B with its cache, median s | speed-up "
            "| XLA diagnostics A / B | set differences |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, c in result["corpora"].items():
        t = c.get("cli")
        if not t:
            continue
        w, same = t["warmup"], t["same_diagnostics"]
        ok = " ✅" if t["speedup_median"] >= CLI_SPEEDUP_TARGET else " ❌"
        rows.append(
            f"| {name} | {c['stats']['files']} | {t['flake8']['median']:.3f} ({t['flake8']['min']:.3f}) "
            f"| {t['cli']['median']:.3f} ({t['cli']['min']:.3f}) | {t['speedup_median']:.1f}x{ok} "
            f"({t['speedup_min']:.1f}x) | {t['flake8_cpu']['median']:.3f} / {t['cli_cpu']['median']:.3f} "
            f"| {t['cli_cached']['median']:.3f} | {t['cached_speedup_median']:.1f}x "
            f"| {w['flake8']['diagnostics']} / {w['cli']['diagnostics']} | {same['differences']} |")
    single = [(name, c["cli"]["one_file"]) for name, c in result["corpora"].items()
              if c.get("cli", {}).get("one_file")]
    if single:
        rows += ["", "One file, `flake8-xla check --isolated --exit-zero [--no-cache] FILE`, whole process; "
                 "wall seconds", "",
                 "| corpus | file | lines | no cache median (min) | target | with its cache median (min) |",
                 "|---|---|---:|---:|---:|---:|"]
        for name, one in single:
            ok = " ✅" if one["cold"]["median"] <= ONE_FILE_TARGET else " ❌"
            rows.append(f"| {name} | `{one['file']}` | {one['lines']} | {one['cold']['median']:.3f} "
                        f"({one['cold']['min']:.3f}){ok} | ≤ {ONE_FILE_TARGET} | {one['cached']['median']:.3f} "
                        f"({one['cached']['min']:.3f}) |")
    return "\n".join(rows)


def write_result(result: dict) -> str:
    os.makedirs(RESULTS, exist_ok=True)
    suffix = "" if result["jobs"] == 1 else f"-j{result['jobs']}"  # a -j2 run keeps the -j1 file
    if any("cli" in c for c in result["corpora"].values()):
        suffix += "-cli"  # a --cli run keeps the plain file of the same day
    path = os.path.join(RESULTS, f"{result['date']}{suffix}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return path


def update_readme(result: dict, table: str, result_path: str) -> None:
    with open(README) as f:
        text = f.read()
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    if start not in text or end not in text:
        log("[readme] no results markers, not updated")
        return
    v = result["environment"]["versions"]["xla"]
    block = (f"{start}\n"
             f"Run of {result['date']} (`{result['command']}`), {result['environment']['cpu']}, "
             f"{result['environment']['cpus']} CPUs, Python {result['environment']['python']}, "
             f"flake8 {v['flake8']} (pycodestyle {v['pycodestyle']}, pyflakes {v['pyflakes']}), "
             f"flake8-xla {v['flake8-xla']} (sources {result['environment']['flake8_xla_source_fingerprint']}, "
             f"HEAD {str(result['environment']['git']['head'])[:10]}"
             f"{', uncommitted changes' if result['environment']['git']['source_dirty'] else ''}); "
             f"`--jobs={result['jobs']}`, {result['runs']} alternating runs after one warm-up each. "
             f"Full data: `{os.path.relpath(result_path, BENCH)}`.\n\n{table}\n{end}")
    text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    with open(README, "w") as f:
        f.write(text)
    log("[readme] latest numbers updated")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed runs per venv and corpus, after one warm-up each")
    p.add_argument("-j", "--jobs", type=int, default=1, help="flake8 --jobs, the same in both venvs")
    p.add_argument("--corpus", action="append", choices=CORPUS_NAMES,
                   help="corpus to run (repeatable; default: all)")
    p.add_argument("--python", default=sys.executable, help="interpreter the venvs are made from")
    p.add_argument("--flake8-spec", default="flake8",
                   help="what the bare venv installs; the xla venv pins the version it resolved")
    p.add_argument("--extras", nargs="*", default=list(DEFAULT_EXTRAS), metavar="NAME==VERSION",
                   help="wheels whose .py files mentioning torch_xla join the xla-dense corpus")
    p.add_argument("--no-extras", action="store_true", help="xla-dense is torch_xla's own sources only")
    p.add_argument("--rebuild-venvs", action="store_true", help="recreate both venvs")
    p.add_argument("--rebuild-corpora", action="store_true", help="re-extract the corpora")
    p.add_argument("--no-timing", action="store_true",
                   help="skip the bare/xla timing: only prepare, count diagnostics (and profile, and --cli)")
    p.add_argument("--cli", action="store_true",
                   help="also time `flake8 --select XLA` against `flake8-xla check` in the xla venv")
    p.add_argument("--profile", choices=("auto", "always", "never"), default="auto",
                   help="cProfile flake8_xla.engine.lint over a corpus: auto = when its ratio misses the target")
    p.add_argument("--profile-top", type=int, default=25, help="functions listed per profile table")
    p.add_argument("--update-readme", action="store_true", help="rewrite the README's latest-numbers block")
    p.add_argument("--no-write", action="store_true", help="do not write results/<date>.json")
    p.add_argument("--report", metavar="RESULT_JSON",
                   help="measure nothing: recompute the derived columns of a results file, rewrite it, "
                        "print its table (and update the README with --update-readme)")
    args = p.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            result = json.load(f)
        for entry in result["corpora"].values():
            if "timing" in entry and "lint_cost" in entry:
                entry["timing"]["estimated_ratio"] = estimated_ratio(entry)
        path = write_result(result)
        table = markdown(result)
        print(table)
        if any("cli" in c for c in result["corpora"].values()):
            print()
            print(cli_markdown(result))
        if args.update_readme:
            update_readme(result, table, path)
        return 0
    corpora = args.corpus or list(CORPUS_NAMES)

    os.makedirs(CACHE, exist_ok=True)
    envs = ensure_venvs(args)
    versions = envs["versions"]
    if args.cli and not os.path.exists(cli_script(envs["xla"])):
        sys.exit(f"--cli: {cli_script(envs['xla'])} missing; rerun with --rebuild-venvs")
    print(f"flake8 {versions['bare']['flake8']} (pycodestyle {versions['bare']['pycodestyle']}, "
          f"pyflakes {versions['bare']['pyflakes']}, mccabe {versions['bare']['mccabe']}) in both venvs; "
          f"flake8-xla {versions['xla']['flake8-xla']} + PyYAML {versions['xla']['PyYAML']} in xla "
          f"(sources {envs['flake8_xla_source_fingerprint']})", flush=True)

    result = {
        "date": datetime.date.today().isoformat(),
        "timestamp": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": "python benchmarks/run.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "runs": args.runs, "jobs": args.jobs, "targets": TARGETS,
        "flake8_command": "python -m flake8 --isolated --exit-zero --jobs=%d ." % args.jobs,
        "environment": {
            "python": platform.python_version(), "python_executable": args.python,
            "platform": platform.platform(), "cpu": cpu_model(), "cpus": os.cpu_count(),
            "versions": versions, "flake8_version_banner": envs["flake8_version_banner"],
            "flake8_xla_source_fingerprint": envs["flake8_xla_source_fingerprint"], "git": envs["git"],
        },
        "corpora": {},
    }
    builders = {"stdlib": build_stdlib, "xla-dense": build_xla_dense}
    for name in corpora:
        meta = builders[name](args)
        root = os.path.join(CORPORA, name)
        st = meta["stats"]
        log(f"[corpus] {name}: {st['files']} files, {st['lines']} lines, "
            f"{st['files_mentioning_torch_xla']} mention torch_xla ({os.path.relpath(root, REPO)})")
        entry = {"path": os.path.relpath(root, REPO), **meta}
        entry["diagnostics"] = diagnostics(name, root, envs, args)
        d = entry["diagnostics"]
        log(f"[diag] {name}: {d['total']} XLA diagnostics {d['by_code']} in {d['files_with_diagnostics']} files "
            f"-> {d['path']}")
        if d["internal_errors"]:
            log(f"[diag] {name}: WARNING {d['internal_errors']} XLA000 internal errors")
        if not args.no_timing:
            entry["timing"] = bench_corpus(name, root, envs, args)
            warm = entry["timing"]["warmup"]
            extra = warm["xla"]["output_lines"] - warm["bare"]["output_lines"]
            if extra != warm["xla"].get("xla_lines"):
                log(f"[check] {name}: xla run printed {extra} more lines than bare but {warm['xla'].get('xla_lines')} "
                    "XLA lines: the plugin changed other output?")
        if args.cli:
            entry["cli"] = bench_cli(name, root, envs, args)
        entry["lint_cost"] = lint_cost(name, root, envs)
        if "timing" in entry:
            t = entry["timing"]
            # What the whole-process ratio would be if the plugin cost only its import and lint().
            t["estimated_ratio"] = estimated_ratio(entry)
        missed = "timing" in entry and entry["timing"]["ratio_median"] > TARGETS.get(name, float("inf"))
        if args.profile == "always" or (args.profile == "auto" and missed):
            entry["profile"] = profile(name, root, envs, args)
        result["corpora"][name] = entry

    table = markdown(result)
    print()
    if any("timing" in c for c in result["corpora"].values()):
        print(f"`python -m flake8 --isolated --exit-zero --jobs={args.jobs} .`, {args.runs} alternating runs per venv "
              f"after one warm-up; wall seconds")
        print()
        print(table)
    for name, c in result["corpora"].items():
        d = c["diagnostics"]
        print(f"\n{name}: {d['total']} XLA diagnostics in {d['files_with_diagnostics']} files -> {d['path']}")
        lc = c["lint_cost"]
        print(f"{name}: in-process plugin cost: import {lc['plugin_import_seconds'] * 1000:.0f} ms + lint() "
              f"{lc['lint_first_pass_seconds']:.3f}s first pass ({lc['lint_seconds_best_of_3']:.3f}s warm) "
              f"over {lc['files_parsed']} files "
              f"({lc['files_passing_prefilter']} pass the prefilter)"
              + (f"; estimated ratio {c['timing']['estimated_ratio']:.3f}" if "timing" in c else ""))
        if "profile" in c:
            print(f"{name}: profile -> {c['profile']['path']}")
    if args.cli:
        routes = cli_routes(envs, args.jobs)
        print(f"\n--cli: in the xla venv, A = `python {' '.join(routes['flake8'][1:])}`, "
              f"B = `flake8-xla {' '.join(routes['cli'][1:])}`, {args.runs} alternating runs "
              "after one warm-up each; wall seconds\n")
        print(cli_markdown(result))
        for name, c in result["corpora"].items():
            same = c["cli"]["same_diagnostics"]
            if same["differences"]:
                print(f"{name}: only in flake8 {same['examples_flake8_only']}; only in cli {same['examples_cli_only']}")
    if not args.no_write and (not args.no_timing or args.cli):
        path = write_result(result)
        print(f"\nresult: {os.path.relpath(path, REPO)}")
        if args.update_readme:
            update_readme(result, table, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
