#!/usr/bin/env python3
"""Real-code sweep: lint the trees of manifest.txt and diff the findings against the review log.

For each tree (extracted by fetch.sh under $TREES, default /work/realcode-trees) this runs

    python -m flake8_xla check --format json --no-cache --include-docs --isolated \
        --xla-target-version 2.9 --extend-select XLA9 --exit-zero .

from the tree's root, then the same with `--migrate-to torchtpu` for the XLA5xx rules (which run only
there), writes the normalized findings (path, line, col, code, message, source
text) to OUT/<name>.json, and matches them with review/<name>.tsv. A finding and a review
row match on (path, code, stripped source-line text), not on the line number, so a review
survives an engine change that moves a column or a line. Rows and findings with the same key
are paired in line order.

It prints, per rule: diagnostics found, reviewed TP, reviewed FP, unreviewed, and precision
TP/(TP+FP) over the reviewed ones; then the unreviewed findings and the review rows whose
finding disappeared. Exit status 1 when a default-on rule's precision is below --min-precision
(0.9) or an XLA2xx/XLA3xx finding is unreviewed; 0 with --report-only.

--append-unreviewed adds each unreviewed finding to its tree's review log with verdict `?`
(counted as unreviewed until a reviewer writes TP or FP and a reason).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MANIFEST = os.path.join(HERE, "manifest.txt")
REVIEW_DIR = os.path.join(HERE, "review")
MISSES = os.path.join(REVIEW_DIR, "misses.tsv")
COLUMNS = ["path", "line", "code", "verdict", "source", "reason"]
CHECK_ARGS = ["check", "--format", "json", "--no-cache", "--include-docs", "--isolated",
              "--xla-target-version", "2.9", "--extend-select", "XLA9", "--exit-zero", "."]
# a second pass for the TorchTPU migration rules (XLA5xx), which run only under --migrate-to and alone
MIGRATE_ARGS = ["check", "--format", "json", "--no-cache", "--include-docs", "--isolated",
                "--migrate-to", "torchtpu", "--exit-zero", "."]


def read_manifest(path: str = MANIFEST) -> List[Tuple[str, str, str, str]]:
    entries = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            repo, commit, paths, name = line.split()
            entries.append((repo, commit, paths, name))
    return entries


def default_on_codes(python: str) -> Tuple[set, set]:
    """Codes of the rules table (`flake8-xla rules`): (default-on, all)."""
    # not from the repository root: `python -m` puts the working directory first on sys.path
    proc = subprocess.run([python, "-m", "flake8_xla", "rules"], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    if proc.returncode:
        raise SystemExit(f"`{python} -m flake8_xla rules` failed (is flake8_xla importable?):\n{proc.stderr}")
    # the rules table loads without them, but every lint would then be one XLA000 per file
    deps = subprocess.run([python, "-c", "import ast_grep_py, yaml"], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    if deps.returncode:
        raise SystemExit(f"{python} lacks flake8-xla's dependencies (activate the venv?):\n{deps.stderr}")
    out = proc.stdout
    on, every = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("XLA") and parts[0][3:].isdigit():
            every.add(parts[0])
            if parts[-1] == "on" or parts[0].startswith("XLA5"):  # migration rules: on under --migrate-to
                on.add(parts[0])
    return on, every


class SourceCache:
    """Source-line text of a finding: a file line, or a line of a notebook code cell."""

    def __init__(self, root: str):
        self.root = root
        self.files: Dict[str, List[str]] = {}
        self.cells: Dict[str, List[List[str]]] = {}

    def line(self, path: str, line: int, cell: Optional[int]) -> str:
        full = os.path.join(self.root, path)
        try:
            if cell is not None:
                if path not in self.cells:
                    with open(full, encoding="utf-8") as f:
                        nb = json.load(f)
                    self.cells[path] = [
                        ("".join(c["source"]) if isinstance(c.get("source"), list)
                         else c.get("source", "")).split("\n")
                        for c in nb.get("cells", [])]
                return self.cells[path][cell - 1][line - 1].strip()
            if path not in self.files:
                with open(full, encoding="utf-8", errors="replace", newline="") as f:
                    # the tokenizer's line model: \n, \r\n and \r end a line, nothing else does
                    self.files[path] = f.read().replace("\r\n", "\n").replace("\r", "\n").split("\n")
            return self.files[path][line - 1].strip()
        except (OSError, ValueError, IndexError, KeyError):
            return ""


def _check(python: str, root: str, args: List[str]) -> List[dict]:
    proc = subprocess.run([python, "-m", "flake8_xla", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"flake8-xla failed in {root} (rc {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout or "[]")


def lint_tree(python: str, root: str) -> List[dict]:
    raw = _check(python, root, CHECK_ARGS)
    raw += [d for d in _check(python, root, MIGRATE_ARGS) if d["code"].startswith("XLA5")]
    src = SourceCache(root)
    found = []
    for d in raw:
        path = d["filename"]
        if path.startswith("./"):
            path = path[2:]
        cell = d.get("cell")
        found.append({
            "path": path,
            "line": f"{cell}:{d['line']}" if cell is not None else str(d["line"]),
            "col": d["column"],
            "code": d["code"],
            "message": d["message"],
            "source": src.line(path, d["line"], cell),
        })
    found.sort(key=lambda x: (x["path"], _line_key(x["line"]), x["col"], x["code"]))
    return found


def _line_key(line: str) -> Tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(line).split(":"))
    except ValueError:
        return (0,)


def read_review(name: str) -> List[dict]:
    path = os.path.join(REVIEW_DIR, f"{name}.tsv")
    rows: List[dict] = []
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            raw = raw.rstrip("\n")
            if not raw.strip() or raw.startswith("#") or raw.startswith("path\t"):
                continue
            parts = raw.split("\t")
            if len(parts) < 5:
                sys.stderr.write(f"{path}:{n}: expected {len(COLUMNS)} tab-separated columns\n")
                continue
            row = dict(zip(COLUMNS, parts + [""] * (len(COLUMNS) - len(parts))))
            row["source"] = row["source"].strip()
            row["verdict"] = row["verdict"].strip().upper()
            rows.append(row)
    return rows


def escape(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ")


def append_review(name: str, findings: List[dict]) -> None:
    path = os.path.join(REVIEW_DIR, f"{name}.tsv")
    new = not os.path.exists(path)
    os.makedirs(REVIEW_DIR, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        if new:
            f.write("\t".join(COLUMNS) + "\n")
        for x in findings:
            f.write("\t".join([x["path"], x["line"], x["code"], "?", escape(x["source"]), ""]) + "\n")


def match(found: List[dict], rows: List[dict]) -> Tuple[List[Tuple[dict, Optional[dict]]], List[dict]]:
    """Pair findings with review rows by (path, code, source text), in line order."""
    by_key: Dict[tuple, List[dict]] = collections.defaultdict(list)
    for r in sorted(rows, key=lambda r: _line_key(r["line"])):
        by_key[(r["path"], r["code"], r["source"])].append(r)
    pairs = []
    for x in found:
        bucket = by_key.get((x["path"], x["code"], x["source"]))
        pairs.append((x, bucket.pop(0) if bucket else None))
    gone = [r for bucket in by_key.values() for r in bucket]
    return pairs, gone


def read_misses(path: str = MISSES) -> List[dict]:
    """review/misses.tsv: what the rules should report and did not when it was written."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


def _reports(found: List[dict], path: str, line: str, expected: str) -> bool:
    """A finding on that line (or in that range of lines) under the expected code, or any graph code
    for a graph miss (a host read reported as a tensor branch is still found); ``expected`` may be a
    whole family (``XLA3``)."""
    first, _, last = line.partition("-")  # "98-100": one sync that any of those lines reports
    lines = {str(n) for n in range(int(first), int(last) + 1)} if last else {line}
    return any(x["path"] == path and str(x["line"]) in lines and
               (x["code"].startswith(expected) or expected.startswith("XLA3") and x["code"].startswith("XLA3"))
               for x in found)


FAMILIES = (("XLA2", "FSDP and checkpoints (XLA2xx)"), ("XLA3", "host syncs per step (XLA3xx)"),
            ("XLA4", "saves of XLA tensors (XLA4xx)"), ("XLA6", "pitfalls (XLA6xx)"))


def read_rounds(path: str = MANIFEST) -> Dict[str, str]:
    """Tree name -> the round that added it: the last ``issue NN`` named by a ``# ---`` section header
    above its manifest line ("issue 13" before any)."""
    rounds, current = {}, "issue 13"
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if line.startswith("# ---"):
                words = line.replace(":", " ").replace("(", " ").split()
                for a, b in zip(words, words[1:]):
                    if a == "issue" and b.isdigit():
                        current = f"issue {b}"
                        break
            elif line and not line.startswith("#"):
                rounds[line.split()[3]] = current
    return rounds


def recall(found_by_tree: Dict[str, List[dict]], tp_rows: List[Tuple[str, dict, bool]],
           rounds: Optional[Dict[str, str]] = None) -> List[str]:
    """Recall per family: of the misses of review/misses.tsv, how many are reported now; and of every
    known place (the reviewed TPs of the family and the misses), how many. Printed for every tree, then
    for the newest round's trees and the earlier ones apart (fresh trees run below the reviewed ones)."""
    rounds = rounds or {}
    newest = max(rounds.values(), key=lambda r: int(r.split()[1]), default=None)
    groups = [("all trees", set(found_by_tree))]
    if newest is not None and len(set(rounds.values())) > 1:
        groups += [(f"{newest} trees", {t for t in found_by_tree if rounds.get(t) == newest}),
                   ("earlier trees", {t for t in found_by_tree if rounds.get(t) != newest})]
    out = []
    for family, title in FAMILIES:
        misses = [m for m in read_misses() if m["tree"] in found_by_tree and m["expected"].startswith(family)]
        graph = family == "XLA3"
        for label, trees in groups:
            # one entry per reviewed line: a TP reported under another graph code now (XLA303 -> XLA307) is found
            known: Dict[Tuple[str, str, str], bool] = {}
            for tree, row, _ in tp_rows:
                if tree in trees and row["code"].startswith(family):
                    key = (tree, row["path"], str(row["line"]))
                    code = family if graph else row["code"]
                    known[key] = known.get(key, False) or _reports(found_by_tree[tree], row["path"], str(row["line"]),
                                                                   code)
            for scope in ("user", "all") if graph else ("all",):
                chosen = [m for m in misses if m["tree"] in trees and (scope == "all" or m["scope"] == scope)]
                if not chosen and not known:
                    continue
                hit = [m for m in chosen if _reports(found_by_tree[m["tree"]], m["path"], m["line"], m["expected"])]
                extra = [m for m in chosen if (m["tree"], m["path"], m["line"]) not in known]
                total = len(known) + len(extra)
                now = sum(known.values()) + sum(1 for m in extra if m in hit)
                where = label + ("" if not graph else ", user code" if scope == "user" else ", user and library code")
                out.append(f"{family} recall ({where}): misses reported {len(hit)}/{len(chosen)}"
                           f" ({len(hit) / len(chosen) if chosen else 0:.2f}); known places reported {now}/{total}"
                           f" ({now / total if total else 0:.2f})")
        still = [m for m in misses if not _reports(found_by_tree[m["tree"]], m["path"], m["line"], m["expected"])]
        if still:
            out.append(f"{family} misses still missed: " +
                       ", ".join(f"{m['tree']}/{m['path']}:{m['line']}" for m in still))
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="trees to run (default: every tree of the manifest)")
    ap.add_argument("--trees", default=os.environ.get("TREES", "/work/realcode-trees"))
    ap.add_argument("--manifest", default=os.environ.get("MANIFEST", MANIFEST),
                    help="the list of trees (default: manifest.txt here; fetch.sh reads $MANIFEST too)")
    ap.add_argument("--out", help="where OUT/<name>.json go (default: a new temporary directory)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with flake8_xla installed")
    ap.add_argument("--min-precision", type=float, default=0.9)
    ap.add_argument("--report-only", action="store_true", help="always exit 0")
    ap.add_argument("--append-unreviewed", action="store_true",
                    help="append unreviewed findings to review/<name>.tsv with verdict ?")
    ap.add_argument("--list", choices=["review", "new", "gone", "all", "none"], default="review",
                    help="per-finding lists: review (default: new XLA2xx/XLA3xx/XLA9xx findings and every "
                         "gone row; unreviewed XLA1xx, which are only sampled, are counted), new, gone, all, none")
    ap.add_argument("--table", help="also write the per-rule table (Markdown) to this file")
    ap.add_argument("--at", metavar="REV",
                    help="lint with flake8_xla/ and rules/ as committed at REV (git archive into a "
                         "temporary directory put first on PYTHONPATH) instead of the installed copy; "
                         "use it when the work tree has uncommitted edits")
    args = ap.parse_args(argv)

    entries = read_manifest(args.manifest)
    names = [e[3] for e in entries]
    unknown = [n for n in args.names if n not in names]
    if unknown:
        ap.error(f"not in the manifest: {', '.join(unknown)}")
    selected = args.names or names
    out = args.out or tempfile.mkdtemp(prefix="realcode-")
    os.makedirs(out, exist_ok=True)
    if args.at:
        rev = subprocess.run(["git", "rev-parse", args.at], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.strip()
        src = tempfile.mkdtemp(prefix="realcode-src-")
        tar = subprocess.run(["git", "archive", rev, "flake8_xla", "rules"], cwd=REPO,
                             capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", src], input=tar, check=True)
        os.environ["PYTHONPATH"] = src + os.pathsep + os.environ.get("PYTHONPATH", "")
        print(f"flake8-xla at {rev} (from {src})")
    else:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "flake8_xla", "rules"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        edits = " with uncommitted edits in flake8_xla/ or rules/" if dirty else ""
        print(f"flake8-xla: installed copy; HEAD {rev}{edits}")
    on, every = default_on_codes(args.python)

    stats: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    tp_rows: List[Tuple[str, dict, bool]] = []  # (tree, reviewed XLA2/3/4/6 TP row, still reported)
    found_by_tree: Dict[str, List[dict]] = {}
    new_list: List[Tuple[str, dict]] = []
    gone_list: List[Tuple[str, dict]] = []
    missing = []
    for name in selected:
        root = os.path.join(args.trees, name)
        if not os.path.isdir(root):
            missing.append(name)
            continue
        found = lint_tree(args.python, root)
        with open(os.path.join(out, f"{name}.json"), "w", encoding="utf-8") as f:
            json.dump(found, f, indent=1)
        rows = read_review(name)
        pairs, gone = match(found, rows)
        found_by_tree[name] = found
        tp_rows.extend((name, r, True) for x, r in pairs if r and r["verdict"] == "TP" and r["code"][3] in "2346")
        tp_rows.extend((name, r, False) for r in gone if r["verdict"] == "TP" and r["code"][3] in "2346")
        unreviewed = []
        for x, r in pairs:
            s = stats[x["code"]]
            s["found"] += 1
            verdict = r["verdict"] if r else ""
            if verdict in ("TP", "FP"):
                s[verdict] += 1
            else:
                s["unreviewed"] += 1
                if r is None:
                    unreviewed.append(x)
                    new_list.append((name, x))
        for r in gone:
            gone_list.append((name, r))
        if args.append_unreviewed and unreviewed:
            append_review(name, unreviewed)

    if missing:
        print(f"trees not extracted (run fetch.sh): {', '.join(missing)}", file=sys.stderr)
    fail = []
    lines = ["| rule | default | found | TP | FP | unreviewed | precision |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for code in sorted(stats):
        s = stats[code]
        judged = s["TP"] + s["FP"]
        prec = s["TP"] / judged if judged else None
        default = "on" if code in on else ("off" if code in every else "?")
        lines.append(f"| {code} | {default} | {s['found']} | {s['TP']} | {s['FP']} | "
                     f"{s['unreviewed']} | {'-' if prec is None else f'{prec:.2f}'} |")
        if code in on and prec is not None and prec < args.min_precision:
            fail.append(f"{code} precision {prec:.2f} < {args.min_precision}")
        if code[3] in "23" and s["unreviewed"]:
            fail.append(f"{code}: {s['unreviewed']} unreviewed")
    total = collections.Counter()
    for s in stats.values():
        total.update(s)
    judged = total["TP"] + total["FP"]
    lines.append(f"| all | | {total['found']} | {total['TP']} | {total['FP']} | {total['unreviewed']} | "
                 f"{(total['TP'] / judged) if judged else 0:.2f} |")
    print(f"results in {out}")
    print("\n".join(lines))
    recall_lines = recall(found_by_tree, tp_rows, read_rounds(args.manifest))
    print("\n".join(recall_lines))
    if args.table:
        with open(args.table, "w", encoding="utf-8") as f:
            f.write("\n".join(lines + [""] + recall_lines) + "\n")
    if args.list in ("review", "new", "all") and new_list:
        shown = new_list if args.list != "review" else [(n, x) for n, x in new_list if x["code"][3] != "1"]
        print(f"\nnew (not in the review log): {len(new_list)}"
              + (f"; {len(new_list) - len(shown)} unsampled XLA1xx not listed (--list new)"
                 if len(shown) < len(new_list) else ""))
        for name, x in shown:
            print(f"  {name}/{x['path']}:{x['line']}:{x['col']}: {x['code']} {x['source'][:100]}")
    if args.list in ("review", "gone", "all") and gone_list:
        print(f"\ngone (reviewed, no longer reported): {len(gone_list)}")
        for name, r in gone_list:
            print(f"  {name}/{r['path']}:{r['line']}: {r['code']} [{r['verdict']}] {r['source'][:100]}")
    if fail:
        print("\nFAIL: " + "; ".join(fail))
    return 0 if args.report_only or not fail else 1


if __name__ == "__main__":
    sys.exit(main())
