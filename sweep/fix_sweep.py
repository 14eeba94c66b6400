#!/usr/bin/env python3
"""Fix sweep over real trees with old torch_xla APIs (issue 12, "Done when").

For every tree under --trees (one directory per entry of sweep/repos.txt), on fresh copies:
  safe run:    flake8-xla fix --include-docs --no-cache TREE
  unsafe run:  flake8-xla fix --include-docs --no-cache --unsafe-fixes TREE
then a second identical run on each fixed copy (idempotency), and checks on every changed file.

Checks (a violation is reported as file:line and a short description):
  crash       the command printed a traceback, exited with a code other than 0/1, or ran > timeout
  compile     a changed .py file compiled before and does not after (also: a notebook cell or
              document block that parsed before and does not after)
  guard       a torch_xla / xla_compat import added at a less guarded place than any that held one
              before (unguarded top level in a module that had none there; or in a guard/scope
              that held no torch_xla import before)
  safe-dep    safe mode added an xla_compat import (any file type)
  order       a name (in particular one bound by an import the fix added) is used before it is
              bound in execution order (module level; notebook cells / document blocks in order),
              where it was not before
  shadow      a function now uses a name the fix introduced (new import alias) that the function
              binds itself (parameter or local)
  garbled     the fix introduced an identifier that is in neither the old file nor the API table
              (edit at the wrong column, e.g. after a form feed or U+2028)
  shebang     the first line was a shebang / the first two lines held a coding cookie and moved
  comment     a comment of the old file is gone (only for files whose comments were not on
              lines the migration rewrote)
  eol         the fix introduced a line ending the file did not use
  doctest     a >>> session's expected output is attached to a different statement
  files       the fix created or deleted files
  idempotent  a second run changed something

Exit status: 1 if any violation, else 0.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import collections
import concurrent.futures
import doctest
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TIMEOUT = 300
CACHE_DIRS = {".flake8_xla_cache"}
DOC_SUFFIXES = {".md", ".markdown", ".rst"}
XLA_ROOTS = ("torch_xla", "xla_compat")
SUMMARY_RE = re.compile(r"(?:Fixed|Would fix) (\d+) issues? in (\d+) files?(?: \(([^)]*)\))?")
DIAG_RE = re.compile(r"^.+?:(?:cell \d+:)?\d+:\d+: (XLA\d+|E\d+)\b", re.M)


# ----------------------------------------------------------------------------- data

@dataclass
class Violation:
    check: str
    path: str
    line: int
    what: str

    def render(self) -> str:
        return f"{self.path}:{self.line}: [{self.check}] {self.what}"


@dataclass
class RunResult:
    mode: str
    rc: Optional[int] = None
    seconds: float = 0.0
    fixed: int = 0
    fixed_by_code: Dict[str, int] = field(default_factory=dict)
    remaining: int = 0
    files_changed: List[str] = field(default_factory=list)
    second_rc: Optional[int] = None
    second_fixed: int = 0
    violations: List[Violation] = field(default_factory=list)
    summary_line: str = ""
    stderr_tail: str = ""


# ----------------------------------------------------------------------------- running

def snapshot(root: Path) -> Dict[str, bytes]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in CACHE_DIRS]
        for name in filenames:
            p = Path(dirpath, name)
            if p.is_symlink() or not p.is_file():
                continue
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


ENGINE_ENV: Optional[Dict[str, str]] = None  # environment running the engine under test
MIGRATE_TO: Optional[str] = None  # --migrate-to: run the migration fixes (XLA5xx) instead of the default rules


def export_engine(rev: str) -> Tuple[str, Path]:
    """Export REV of this repository (git archive, no checkout) so that a sweep runs exactly
    one commit, whatever others are editing in the work tree."""
    sha = subprocess.run(["git", "rev-parse", rev + "^{commit}"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout.strip()
    dest = Path(tempfile.mkdtemp(prefix=f"flake8-xla-{sha[:10]}-"))
    archive = subprocess.run(["git", "archive", sha], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return sha, dest


def run_fix(tree: Path, unsafe: bool, timeout: int) -> Tuple[Optional[int], str, str, float]:
    cmd = [sys.executable, "-m", "flake8_xla", "fix", "--include-docs", "--no-cache"]
    if unsafe:
        cmd.append("--unsafe-fixes")
    if MIGRATE_TO:
        cmd += ["--migrate-to", MIGRATE_TO]
    cmd.append(".")
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=timeout,
                           errors="replace", stdin=subprocess.DEVNULL, env=ENGINE_ENV)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err, time.monotonic() - t0


def parse_summary(stderr: str) -> Tuple[int, Dict[str, int], str]:
    m = None
    for m in SUMMARY_RE.finditer(stderr):
        pass
    if not m:
        return 0, {}, ""
    codes = {}
    for part in (m.group(3) or "").split(","):
        part = part.strip()
        if " x" in part:
            code, n = part.rsplit(" x", 1)
            codes[code] = int(n)
    line = stderr[m.start():].splitlines()[0]
    return int(m.group(1)), codes, line


def crash_violations(rc, stdout, stderr, timeout, label) -> List[Violation]:
    v = []
    if rc is None:
        v.append(Violation("crash", ".", 0, f"{label}: hang, killed after {timeout} s"))
    elif rc not in (0, 1):
        v.append(Violation("crash", ".", 0, f"{label}: exit code {rc}: {stderr.strip().splitlines()[-1:] }"))
    if "Traceback (most recent call last)" in stderr or "Traceback (most recent call last)" in stdout:
        last = [text for text in stderr.splitlines() if text.strip()][-1:] or ["?"]
        v.append(Violation("crash", ".", 0, f"{label}: traceback: {last[0][:200]}"))
    for line in stderr.splitlines():
        if line.startswith("flake8-xla: ") and ("error" in line.lower() or "XLA000" in line):
            v.append(Violation("crash", ".", 0, f"{label}: {line[:200]}"))
    for m in re.finditer(r"^(.+?):(?:cell \d+:)?(\d+):\d+: XLA000 .*$", stdout, re.M):
        v.append(Violation("crash", m.group(1), int(m.group(2)), f"{label}: internal error: {m.group(0)[:200]}"))
    return v


# ----------------------------------------------------------------------------- text helpers

def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def py_source(data: bytes) -> Optional[str]:
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(enc)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None


def parses(src: str) -> Optional[ast.AST]:
    try:
        return ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def compiles(data: bytes, name: str) -> Tuple[bool, str]:
    try:
        compile(data, name, "exec", dont_inherit=True)
        return True, ""
    except (SyntaxError, ValueError) as e:
        return False, f"{type(e).__name__}: {getattr(e, 'msg', e)} (line {getattr(e, 'lineno', '?')})"
    except RecursionError:
        return False, "RecursionError"


def line_endings(data: bytes) -> collections.Counter:
    c = collections.Counter()
    c["crlf"] = data.count(b"\r\n")
    c["cr"] = data.count(b"\r") - c["crlf"]
    c["lf"] = data.count(b"\n") - c["crlf"]
    return c


EOL_RE = re.compile(rb"(\r\n|\r|\n)")


def split_ends(data: bytes) -> List[Tuple[bytes, bytes]]:
    parts = EOL_RE.split(data)
    out = [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
    if parts[-1]:
        out.append((parts[-1], b""))
    return out


def check_endings(rel: str, old: bytes, new: bytes) -> List[Violation]:
    import difflib
    a, b = split_ends(old), split_ends(new)
    sm = difflib.SequenceMatcher(None, [x for x, _ in a], [x for x, _ in b], autojunk=False)
    bad = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
            for k in range(i2 - i1):
                ea, eb = a[i1 + k][1], b[j1 + k][1]
                if ea != eb and not (ea == b"" and i1 + k == len(a) - 1):
                    bad.append((j1 + k + 1, ea, eb))
        elif op in ("insert", "replace"):
            used = {e for _, e in a if e}
            for k in range(j1, j2):
                if b[k][1] and used and b[k][1] not in used:
                    bad.append((k + 1, b"(new line)", b[k][1]))
    if not bad:
        return []
    line, ea, eb = bad[0]
    more = f" (and {len(bad) - 1} more lines)" if len(bad) > 1 else ""
    return [Violation("eol", rel, line, f"line ending changed {ea!r} -> {eb!r}{more}")]


def comments(src: str) -> collections.Counter:
    out = collections.Counter()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.string.strip()] += 1
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


# ----------------------------------------------------------------------------- AST facts

def xla_import_root(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] in XLA_ROOTS for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] in XLA_ROOTS
    return False


def _label(node: ast.AST, part: str) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"def {node.name}"
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}"
    if isinstance(node, ast.If):
        return f"if {ast.unparse(node.test)}" + (" (else)" if part == "orelse" else "")
    if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        kinds = ",".join(ast.unparse(h.type) if h.type else "*" for h in node.handlers)
        return f"try[{kinds}] {part}"
    return ""


GUARDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.Try) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ())


def xla_imports(tree: ast.AST) -> List[Tuple[Tuple[str, ...], str, int]]:
    """(guard path, normalized import, line) of each torch_xla/xla_compat import."""
    out = []

    def visit(body, path):
        for stmt in body:
            if xla_import_root(stmt):
                out.append((path, ast.dump(stmt, annotate_fields=False), stmt.lineno))
            for part in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(stmt, part, None)
                if not sub:
                    continue
                if part == "handlers":
                    for h in sub:
                        visit(h.body, path + ((_label(stmt, "except"),) if isinstance(stmt, GUARDS) else ()))
                    continue
                if isinstance(stmt, GUARDS):
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and part != "body":
                        continue
                    visit(sub, path + (_label(stmt, part),))
                else:  # with / for / while: transparent
                    visit(sub, path)
            if isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    visit(case.body, path + (f"case {ast.unparse(case.pattern)}",))

    visit(tree.body, ())
    return out


def check_guards(rel: str, before: ast.AST, after: ast.AST) -> List[Violation]:
    b = xla_imports(before)
    a = xla_imports(after)
    if MIGRATE_TO:  # the migration rewrites `device.type == "xla"` tests: the guard is still the same one
        a = [(tuple(re.sub(r"""(\.type [!=]= )(['"])tpu\2""", r"\1\2xla\2", part) for part in path), dump, line)
             for path, dump, line in a]
    old_paths = {p for p, _, _ in b}
    old = collections.Counter((p, d) for p, d, _ in b)
    v = []
    # a try/except ImportError that tested torch_xla's presence must still test it
    new_paths = {p for p, _, _ in a}
    for path in sorted(old_paths):
        if path and path[-1].startswith("try[") and path[-1].endswith(" body") and "ImportError" in path[-1] \
                and path not in new_paths:
            line = min(l for p, _, l in b if p == path)
            v.append(Violation("guard", rel, line, f"availability guard [{' > '.join(path)}] no longer imports torch_xla "
                               "(the try body now succeeds without it)"))
    for path, dump, line in a:
        if old[(path, dump)] > 0:
            old[(path, dump)] -= 1
            continue
        if any(path[:len(op)] == op for op in old_paths):
            continue  # at or inside a guard/scope that already imported torch_xla
        what = "import added"
        kind = "xla_compat" if "xla_compat" in dump else "torch_xla"
        if not path:
            where = "at unguarded module top level"
            held = sorted({" > ".join(p) or "<top level>" for p in old_paths})
            before = "; ".join(held) or "nothing"
            v.append(Violation("guard", rel, line, f"{kind} {what} {where}; before, torch_xla was imported only in: {before}"))
        else:
            held = sorted({" > ".join(p) or "<top level>" for p in old_paths})
            before = "; ".join(held) or "nothing"
            v.append(Violation("guard", rel, line,
                               f"{kind} {what} in [{' > '.join(path)}], which held no torch_xla import; before: {before}"))
    return v


BUILTINS = set(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__",
                                 "__loader__", "__package__", "__path__", "__annotations__",
                                 "get_ipython", "display", "__debug__"}


def _bindings_and_uses(stmts: Sequence[ast.stmt], block: int):
    """Module-level (execution order) bindings and uses; function bodies are skipped
    (their uses run later), class bodies are included."""
    binds: Dict[str, Tuple] = {}
    uses: Dict[str, Tuple] = {}

    def bind(name, node):
        pos = (block, getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        binds.setdefault(name, pos)

    def use(name, node):
        pos = (block, node.lineno, node.col_offset)
        uses.setdefault(name, pos)

    class V(ast.NodeVisitor):
        def visit_Import(self, node):
            for a in node.names:
                bind(a.asname or a.name.split(".")[0], node)

        def visit_ImportFrom(self, node):
            for a in node.names:
                if a.name != "*":
                    bind(a.asname or a.name, node)

        def _func(self, node):
            for d in node.decorator_list:
                self.visit(d)
            for d in node.args.defaults + [x for x in node.args.kw_defaults if x]:
                self.visit(d)
            bind(node.name, node)

        visit_FunctionDef = visit_AsyncFunctionDef = _func

        def visit_Lambda(self, node):
            for d in node.args.defaults + [x for x in node.args.kw_defaults if x]:
                self.visit(d)

        def visit_ClassDef(self, node):
            for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                self.visit(d)
            bind(node.name, node)
            for s in node.body:
                self.visit(s)

        def _comp(self, node):
            # comprehension targets bind before the element expression runs
            for g in node.generators:
                for n in ast.walk(g.target):
                    if isinstance(n, ast.Name):
                        bind(n.id, g.iter)
            self.generic_visit(node)

        visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comp

        def visit_For(self, node):
            self.visit(node.iter)
            self.visit(node.target)
            for s in node.body + node.orelse:
                self.visit(s)

        def visit_Assign(self, node):
            self.visit(node.value)
            for t in node.targets:
                self.visit(t)

        def visit_AnnAssign(self, node):
            if node.value:
                self.visit(node.value)
            self.visit(node.target)

        def visit_AugAssign(self, node):
            self.visit(node.value)
            self.visit(node.target)

        def visit_ExceptHandler(self, node):
            if node.type:
                self.visit(node.type)
            if node.name:
                bind(node.name, node)
            for s in node.body:
                self.visit(s)

        def visit_Global(self, node):
            for n in node.names:
                bind(n, node)

        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Load):
                use(node.id, node)
            else:
                bind(node.id, node)

        def visit_MatchAs(self, node):
            if node.name:
                bind(node.name, node)
            self.generic_visit(node)

    v = V()
    for s in stmts:
        v.visit(s)
    return binds, uses


def use_before_bind(programs: Sequence[Optional[ast.AST]]) -> Dict[str, Tuple[Tuple, Optional[Tuple]]]:
    """name -> (first use, first binding or None) for names used before bound, in order."""
    binds: Dict[str, Tuple] = {}
    uses: Dict[str, Tuple] = {}
    for i, tree in enumerate(programs):
        if tree is None:
            continue
        b, u = _bindings_and_uses(tree.body, i)
        for k, pos in b.items():
            binds.setdefault(k, pos)
        for k, pos in u.items():
            uses.setdefault(k, pos)
    out = {}
    for name, upos in uses.items():
        if name in BUILTINS:
            continue
        bpos = binds.get(name)
        if bpos is None or bpos > upos:
            out[name] = (upos, bpos)
    return out


def added_import_names(before: Sequence[Optional[ast.AST]], after: Sequence[Optional[ast.AST]]) -> set:
    def names(progs):
        c = collections.Counter()
        for t in progs:
            if t is None:
                continue
            for n in ast.walk(t):
                if isinstance(n, ast.Import):
                    for a in n.names:
                        c[(a.asname or a.name.split(".")[0], ast.dump(n, annotate_fields=False))] += 1
                elif isinstance(n, ast.ImportFrom):
                    for a in n.names:
                        c[(a.asname or a.name, ast.dump(n, annotate_fields=False))] += 1
        return c
    return {name for (name, _), _n in (names(after) - names(before)).items()}


def check_order(rel: str, before: Sequence[Optional[ast.AST]], after: Sequence[Optional[ast.AST]],
                unit: str, line_of) -> List[Violation]:
    b = use_before_bind(before)
    a = use_before_bind(after)
    added = added_import_names(before, after)
    v = []
    old_first_uses = {u[:2] for u, _ in b.values()}
    for name, (upos, bpos) in sorted(a.items(), key=lambda kv: kv[1][0]):
        if name in b or upos[:2] in old_first_uses:
            continue  # already used before bound (possibly under the old alias) before the fix

        def where(pos):
            return (f"line {line_of(pos)}" if unit == "module" else
                    f"{line_of(pos)} ({unit} {pos[0] + 1}, line {pos[1]} of it)")
        if bpos is None:
            v.append(Violation("order", rel, line_of(upos), f"`{name}` used at {where(upos)} and never bound"
                               + (" (the fix added no import for it)" if name not in added else "")))
        else:
            how = "bound by an import the fix added" if name in added else "bound"
            v.append(Violation("order", rel, line_of(upos),
                               f"`{name}` used at {where(upos)} before it is {how} at {where(bpos)}"))
    return v


def check_shadow(rel: str, before: ast.AST, after: ast.AST) -> List[Violation]:
    added = added_import_names([before], [after])
    if not added:
        return []

    def funcs(tree):
        out = {}

        def visit(node, qual):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    q = qual + (child.name,)
                    if not isinstance(child, ast.ClassDef):
                        out.setdefault(q, child)
                    visit(child, q)
                else:
                    visit(child, qual)
        visit(tree, ())
        return out

    def local_facts(fn):
        params = {a.arg for a in fn.args.args + fn.args.posonlyargs + fn.args.kwonlyargs}
        if fn.args.vararg:
            params.add(fn.args.vararg.arg)
        if fn.args.kwarg:
            params.add(fn.args.kwarg.arg)
        stores, loads = set(), collections.Counter()
        stack = list(fn.body)
        while stack:
            n = stack.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                if not isinstance(n, ast.Lambda):
                    stores.add(n.name)
                continue
            if isinstance(n, ast.Name):
                (stores.add(n.id) if not isinstance(n.ctx, ast.Load) else loads.update([n.id]))
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    stores.add(a.asname or a.name.split(".")[0])
            stack.extend(ast.iter_child_nodes(n))
        return params | stores, loads

    fb, fa = funcs(before), funcs(after)
    v = []
    for q, fn in fa.items():
        local, loads = local_facts(fn)
        old_loads = local_facts(fb[q])[1] if q in fb else collections.Counter()
        for name in added & local:
            if loads[name] > old_loads[name]:
                # is the local binding an import the fix put there on purpose?  then fine
                own = any(isinstance(n, (ast.Import, ast.ImportFrom))
                          and any((a.asname or a.name.split(".")[0]) == name for a in n.names)
                          for n in ast.walk(fn))
                if own:
                    continue
                v.append(Violation("shadow", rel, fn.lineno,
                                   f"`{name}` (alias of an import the fix added) used in {'.'.join(q)}(), where `{name}` is a local/parameter"))
    return v


_VOCAB: Optional[set] = None


def vocabulary() -> set:
    global _VOCAB
    if _VOCAB is None:
        words = set()
        for p in list((REPO / "rules").glob("*")) + list((REPO / "flake8_xla").rglob("*.py")) + list((REPO / "xla_compat").rglob("*.py")):
            if p.is_file():
                words |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", p.read_text(errors="replace")))
        _VOCAB = words
    return _VOCAB


def identifiers(src: str) -> set:
    out = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.NAME:
                out.add(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        out |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", src))
    return out


def string_constants(tree: ast.AST) -> collections.Counter:
    return collections.Counter(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def check_garbled(rel: str, before: str, after: str, line_of_name, tb=None, ta=None) -> List[Violation]:
    new = identifiers(after) - identifiers(before) - vocabulary()
    v = [Violation("garbled", rel, line_of_name(n), f"identifier `{n}` appears that is in neither the old file nor the rule data (edit at a wrong offset?)")
         for n in sorted(new)]
    if tb is not None and ta is not None:
        for text in string_constants(ta) - string_constants(tb):
            m = re.search(r"\b(xr|torch_xla|xla_compat|xs|xm)\.\w+", text)
            if m and m.group(0) not in "".join(string_constants(tb)):
                v.append(Violation("garbled", rel, first_line_with(after, m.group(0)),
                                   f"the fix wrote `{m.group(0)}` into a string literal: {text[:60]!r}"))
    return v


def first_line_with(text: str, word: str) -> int:
    m = re.search(r"\b" + re.escape(word) + r"\b", text)
    return text.count("\n", 0, m.start()) + 1 if m else 0


# ----------------------------------------------------------------------------- documents

MAGIC = re.compile(r"^\s*[%!]")


def notebook_cells(data: bytes) -> Optional[List[Tuple[int, str]]]:
    """(cell index, python source with magics blanked) of code cells, or None if unreadable."""
    try:
        nb = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    cells = nb.get("cells")
    if cells is None:  # nbformat 3
        cells = [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])]
    out = []
    for i, c in enumerate(cells):
        if c.get("cell_type") != "code":
            continue
        src = c.get("source", c.get("input", ""))
        if isinstance(src, list):
            src = "".join(src)
        if src.lstrip().startswith("%%"):
            out.append((i, ""))  # cell magic: not Python
            continue
        lines = ["" if MAGIC.match(text) else text for text in src.split("\n")]
        out.append((i, "\n".join(lines)))
    return out


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\s*([\w+.-]*)")
PY_LANGS = {"python", "py", "python3", "py3", "pycon", "ipython", "ipython3", "pytb", ""}
RST_DIRECTIVE = re.compile(r"^(\s*)\.\. (code-block|code|sourcecode|testcode|doctest|ipython)::\s*(\S*)")


def _session_to_code(text: str) -> Tuple[str, List[Tuple[str, str]]]:
    try:
        examples = doctest.DocTestParser().get_examples(text)
    except ValueError:
        examples = []
    code = "".join(e.source for e in examples)
    return code, [(e.source, e.want) for e in examples]


def _dedent_lines(lines: List[str]) -> str:
    import textwrap
    return textwrap.dedent("".join(lines))


def document_blocks(text: str, suffix: str) -> List[Tuple[int, str, List[Tuple[str, str]]]]:
    """(first line, python code, doctest examples) of each python block, in order."""
    lines = text.splitlines(keepends=True)
    blocks = []
    i = 0
    if suffix in (".md", ".markdown"):
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            fence, lang = m.group(2), m.group(3).lower()
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith(fence):
                j += 1
            body = _dedent_lines(lines[i + 1:j])
            if lang in PY_LANGS:
                _add_block(blocks, i + 2, body, strict=(lang == ""))
            i = j + 1
    else:
        while i < len(lines):
            line = lines[i]
            m = RST_DIRECTIVE.match(line)
            literal = line.rstrip().endswith("::") and not line.lstrip().startswith("..")
            doct = line.lstrip().startswith(">>>")
            if not (m or literal or doct):
                i += 1
                continue
            if doct:
                j = i
                while j < len(lines) and lines[j].strip():
                    j += 1
                _add_block(blocks, i + 1, _dedent_lines(lines[i:j]), strict=False)
                i = j
                continue
            base = len(line) - len(line.lstrip())
            j = i + 1
            while j < len(lines) and (lines[j].lstrip().startswith(":") and m):
                j += 1
            start = j
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > base):
                j += 1
            body = _dedent_lines(lines[start:j])
            lang = (m.group(3).lower() if m else "")
            if (m and (lang in PY_LANGS or m.group(2) in ("testcode", "doctest"))) or literal:
                _add_block(blocks, start + 1, body, strict=not m or lang == "")
            i = j if j > i + 1 else i + 1
    return blocks


def _add_block(blocks, first_line, body, strict):
    if ">>>" in body and re.search(r"^\s*>>>", body, re.M):
        code, examples = _session_to_code(body)
        blocks.append((first_line, code, examples))
        return
    if strict and parses(body) is None:
        return
    blocks.append((first_line, body, []))


def check_doctests(rel: str, before_blocks, after_blocks) -> List[Violation]:
    v = []
    for (l_b, _c, ex_b), (l_a, _ca, ex_a) in zip(before_blocks, after_blocks):
        if not ex_b or ex_b == ex_a:
            continue

        # imports the fix added, removed or rewrote are ignored; every other statement keeps its output
        def is_imp(s, w):
            return not w and re.match(r"\s*(import|from)\s", s)

        wants_b = [w for s, w in ex_b if not is_imp(s, w)]
        wants_a = [w for s, w in ex_a if not is_imp(s, w)]
        if wants_a != wants_b:
            moved = [(s.strip(), w.strip()) for s, w in ex_a if w and (s, w) not in ex_b]
            v.append(Violation("doctest", rel, l_a, "session output attached to a different statement: "
                               + "; ".join(f"`{s[:50]}` -> `{w[:30]}`" for s, w in moved[:3])))
    return v


# ----------------------------------------------------------------------------- per file

def check_file(rel: str, old: bytes, new: bytes, safe: bool, shebang_ok=True) -> List[Violation]:
    v: List[Violation] = []
    suffix = Path(rel).suffix.lower()
    old_text, new_text = decode(old), decode(new)

    # safe mode: no companion import
    if safe:
        pat = re.compile(r"(^|[\s;>.\"'])(import\s+xla_compat|from\s+xla_compat\b)", re.M)
        if len(pat.findall(new_text)) > len(pat.findall(old_text)):
            v.append(Violation("safe-dep", rel, first_line_with(new_text, "xla_compat"), "safe fix added an xla_compat import"))

    # line endings: a line the fix kept or rewrote in place keeps its own ending
    if suffix != ".ipynb":
        v += check_endings(rel, old, new)

    if suffix in (".py", ".pyi"):
        ok_b, _ = compiles(old, rel)
        ok_a, why = compiles(new, rel)
        if ok_b and not ok_a:
            v.append(Violation("compile", rel, 0, f"no longer compiles: {why}"))
        src_b, src_a = py_source(old), py_source(new)
        # shebang / cookie
        lb, la = old_text.split("\n", 2), new_text.split("\n", 2)
        if lb and lb[0].startswith("#!") and la[0] != lb[0]:
            v.append(Violation("shebang", rel, 1, f"shebang no longer on line 1 (line 1 is now `{la[0][:60]}`)"))
        for k in range(min(2, len(lb))):
            if re.match(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+", lb[k]) and (k >= len(la) or la[k] != lb[k]):
                v.append(Violation("shebang", rel, k + 1, "coding cookie moved off its line"))
        if src_b is None or src_a is None:
            return v
        tb, ta = parses(src_b), parses(src_a)
        if tb is None or ta is None:
            return v
        v += check_guards(rel, tb, ta)
        v += check_order(rel, [tb], [ta], "module", lambda pos: pos[1])
        v += check_shadow(rel, tb, ta)
        v += check_garbled(rel, src_b, src_a, lambda n: first_line_with(src_a, n), tb, ta)
        lost = comments(src_b) - comments(src_a)
        for c, n in lost.items():
            v.append(Violation("comment", rel, first_line_with(src_b, c.lstrip("# ").split(" ")[0]) if c.lstrip("# ") else 0,
                               f"comment lost: `{c[:70]}`" + (f" (x{n})" if n > 1 else "")))
        return v

    if suffix == ".ipynb":
        cb, ca = notebook_cells(old), notebook_cells(new)
        if cb is None:
            return v
        if ca is None:
            v.append(Violation("compile", rel, 0, "notebook no longer valid JSON"))
            return v
        v += _check_program(rel, [s for _, s in cb], [s for _, s in ca], "cell",
                            lambda pos, cells=ca: f"cell {cells[pos[0]][0] + 1}" if pos[0] < len(cells) else 0)
        return v

    if suffix in DOC_SUFFIXES:
        bb, ba = document_blocks(old_text, suffix), document_blocks(new_text, suffix)
        v += _check_program(rel, [c for _, c, _ in bb], [c for _, c, _ in ba], "block",
                            lambda pos, blocks=ba: (blocks[pos[0]][0] + pos[1] - 1) if pos[0] < len(blocks) else 0)
        # (line numbers in sessions are approximate: prompts are stripped)
        v += check_doctests(rel, bb, ba)
        return v
    return v


def _check_program(rel, before_src: List[str], after_src: List[str], unit: str, line_of) -> List[Violation]:
    v = []
    tb = [parses(s) for s in before_src]
    ta = [parses(s) for s in after_src]
    if len(tb) == len(ta):
        for i, (x, y) in enumerate(zip(tb, ta)):
            if x is not None and y is None:
                v.append(Violation("compile", rel, line_of((i, 1, 0)), f"{unit} {i + 1} parsed before the fix and does not after"))
    else:
        v.append(Violation("compile", rel, 0, f"number of python {unit}s changed {len(tb)} -> {len(ta)}"))
    v += check_order(rel, tb, ta, unit, line_of)
    # a document/notebook must not gain an unguarded torch_xla import it did not have: not checked
    # (notebooks and guides import torch_xla unconditionally anyway)
    new_ids = set().union(*[identifiers(s) for s in after_src]) if after_src else set()
    old_ids = set().union(*[identifiers(s) for s in before_src]) if before_src else set()
    for n in sorted(new_ids - old_ids - vocabulary()):
        v.append(Violation("garbled", rel, 0, f"identifier `{n}` appears that is in neither the old {unit}s nor the rule data"))
    return v


# ----------------------------------------------------------------------------- per tree

def sweep_mode(tree: Path, work: Path, unsafe: bool, timeout: int) -> RunResult:
    mode = "unsafe" if unsafe else "safe"
    res = RunResult(mode)
    copy = work / mode / tree.name
    shutil.copytree(tree, copy, symlinks=True)
    before = snapshot(copy)
    rc, out, err, secs = run_fix(copy, unsafe, timeout)
    res.rc, res.seconds = rc, secs
    res.fixed, res.fixed_by_code, res.summary_line = parse_summary(err)
    res.remaining = len(DIAG_RE.findall(out))
    res.stderr_tail = "\n".join(err.strip().splitlines()[-3:])
    res.violations += crash_violations(rc, out, err, timeout, f"{mode} run")
    after = snapshot(copy)
    for rel in sorted(set(before) | set(after)):
        if rel not in after:
            res.violations.append(Violation("files", rel, 0, "file deleted by the fix"))
        elif rel not in before:
            res.violations.append(Violation("files", rel, 0, "file created by the fix"))
        elif before[rel] != after[rel]:
            res.files_changed.append(rel)
            try:
                res.violations += check_file(rel, before[rel], after[rel], safe=not unsafe)
            except Exception as e:  # a bug in the checker must not hide the others
                res.violations.append(Violation("sweep-error", rel, 0, f"checker failed: {type(e).__name__}: {e}"))
    if rc is not None:
        rc2, out2, err2, _ = run_fix(copy, unsafe, timeout)
        res.second_rc = rc2
        res.second_fixed, _, _ = parse_summary(err2)
        res.violations += crash_violations(rc2, out2, err2, timeout, f"{mode} second run")
        again = snapshot(copy)
        for rel in sorted(set(after) | set(again)):
            if after.get(rel) != again.get(rel):
                res.violations.append(Violation("idempotent", rel, 0, f"second {mode} run changed the file again"))
    return res


def sweep_tree(tree: Path, keep_dir: Optional[Path], timeout: int) -> Dict:
    work = Path(tempfile.mkdtemp(prefix=f"sweep-{tree.name}-", dir=keep_dir))
    try:
        runs = [sweep_mode(tree, work, unsafe=False, timeout=timeout),
                sweep_mode(tree, work, unsafe=True, timeout=timeout)]
    finally:
        if keep_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    origin = (tree / ".sweep-origin").read_text().strip() if (tree / ".sweep-origin").exists() else ""
    return {"tree": tree.name, "origin": origin, "work": str(work) if keep_dir else None,
            "runs": [r.__dict__ | {"violations": [x.__dict__ for x in r.violations]} for r in runs]}


def render_text(results: List[Dict], head: str) -> str:
    out = [f"flake8-xla fix sweep at {head}" + (f" (--migrate-to {MIGRATE_TO})" if MIGRATE_TO else ""), ""]
    for r in results:
        out.append(f"== {r['tree']}  ({r['origin']})")
        for run in r["runs"]:
            codes = ", ".join(f"{k} x{n}" for k, n in sorted(run["fixed_by_code"].items()))
            out.append(f"  {run['mode']:6} rc={run['rc']} {run['seconds']:.1f}s  files changed={len(run['files_changed'])}"
                       f"  fixes={run['fixed']} ({codes})  remaining={run['remaining']}"
                       f"  second run: rc={run['second_rc']} fixed={run['second_fixed']}  violations={len(run['violations'])}")
            for f in run["files_changed"]:
                out.append(f"      changed: {f}")
            for v in run["violations"]:
                out.append("      VIOLATION " + Violation(**v).render())
        out.append("")
    out.append("Summary")
    hdr = f"{'tree':22} {'mode':6} {'files':>5} {'fixes':>5} {'remain':>6} {'viol':>4}  by check"
    out.append(hdr)
    out.append("-" * len(hdr))
    total = 0
    for r in results:
        for run in r["runs"]:
            by = collections.Counter(v["check"] for v in run["violations"])
            total += len(run["violations"])
            out.append(f"{r['tree']:22} {run['mode']:6} {len(run['files_changed']):5} {run['fixed']:5} {run['remaining']:6} "
                       f"{len(run['violations']):4}  {', '.join(f'{k}={n}' for k, n in sorted(by.items()))}")
    out.append(f"total violations: {total}")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- canary

XM = "import torch_xla.core.xla_model as xm"
CANARY_FILES = {
    # issue-12 defect 4: no top-level import; the fix must not push the shebang/cookie down
    "shebang.py": "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n\"\"\"Script.\"\"\"\n\n\ndef main():\n"
                  "    " + XM + "\n    return xm.get_ordinal()\n",
    "shebang_bare.py": "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\nprint('caf\xe9')\n\n\ndef main():\n"
                       "    " + XM + "\n    return xm.get_ordinal()\n",
    # defect 1: a form feed line before the edit
    "formfeed.py": XM + "\n\x0c\nn = xm.xrt_world_size()\n",
    # defect 1: U+2028 inside a string before the edit
    "u2028.py": XM + "\nlabel = 'a\u2028b'; n = xm.xrt_world_size()\n",
    # defect 8: mixed and CR-only endings
    "mixed_eol.py": XM + "\r\nn = xm.xrt_world_size()\nr = xm.get_ordinal()\r\n",
    "cr_only.py": XM + "\rn = xm.xrt_world_size()\r",
    # defect 5: a parameter named like the alias the fix wants
    "shadow.py": XM + "\n\n\ndef total(xr):\n    return xm.xrt_world_size() + xr\n",
    # defect 3: import and use on one line
    "oneline.py": XM + "; WORLD = xm.xrt_world_size()\n",
    # defect 7: an import carrying a comment
    "comment.py": XM + "  # keep: registers the device\nn = xm.xrt_world_size()\n",
    # defect 2: guarded import in a library
    "guarded.py": "try:\n    " + XM + "\n    HAS_XLA = True\nexcept ImportError:\n    HAS_XLA = False\n\n\n"
                  "def world():\n    return xm.xrt_world_size() if HAS_XLA else 1\n",
    # defect 2: lazy import in a function
    "lazy.py": "def world():\n    " + XM + "\n    return xm.xrt_world_size()\n",
    # defect 9: companion-only replacement in safe mode
    "companion.py": XM + "\nxm.rendezvous('init')\n",
    # defect 6: doctest session output
    "session.md": "Example:\n\n```pycon\n>>> " + XM + "\n>>> n = xm.xrt_world_size()\n>>> n\n8\n```\n",
    # defect 3: Markdown blocks form one program
    "guide.md": "Set up:\n\n```python\nimport torch\n" + XM + "\n```\n\nUse:\n\n```python\nn = xm.xrt_world_size()\n```\n\n"
                "Later:\n\n```python\ndev = xm.xla_device()\n```\n",
}
CANARY_NOTEBOOK = {"cells": [
    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
     "source": ["!pip install torch_xla\n", "import torch\n"]},
    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
     "source": [XM + "\n", "dev = xm.xla_device()\n"]},
    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
     "source": ["n = xm.xrt_world_size()\n"]},
], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def make_canary(dest: Path) -> None:
    """Write a tree of small hostile inputs (one per issue-12 defect) to check the checker."""
    tree = dest / "canary"
    tree.mkdir(parents=True, exist_ok=True)
    for name, text in CANARY_FILES.items():
        enc = "latin-1" if name.startswith("shebang") else "utf-8"
        (tree / name).write_bytes(text.encode(enc))
    (tree / "notebook.ipynb").write_text(json.dumps(CANARY_NOTEBOOK, indent=1) + "\n")
    print(f"canary tree written to {tree}; run: fix_sweep.py --trees {dest}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", default="/work/sweep-trees", help="directory holding one directory per tree")
    ap.add_argument("--only", action="append", help="tree name (repeatable, or comma-separated)")
    ap.add_argument("--keep", action="store_true", help="keep the fixed copies (path printed)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    ap.add_argument("--timeout", type=int, default=TIMEOUT, help="seconds per fix run (default 300)")
    ap.add_argument("-j", "--jobs", type=int, default=4, help="trees swept in parallel")
    ap.add_argument("--rev", default="HEAD", help="commit of flake8-xla to sweep (exported with git archive; default HEAD)")
    ap.add_argument("--worktree", action="store_true", help="sweep the installed/work-tree flake8-xla instead of --rev")
    ap.add_argument("--migrate-to", metavar="PLATFORM", help="pass --migrate-to PLATFORM (e.g. torchtpu) to each fix run: "
                    "the migration fixes instead of the default rules")
    ap.add_argument("--make-canary", metavar="DIR", help="write a tree of hostile inputs to DIR/canary and exit")
    args = ap.parse_args(argv)
    if args.make_canary:
        make_canary(Path(args.make_canary))
        return 0
    root = Path(args.trees)
    trees = sorted(p for p in root.iterdir() if p.is_dir())
    if args.only:
        wanted = {n for o in args.only for n in o.split(",")}
        trees = [t for t in trees if t.name in wanted]
        missing = wanted - {t.name for t in trees}
        if missing:
            print(f"fix_sweep: no tree named {', '.join(sorted(missing))} in {root}", file=sys.stderr)
            return 2
    keep_dir = Path(tempfile.mkdtemp(prefix="fix-sweep-")) if args.keep else None
    global ENGINE_ENV, REPO, MIGRATE_TO
    MIGRATE_TO = args.migrate_to
    engine_dir = None
    if args.worktree:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        head += " + work tree (uncommitted changes included)"
    else:
        head, engine_dir = export_engine(args.rev)
        ENGINE_ENV = dict(os.environ, PYTHONPATH=str(engine_dir))
        REPO = engine_dir  # the rule vocabulary comes from the swept commit too
    vocabulary()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
        results = list(ex.map(lambda t: sweep_tree(t, keep_dir, args.timeout), trees))
    if engine_dir is not None:
        shutil.rmtree(engine_dir, ignore_errors=True)
    if args.json:
        json.dump({"head": head, "trees": results}, sys.stdout, indent=1)
        print()
    else:
        sys.stdout.write(render_text(results, head))
        if keep_dir:
            print(f"fixed copies kept in {keep_dir}")
    return 1 if any(run["violations"] for r in results for run in r["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
