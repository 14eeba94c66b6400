#!/usr/bin/env python3
"""The language server's code actions over the real trees of sweep/repos.txt (issue 16).

For every .py file and notebook of each tree under --trees, the file is opened the way the server
opens a buffer (settings found from its directory, a notebook as its cells), and for every
diagnostic:
  quick fix   the diagnostic's own fix (flake8_xla.lsp.buffers.Linter.quick_fix), checked with
              fix_sweep.check_file (compile, guard, safe-dep, order, shadow, garbled, comment, eol,
              shebang) and:
                gone     the fixed text reports fewer diagnostics of that code than before
                others   no other code's count went up
  noqa        the "add # noqa" action (noqa_texts): that code's count drops by one, no other
              count changes, the file still compiles, and the edit only appends the comment to
              the end of one line (or a code to its noqa comment)
Nothing is written to the trees. Prints a summary per tree and each violation; exit status 1 if
any violation.

    python sweep/quick_fix_sweep.py [--trees /work/sweep-trees] [-j 2] [--only NAME ...]
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fix_sweep import Violation, check_file  # noqa: E402 - the fix sweep's checks

from flake8_xla.lsp.buffers import Buffer, Cell, Linter, noqa_texts  # noqa: E402
from flake8_xla.lsp.settings import ProjectSettings  # noqa: E402


def buffer_of(path: Path) -> Buffer:
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    if path.suffix != ".ipynb":
        return Buffer(path.as_uri(), str(path), 1, text)
    cells = []
    for n, cell in enumerate(json.loads(text).get("cells", [])):
        source = cell.get("source", "")
        cells.append(Cell(f"cell:{n}", cell.get("cell_type") == "code", "python",
                          "".join(source) if isinstance(source, list) else str(source)))
    return Buffer.notebook(path.as_uri(), str(path), 1, tuple(cells))


def changed(buffer: Buffer, texts: Dict[str, str]) -> Buffer:
    if not buffer.cells:
        return buffer._replace(text=texts[buffer.uri], version=2)
    cells = tuple(cell._replace(text=texts.get(cell.uri, cell.text)) for cell in buffer.cells)
    return Buffer.notebook(buffer.uri, buffer.path, 2, cells)


def counts(linter: Linter, buffer: Buffer) -> collections.Counter:
    return collections.Counter(r.finding.diagnostic.code for r in linter.lint(buffer))


def sweep_file(path: Path, rel: str, projects: ProjectSettings) -> Tuple[collections.Counter, List[Violation]]:
    stats: collections.Counter = collections.Counter()
    violations: List[Violation] = []
    try:
        buffer = buffer_of(path)
    except (ValueError, OSError) as exc:
        stats["unreadable"] += 1
        return stats, [Violation("read", rel, 0, str(exc))] if path.suffix != ".ipynb" else []
    resolved = projects.for_path(str(path))
    linter = Linter(resolved.settings, resolved.selector)
    reported = linter.lint(buffer)
    before = collections.Counter(r.finding.diagnostic.code for r in reported)
    for item in reported:
        d = item.finding.diagnostic
        where = f"{d.line}" if item.finding.cell is None else f"cell {item.finding.cell}:{d.line}"
        stats["diagnostics"] += 1
        fix = linter.quick_fix(buffer, item)
        if fix is not None:
            stats["quick fix (safe)" if fix.safe else "quick fix (unsafe)"] += 1
            after_buffer = changed(buffer, fix.texts)
            violations += [Violation(v.check, v.path, v.line, f"{d.code} at {where}: {v.what}")
                           for v in check_file(rel, buffer.text.encode(), after_buffer.text.encode(), fix.safe)]
            after = counts(linter, after_buffer)
            if after[d.code] >= before[d.code]:
                violations.append(Violation("gone", rel, d.line, f"{d.code} at {where}: still reported after its fix"))
            grown = [code for code in after if after[code] > before[code]]
            if grown:
                violations.append(Violation("others", rel, d.line, f"{d.code} at {where}: fix raised {grown}"))
        elif item.finding.fixable:
            violations.append(Violation("missing", rel, d.line, f"{d.code} at {where}: fixable, no quick fix"))
        texts = noqa_texts(buffer, item)
        if texts:
            stats["noqa"] += 1
            after_buffer = changed(buffer, texts)
            after = counts(linter, after_buffer)
            expected = before.copy()
            expected[d.code] -= 1
            if +after != +expected:
                violations.append(Violation("noqa", rel, d.line,
                                            f"{d.code} at {where}: {dict(before)} -> {dict(after)}"))
            violations += [Violation(v.check, v.path, v.line, f"noqa {d.code} at {where}: {v.what}")
                           for v in check_file(rel, buffer.text.encode(), after_buffer.text.encode(), True)
                           if v.check in ("compile", "eol")]
            violations += [Violation("noqa", rel, d.line, f"{d.code} at {where}: {problem}")
                           for problem in appended_only(buffer, texts)]
        else:
            stats["no noqa"] += 1
    return stats, violations


def appended_only(buffer: Buffer, texts: Dict[str, str]) -> List[str]:
    """What the noqa edit did besides adding ``  # noqa: CODE`` (or ``, CODE``) to the end of one
    line: the line's code and any comment already there stay as they were."""
    problems = []
    for uri, new in texts.items():
        old_lines, new_lines = (buffer.text_of(uri) or "").splitlines(), new.splitlines()
        differing = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
        if len(old_lines) != len(new_lines) or len(differing) != 1:
            problems.append(f"{len(differing)} lines changed, {len(new_lines) - len(old_lines)} added")
        elif not (differing[0][1].startswith(differing[0][0].rstrip()) or "# noqa:" in differing[0][0]):
            problems.append(f"line rewritten: {differing[0][0]!r} -> {differing[0][1]!r}")
    return problems


def sweep_tree(tree: Path) -> Tuple[str, collections.Counter, List[Violation]]:
    projects = ProjectSettings()
    stats: collections.Counter = collections.Counter()
    violations: List[Violation] = []
    for path in sorted(p for p in tree.rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file()):
        file_stats, file_violations = sweep_file(path, str(path.relative_to(tree.parent)), projects)
        stats += file_stats
        violations += file_violations
    return tree.name, stats, violations


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default="/work/sweep-trees")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="tree names")
    args = parser.parse_args(argv)
    trees = sorted(p for p in Path(args.trees).iterdir() if p.is_dir() and (not args.only or p.name in args.only))
    total: collections.Counter = collections.Counter()
    failed = 0
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for name, stats, violations in pool.map(sweep_tree, trees):
            total += stats
            failed += len(violations)
            print(f"{name}: {dict(sorted(stats.items()))}; {len(violations)} violation(s)")
            for v in violations:
                print(f"  {v.render()}")
    print(f"total: {dict(sorted(total.items()))}; {failed} violation(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
