"""Robustness sweep over the installed Python standard library, and hostile inputs through flake8.

* Engine level: every stdlib ``.py`` (test suite and its deliberately broken files included) is
  decoded and parsed the way flake8 does it and handed straight to ``engine.lint_tree``, bypassing
  the cheap substring pre-filter, so the semantic layer and every rule really run. None of this
  code uses torch_xla: there must be no diagnostic and no exception. A second pass over the same
  trees rebinds every import to ``torch_xla.core.xla_model`` so the lifecycle matching also runs
  on real-world code shapes; there only the position/code invariants are checked.
* flake8 level: the stdlib files that cannot be decoded or parsed go through the real CLI once.
* Handcrafted hostile files go through the CLI with exact expected codes.
"""
from __future__ import annotations

import ast
import concurrent.futures
import os
import re
import subprocess
import sys
import sysconfig
import tokenize
import traceback
import warnings
from typing import Dict, List, NamedTuple, Sequence, Tuple

import pytest

from flake8_xla.engine import lint_tree
from flake8_xla.versions import Target, Version

TARGET = Target(Version(2, 9), "test")
STDLIB = sysconfig.get_paths()["stdlib"]
SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}
XLA_CODE = re.compile(r"^XLA\d{3}$")
MARK_STEP_MSG = "XLA102 xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)"


def stdlib_files() -> List[str]:
    files = []
    for root, dirs, names in os.walk(STDLIB):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(".py"))
    return files


def read_like_flake8(path: str) -> List[str]:
    """flake8's FileProcessor.read_lines for a path: tokenize.open + readlines, BOM stripped.

    Unlike flake8 (which falls back to latin-1) undecodable files raise here, so they are counted.
    """
    with tokenize.open(path) as f:
        lines = f.readlines()
    if lines and lines[0][:1] == "\ufeff":
        lines[0] = lines[0][1:]
    return lines


def node_starts(tree: ast.AST) -> set:
    """(line, utf-8 byte column) of every positioned node: a diagnostic must point at one."""
    return {(n.lineno, n.col_offset) for n in ast.walk(tree) if hasattr(n, "col_offset")}


# codes the rebound pass may legitimately produce: it turns every attribute into an xla_model API,
# so loops that call xm.optimizer_step and xm.rendezvous become real XLA302 cases, and such loops
# over a range() or a literal, with no sync, real XLA305 cases
REBOUND_CODES = frozenset({"XLA101", "XLA102", "XLA103", "XLA104", "XLA105", "XLA106", "XLA302", "XLA305",
                           "XLA903"})  # XLA103's planned APIs without an upstream replacement


def position_problems(diagnostics, lines: Sequence[str], tree: ast.AST) -> List[str]:
    problems = []
    starts = None
    for d in diagnostics:
        if not XLA_CODE.match(d.code) or d.code not in REBOUND_CODES:
            problems.append(f"bad code {d!r}")
        if not 1 <= d.line <= len(lines):
            problems.append(f"line out of range {d!r}")
            continue
        text = lines[d.line - 1].rstrip("\r\n")
        if not 0 <= d.col <= len(text):
            problems.append(f"column out of range {d!r} for line {text!r}")
            continue
        if starts is None:
            starts = node_starts(tree)
        if (d.line, len(text[: d.col].encode("utf-8"))) not in starts:
            problems.append(f"column does not point at a node {d!r} in line {text!r}")
    return problems


def _xm_leaves() -> Tuple[str, ...]:
    from flake8_xla.lifecycle.table import api_table

    prefix = "torch_xla.core.xla_model."
    table = api_table()
    names = {n for row in table.rows for n in row.names if n.startswith(prefix)}
    return tuple(sorted(n[len(prefix):] for n in names if "." not in n[len(prefix):]))


class _Rebind(ast.NodeTransformer):
    """Turn real code into heavy torch_xla code, keeping every position: every import binds
    torch_xla.core.xla_model, and every ``name.attr`` and from-imported name cycles through the
    table's xla_model APIs, so the lifecycle matching runs on real-world code shapes."""

    MODULE = "torch_xla.core.xla_model"

    def __init__(self) -> None:
        self.leaves = _xm_leaves()
        self.i = 0

    def leaf(self) -> str:
        self.i += 1
        return self.leaves[self.i % len(self.leaves)]

    def visit_Import(self, node: ast.Import) -> ast.Import:
        for alias in node.names:
            alias.asname = alias.asname or alias.name.split(".", 1)[0]
            alias.name = self.MODULE
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        if node.level == 0:
            node.module = self.MODULE
            for alias in node.names:
                if alias.name != "*":
                    alias.asname = alias.asname or alias.name
                    alias.name = self.leaf()
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
        self.generic_visit(node)
        if type(node.value) is ast.Name:
            node.attr = self.leaf()
        return node


class FileResult(NamedTuple):
    path: str
    status: str  # ok | decode | parse | nul
    detail: str = ""
    diagnostics: Tuple = ()  # plain pass: must stay empty
    rebound: int = 0  # number of diagnostics in the rebound pass (informational)
    problems: Tuple[str, ...] = ()  # exceptions and invariant violations


def check_file(path: str) -> FileResult:
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if b"\0" in raw:
            return FileResult(path, "nul")
        try:
            lines = read_like_flake8(path)
        except (SyntaxError, UnicodeError, LookupError) as exc:
            return FileResult(path, "decode", f"{type(exc).__name__}: {exc}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse("".join(lines), path)
        except (SyntaxError, ValueError) as exc:
            return FileResult(path, "parse", f"{type(exc).__name__}: {exc}")
        problems: List[str] = []
        try:
            diagnostics = tuple(lint_tree(lines, tree, path, TARGET))
        except Exception:
            return FileResult(path, "ok", problems=("lint_tree raised:\n" + traceback.format_exc(),))
        rebound = 0
        try:
            _Rebind().visit(tree)
            rebound_diags = lint_tree(lines, tree, path, TARGET)
            rebound = len(rebound_diags)
            problems += [f"rebound pass: {p}" for p in position_problems(rebound_diags, lines, tree)]
        except Exception:
            problems.append("lint_tree raised on the rebound tree:\n" + traceback.format_exc())
        return FileResult(path, "ok", diagnostics=diagnostics, rebound=rebound, problems=tuple(problems))
    except Exception:  # pragma: no cover - a bug in the harness itself
        return FileResult(path, "ok", problems=("harness raised:\n" + traceback.format_exc(),))


def check_chunk(paths: Sequence[str]) -> List[FileResult]:
    return [check_file(p) for p in paths]


class Sweep(NamedTuple):
    results: List[FileResult]

    def by_status(self, status: str) -> List[FileResult]:
        return [r for r in self.results if r.status == status]


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    files = stdlib_files()
    workers = min(4, os.cpu_count() or 1)
    chunks = [files[i::workers * 8] for i in range(workers * 8)]
    if workers > 1:
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            results = [r for chunk in pool.map(check_chunk, chunks) for r in chunk]
    else:
        results = check_chunk(files)
    return Sweep(results)


# How fast the sweep runs is measured by benchmarks/run.py (--corpus stdlib), not asserted here:
# a wall-clock bound fails on a loaded machine and says nothing about this code.
@pytest.mark.slow
def test_stdlib_engine_sweep(sweep: Sweep) -> None:
    ok = sweep.by_status("ok")
    skipped = [r for r in sweep.results if r.status != "ok"]
    print(f"\nstdlib sweep: {len(sweep.results)} files, {len(ok)} linted, {len(skipped)} skipped "
          f"({', '.join(f'{s}={len(sweep.by_status(s))}' for s in ('decode', 'parse', 'nul'))}), "
          f"{sum(r.rebound for r in ok)} diagnostics on rebound trees")
    for r in skipped:
        print(f"  skipped [{r.status}] {r.path}: {r.detail}")

    # The sweep really covered the standard library and its test suite.
    assert len(ok) > 1000
    assert any(os.sep + "test" + os.sep in r.path for r in ok)
    # ... and the broken files were recognised as broken, not silently linted.
    assert 0 < len(skipped) < 50, [r.path for r in skipped]

    with_diagnostics = [r for r in ok if r.diagnostics]
    with_problems = [r for r in ok if r.problems]
    report = [f"{r.path}: {list(r.diagnostics)}" for r in with_diagnostics]
    report += [f"{r.path}: {p}" for r in with_problems for p in r.problems]
    assert not report, "\n".join(report)
    # The rebound pass does reach the lifecycle rules on real code.
    assert sum(r.rebound for r in ok) > 0


# --- flake8 level ------------------------------------------------------------------------------

FORMAT = "%(path)s:%(row)d:%(col)d: %(code)s %(text)s"
OUTPUT_LINE = re.compile(r"^(?P<path>.*?):(?P<row>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) (?P<text>.*)$")


def run_flake8(paths: Sequence[str], *extra: str, cwd, python_args: Sequence[str] = ("-m", "flake8"),
               timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAKE8")}
    return subprocess.run([sys.executable, *python_args, "--isolated", "--select=E9,XLA",
                           f"--format={FORMAT}", *extra, *paths],
                          cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)


def parse_output(result: subprocess.CompletedProcess) -> List[Dict[str, str]]:
    rows = []
    for line in result.stdout.splitlines():
        m = OUTPUT_LINE.match(line)
        assert m, f"unexpected flake8 output line {line!r}\nstderr:\n{result.stderr}"
        rows.append(m.groupdict())
    return rows


def assert_flake8_did_not_crash(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (0, 1), (result.returncode, result.stderr)
    assert "XLA000" not in result.stdout, result.stdout
    assert "failed during execution" not in result.stdout, result.stdout


@pytest.mark.slow
def test_flake8_on_broken_stdlib_files(sweep: Sweep, tmp_path) -> None:
    broken = [r.path for r in sweep.results if r.status in ("decode", "parse", "nul")]
    assert broken
    result = run_flake8(broken, cwd=tmp_path)
    print(result.stdout)
    assert_flake8_did_not_crash(result)
    rows = parse_output(result)
    assert not [r for r in rows if r["code"].startswith("XLA")], result.stdout
    assert {r["code"] for r in rows} <= {"E901", "E902", "E999"}, result.stdout
    # Every file that decodes but does not parse is reported as such by flake8.
    reported = {r["path"] for r in rows if r["code"] == "E999"}
    unparsable = {r.path for r in sweep.by_status("parse")} | {r.path for r in sweep.by_status("nul")}
    assert unparsable <= reported, sorted(unparsable - reported)


# --- handcrafted hostile inputs ------------------------------------------------------------------

def flake8_file(tmp_path, name: str, content: bytes, *extra: str, **kwargs):
    path = tmp_path / name
    path.write_bytes(content)
    result = run_flake8([name], "--xla-target-version=2.9", *extra, cwd=tmp_path, **kwargs)
    return result, parse_output(result)


def test_syntax_error_mentioning_torch_xla(tmp_path) -> None:
    result, rows = flake8_file(tmp_path, "syn.py", b"import torch_xla.core.xla_model as xm\nxm.mark_step(\n")
    assert_flake8_did_not_crash(result)
    assert [r["code"] for r in rows] == ["E999"], result.stdout
    assert rows[0]["row"] == "2"


def test_undecodable_bytes_after_utf8_cookie(tmp_path) -> None:
    # flake8 falls back to latin-1, so the file is linted; the line with the bad bytes counts them
    # as two latin-1 characters, which is what the printed column must reflect.
    content = (b"# -*- coding: utf-8 -*-\n"
               b"import torch_xla.core.xla_model as xm\n"
               b's = "\xff\xfe"; xm.mark_step()\n'
               b"xm.mark_step()\n")
    result, rows = flake8_file(tmp_path, "enc.py", content)
    assert_flake8_did_not_crash(result)
    assert result.stdout.splitlines() == [f"enc.py:3:11: {MARK_STEP_MSG}", f"enc.py:4:1: {MARK_STEP_MSG}"]


def test_nul_byte(tmp_path) -> None:
    content = b'import torch_xla.core.xla_model as xm\nxm.mark_step()\nx = "a\x00b"\n'
    result, rows = flake8_file(tmp_path, "nul.py", content)
    assert_flake8_did_not_crash(result)
    assert [r["code"] for r in rows] == ["E999"], result.stdout


def test_very_large_file(tmp_path) -> None:
    header = "import os\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
    lines = [header]
    calls = 0
    expected = []
    line_no = header.count("\n")
    for i in range(2000):
        block = (f"def step_{i}(model, batch):\n"
                 f"    loss = model(batch)\n"
                 f"    loss.backward()\n"
                 f"    xm.mark_step()\n"
                 f"    torch_xla.sync()\n"
                 f"    if loss > {i}:\n"
                 f"        value = [xm.mark_step() for _ in range(2)]\n"
                 f"    return loss\n"
                 f"\n\n")
        lines.append(block)
        expected += [(line_no + 4, 5), (line_no + 7, 18)]
        calls += 2
        line_no += block.count("\n")
    source = "".join(lines)
    assert source.count("\n") >= 20000
    result, rows = flake8_file(tmp_path, "big.py", source.encode())
    assert_flake8_did_not_crash(result)
    assert [r["code"] for r in rows] == ["XLA102"] * calls
    assert [(int(r["row"]), int(r["col"])) for r in rows] == expected


def test_deeply_nested_parentheses(tmp_path) -> None:
    depth = 90
    source = ("import torch_xla.core.xla_model as xm\n"
              "x = " + "(" * depth + "1" + ")" * depth + "\n"
              "y = " + "(" * depth + "xm.mark_step()" + ")" * depth + "\n"
              "z = " + "f(" * depth + "xm.mark_step()" + ")" * depth + "\n")
    result, rows = flake8_file(tmp_path, "nest.py", source.encode())
    assert_flake8_did_not_crash(result)
    assert result.stdout.splitlines() == [f"nest.py:3:{4 + depth + 1}: {MARK_STEP_MSG}",
                                          f"nest.py:4:{4 + 2 * depth + 1}: {MARK_STEP_MSG}"]


def _chain_source(terms: int, every: int) -> Tuple[str, List[int]]:
    parts = ["xm.mark_step()" if i % every == 0 else "a" for i in range(terms)]
    cols, col = [], len("y = ")
    for part in parts:
        if part != "a":
            cols.append(col + 1)
        col += len(part) + len(" + ")
    return "import torch_xla.core.xla_model as xm\ny = " + " + ".join(parts) + "\n", cols


RAISED_LIMIT = ("-c", "import sys; sys.setrecursionlimit(100000); from flake8.main.cli import main; "
                      "raise SystemExit(main())")


def test_long_operator_chain(tmp_path) -> None:
    """5000 ``+`` terms: a left-nested BinOp 5000 deep.

    Plain ``python -m flake8`` cannot take this file at all (CPython's ast construction and
    pyflakes recurse; see test_long_operator_chain_plain_cli), so flake8's own entry point runs
    with a raised recursion limit; flake8-xla's walk is iterative and must get every call.
    """
    source, cols = _chain_source(5000, 10)
    result, rows = flake8_file(tmp_path, "chain.py", source.encode(), python_args=RAISED_LIMIT)
    assert_flake8_did_not_crash(result)
    assert [r["code"] for r in rows] == ["XLA102"] * 500
    assert [(int(r["row"]), int(r["col"])) for r in rows] == [(2, c) for c in cols]


def test_long_operator_chain_plain_cli(tmp_path) -> None:
    """With the default recursion limit flake8 itself gives up on the 5000-term chain (CPython's
    ast.parse in flake8's processor, or pyflakes). That failure must not come from flake8-xla."""
    source, _ = _chain_source(5000, 10)
    (tmp_path / "chain.py").write_text(source)
    result = run_flake8(["chain.py"], "--xla-target-version=2.9", cwd=tmp_path)
    assert "XLA000" not in result.stdout
    assert "flake8_xla" not in result.stderr, result.stderr
    assert "flake8_xla" not in result.stdout, result.stdout
    crashed = "Traceback" in result.stderr or "failed during execution" in result.stdout
    if crashed or result.returncode not in (0, 1):
        assert "RecursionError" in result.stderr + result.stdout, result.stderr
    else:  # a future flake8/CPython that copes: then the plugin must report every call
        assert [r["code"] for r in parse_output(result)] == ["XLA102"] * 500


# --- the test suite itself ---------------------------------------------------------------------------

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
CLOCKS = {"perf_counter", "monotonic", "time", "process_time", "perf_counter_ns", "monotonic_ns", "time_ns"}


def _reads_a_clock(node: ast.AST, timed: set) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in CLOCKS:
            return True
        if isinstance(sub, (ast.Name, ast.Attribute)) and (getattr(sub, "id", None) or sub.attr) in timed:
            return True
    return False


def test_no_test_asserts_wall_clock_time() -> None:
    """Timing belongs in benchmarks/: an `assert` on a clock (or on a name assigned from one) fails
    on a loaded machine. A clock used as a hang guard that raises is fine."""
    found = []
    for root, dirs, names in os.walk(TESTS_DIR):
        dirs[:] = [d for d in dirs if d not in ("fixtures", "documents", "__pycache__")]
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            timed = {"seconds", "elapsed", "duration"}  # names that say what they hold
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and _reads_a_clock(node.value, set()):
                    timed |= {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in node.targets}
            found += [f"{os.path.relpath(path, TESTS_DIR)}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Assert) and _reads_a_clock(node.test, timed)]
    assert found == []


def test_slow_marker_selects_the_long_tests() -> None:
    modules = ["test_stdlib_sweep.py", "test_release_table.py", "test_precommit.py", "test_property.py",
               "test_packaging.py"]
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow", "--strict-markers",
                             "-p", "no:cacheprovider", *modules], cwd=TESTS_DIR, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    selected = {os.path.basename(line.split("[")[0]) for line in result.stdout.splitlines() if "::" in line}
    packaging = {f"test_packaging.py::{name}" for name in dir(__import__("test_packaging")) if name.startswith("test_")}
    assert selected == {
        "test_stdlib_sweep.py::test_stdlib_engine_sweep",
        "test_stdlib_sweep.py::test_flake8_on_broken_stdlib_files",
        "test_release_table.py::test_every_row_and_release_is_checked",
        "test_release_table.py::test_no_unexpected_disagreements",
        "test_release_table.py::test_accepted_deviations_are_still_real",
        "test_release_table.py::test_skipped_checks_are_the_documented_set",
        "test_precommit.py::test_check_hook_fails_on_a_deprecated_call",
        "test_precommit.py::test_check_hook_passes_a_clean_file",
        "test_precommit.py::test_fix_hook_rewrites_then_passes",
        "test_precommit.py::test_hooks_cover_notebooks_and_documents",
        "test_precommit.py::test_the_documented_config_pins_a_commit_with_autoupdate",
        "test_property.py::test_composed_programs_report_inside_the_file",
    } | packaging
