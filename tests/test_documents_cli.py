"""`flake8-xla check|fix` on notebooks, Markdown and reStructuredText, through the real CLI."""
import json
import pathlib
import re
import shutil
import subprocess
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from flake8_xla.engine import all_rules

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCUMENTS = pathlib.Path(__file__).parent / "documents"
XLA102_DEVICE = ("XLA102 [*] xm.xla_device() is deprecated since torch_xla 2.8; use torch_xla.device() (2.3+)")
XLA101_WORLD = ("XLA101 [*] xm.xrt_world_size() was removed in torch_xla 2.7; use torch_xla.runtime.world_size() "
                "(2.1+)")
XLA105_MESH = ("XLA105 [*] FSDPv2(): positional `mesh`/`shard_output` fails since torch_xla 2.4; "
               "pass them as keywords")


def run(*args: str, cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8_xla", *args], cwd=cwd, capture_output=True, text=True)


def tutorial(path: pathlib.Path) -> pathlib.Path:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        new_markdown_cell("# Training on XLA"),
        new_code_cell("!pip install torch_xla\nimport torch_xla.core.xla_model as xm"),
        new_code_cell("%%bash\necho not python"),
        new_code_cell("device = xm.xla_device()\n%matplotlib inline\nprint(xm.xrt_world_size())",
                      outputs=[new_output("stream", text="8\n")], execution_count=3),
        new_code_cell("model(x, ...", metadata={"tags": ["draft"]}),
    ]
    nbformat.write(nb, str(path))
    return path


def test_notebook_diagnostics_name_the_cell(tmp_path: pathlib.Path) -> None:
    nb = tutorial(tmp_path / "tut.ipynb")
    result = run("check", "--no-cache", "--isolated", "--target-version", "2.9", "-v", "tut.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == f"tut.ipynb:cell 4:1:10: {XLA102_DEVICE}\ntut.ipynb:cell 4:3:7: {XLA101_WORLD}\n"
    assert "note: tut.ipynb: cell 3: not linted: cell magic %%bash" in result.stderr
    assert "note: tut.ipynb: cell 5: not linted: does not parse:" in result.stderr
    text = nb.read_text(encoding="utf-8").splitlines()
    records = json.loads(run("check", "--no-cache", "--isolated", "--target-version", "2.9", "--format", "json",
                             "tut.ipynb", cwd=tmp_path).stdout)
    located = [(r["cell"], r["line"], r["column"], r["code"]) for r in records]
    assert located == [(4, 1, 10, "XLA102"), (4, 3, 7, "XLA101")]
    sarif = json.loads(run("check", "--no-cache", "--isolated", "--target-version", "2.9", "--format", "sarif",
                           "tut.ipynb", cwd=tmp_path).stdout)
    results = sarif["runs"][0]["results"]
    # the region is the line of the .ipynb text holding the code line
    first = results[0]["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert '"device = xm.xla_device()\\n",' in text[first - 1]
    assert results[0]["properties"] == {"fixable": True, "cell": 4, "cellLine": 1, "cellColumn": 10}
    github = run("check", "--no-cache", "--isolated", "--target-version", "2.9", "--format", "github", "tut.ipynb",
                 cwd=tmp_path).stdout.splitlines()
    assert github[0].startswith(f"::warning file=tut.ipynb,line={first},title=XLA102::XLA102 cell 4, line 1, "
                                "column 10: xm.xla_device() is deprecated")


def test_notebook_fix_rewrites_cell_sources_only(tmp_path: pathlib.Path) -> None:
    nb = tutorial(tmp_path / "tut.ipynb")
    before = json.loads(nb.read_text(encoding="utf-8"))
    result = run("fix", "--isolated", "--target-version", "2.9", "tut.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Fixed 2 issues in 1 file (XLA101 x1, XLA102 x1)." in result.stderr
    after = json.loads(nb.read_text(encoding="utf-8"))
    nbformat.validate(nbformat.reads(nb.read_text(encoding="utf-8"), 4))
    assert [c["source"] for c in after["cells"]] == [
        before["cells"][0]["source"],
        ["!pip install torch_xla\n", "import torch_xla\n", "import torch_xla.runtime as xr"],
        before["cells"][2]["source"],
        ["device = torch_xla.device()\n", "%matplotlib inline\n", "print(xr.world_size())"],
        before["cells"][4]["source"],
    ]
    for cell_before, cell_after in zip(before["cells"], after["cells"]):  # outputs, metadata, counts kept
        assert {k: v for k, v in cell_before.items() if k != "source"} == \
            {k: v for k, v in cell_after.items() if k != "source"}
    assert before["metadata"] == after["metadata"]
    unchanged = nb.read_bytes()
    assert run("fix", "--isolated", "--target-version", "2.9", "tut.ipynb", cwd=tmp_path).returncode == 0
    assert nb.read_bytes() == unchanged  # nothing left to fix: byte-identical


def test_a_notebook_without_fixes_stays_byte_identical(tmp_path: pathlib.Path) -> None:
    nb = new_notebook()
    nb.cells = [new_code_cell("import torch_xla\ndevice = torch_xla.device()", outputs=[])]
    path = tmp_path / "clean.ipynb"
    nbformat.write(nb, str(path))
    original = path.read_bytes()
    result = run("fix", "--isolated", "clean.ipynb", cwd=tmp_path)
    assert result.returncode == 0 and path.read_bytes() == original


def test_broken_notebook_json_is_one_clear_line(tmp_path: pathlib.Path) -> None:
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    result = run("check", "--no-cache", "--isolated", "broken.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    assert re.fullmatch(r"broken\.ipynb:1:1: E902 not a notebook: invalid JSON at line 1 column \d+: .+\n",
                        result.stdout)
    before = (tmp_path / "broken.ipynb").read_bytes()
    run("fix", "--isolated", "broken.ipynb", cwd=tmp_path)
    assert (tmp_path / "broken.ipynb").read_bytes() == before


def test_markdown_tutorial_resolves_names_across_blocks() -> None:
    # the FSDPv2 guide's shape: the import in the first block, positional meshes in three later ones
    result = run("check", "--no-cache", "--isolated", "--target-version", "2.9", "-v",
                 "tests/documents/fsdpv2_guide.md")
    assert result.stdout.splitlines() == [
        "tests/documents/fsdpv2_guide.md:21:9: XLA216 FSDPv2 fails without SPMD; call torch_xla.runtime.use_spmd() at "
        "the start of the program",
        f"tests/documents/fsdpv2_guide.md:21:27: {XLA105_MESH}",
        f"tests/documents/fsdpv2_guide.md:27:27: {XLA105_MESH}",
        f"tests/documents/fsdpv2_guide.md:36:47: {XLA105_MESH}",
    ]
    assert "note: tests/documents/fsdpv2_guide.md: line 41: not linted: does not parse" in result.stderr


def test_markdown_fix_stays_inside_the_blocks(tmp_path: pathlib.Path) -> None:
    page = tmp_path / "guide.md"
    shutil.copy(DOCUMENTS / "fsdpv2_guide.md", page)
    original = page.read_text(encoding="utf-8").splitlines(True)
    result = run("fix", "--isolated", "--target-version", "2.9", "guide.md", cwd=tmp_path)
    assert "Fixed 3 issues in 1 file (XLA105 x3); 1 needs a human" in result.stderr  # XLA216: use_spmd()
    fixed = page.read_text(encoding="utf-8").splitlines(True)
    changed = [(i + 1, a, b) for i, (a, b) in enumerate(zip(original, fixed)) if a != b]
    assert len(original) == len(fixed)
    assert changed == [
        (21, "model = FSDPv2(my_module, mesh)\n", "model = FSDPv2(my_module, mesh=mesh)\n"),
        (27, "model = FSDPv2(my_module, mesh, shard_output=shard_first)\n",
         "model = FSDPv2(my_module, mesh=mesh, shard_output=shard_first)\n"),
        (36, "      my_module.layers[index] = FSDPv2(layer, mesh)\n",
         "      my_module.layers[index] = FSDPv2(layer, mesh=mesh)\n"),  # the list item's indentation kept
    ]


def test_rst_code_blocks_and_doctest_sessions(tmp_path: pathlib.Path) -> None:
    result = run("check", "--no-cache", "--isolated", "--target-version", "2.9", "tests/documents/training.rst")
    assert result.stdout.splitlines() == [f"tests/documents/training.rst:9:13: {XLA102_DEVICE}",
                                          f"tests/documents/training.rst:13:13: {XLA101_WORLD}"]
    page = tmp_path / "training.rst"
    shutil.copy(DOCUMENTS / "training.rst", page)
    assert run("fix", "--isolated", "--target-version", "2.9", "training.rst", cwd=tmp_path).returncode == 0
    text = page.read_text(encoding="utf-8")
    assert "   import torch_xla\n   import torch_xla.runtime as xr\n\n   device = torch_xla.device()\n" in text
    assert ">>> world = xr.world_size()\n>>> world\n8\n" in text
    assert "   $ pip install torch_xla\n" in text


def test_directories_hold_notebooks_and_with_include_docs_documents(tmp_path: pathlib.Path) -> None:
    tutorial(tmp_path / "tut.ipynb")
    shutil.copy(DOCUMENTS / "training.rst", tmp_path / "training.rst")
    plain = run("check", "--no-cache", "--isolated", "--target-version", "2.9", ".", cwd=tmp_path)
    assert {line.split(":")[0] for line in plain.stdout.splitlines()} == {"tut.ipynb"}
    docs = run("check", "--no-cache", "--isolated", "--target-version", "2.9", "--include-docs", ".", cwd=tmp_path)
    assert {line.split(":")[0] for line in docs.stdout.splitlines()} == {"tut.ipynb", "training.rst"}


def _documented(page: pathlib.Path):
    """The Example block's first line in the page, and the diagnostics the page documents for it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    start = lines.index("## Example") + 4  # heading, blank line, fence: the block's first line (1-based)
    reports = lines.index("```text", start) + 1
    documented = []
    for line in lines[reports:lines.index("```", reports)]:
        if line.startswith("  = help: "):  # the help of the finding above: `check` prints it with --format full
            continue
        position, code, message = re.match(r"(\d+:\d+): (XLA\d{3}) (.*)", line).groups()
        row, col = map(int, position.split(":"))
        documented.append((start + row - 1, col, code, re.sub(r"line \d+", "line N", message)))
    return documented


def test_own_docs_dogfood() -> None:
    """`flake8-xla check` over README.md and docs/: a rule page reports exactly what its Example
    documents (its own code) and nothing in "Use instead" or the fixed code; other pages are clean."""
    # the migration rules' pages under --migrate-to torchtpu, where those rules run (and only they)
    result = run("check", "--no-cache", "--isolated", "--target-version", "2.9", "--extend-select", "XLA9,XLA001",
                 "--extend-exclude", "docs/rules/XLA5*.md", "--include-docs", "--format", "json", "README.md", "docs")
    migration = run("check", "--no-cache", "--isolated", "--migrate-to", "torchtpu", "--include-docs", "--format",
                    "json", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "rules").glob("XLA5*.md")))
    found = {}
    for r in json.loads(result.stdout) + json.loads(migration.stdout):
        found.setdefault(r["filename"], []).append(
            (r["line"], r["column"], r["code"], re.sub(r"line \d+", "line N", r["message"])))
    pages = sorted((ROOT / "docs" / "rules").glob("XLA*.md"))
    assert len(pages) > 30
    # a run-only rule's page documents what the trace reports; the linter reports nothing there
    run_only = {rule.code for rule in all_rules() if rule.run_only}
    expected = {f"docs/rules/{p.name}": _documented(p) for p in pages if p.stem not in run_only}
    assert {name: sorted(rows) for name, rows in found.items()} == {k: sorted(v) for k, v in expected.items()}
    for page, rows in expected.items():
        assert {code for _, _, code, _ in rows} == {pathlib.Path(page).stem}


def test_bad_documents_get_one_line_and_are_never_rewritten(tmp_path: pathlib.Path) -> None:
    (tmp_path / "old.ipynb").write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": []}),
                                        encoding="utf-8")
    (tmp_path / "latin.md").write_bytes("caf\xe9\n```python\nimport torch_xla\n```\n".encode("latin-1"))
    (tmp_path / "open.md").write_text("```python\nimport torch_xla.core.xla_model as xm\nxm.mark_step()\n",
                                      encoding="utf-8")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = run("check", "--no-cache", "--isolated", "-v", "old.ipynb", "latin.md", "open.md", cwd=tmp_path)
    assert result.stdout.splitlines() == [
        "old.ipynb:1:1: E902 nbformat 3 notebooks are not supported; upgrade with "
        "`jupyter nbconvert --to notebook --nbformat 4`",
        "latin.md:1:1: E902 cannot decode as utf-8: invalid continuation byte",
    ]
    assert "note: open.md: line 1: not linted: unterminated fence" in result.stderr
    run("fix", "--isolated", "old.ipynb", "latin.md", "open.md", cwd=tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_crlf_markdown_keeps_its_line_endings(tmp_path: pathlib.Path) -> None:
    page = tmp_path / "crlf.md"
    page.write_bytes(b"Intro\r\n\r\n```python\r\nimport torch_xla.core.xla_model as xm\r\nxm.mark_step()\r\n```\r\n")
    check = run("check", "--no-cache", "--isolated", "--target-version", "2.9", "crlf.md", cwd=tmp_path)
    assert check.stdout.startswith("crlf.md:5:1: XLA102 [*] xm.mark_step() is deprecated since torch_xla 2.8")
    assert run("fix", "--isolated", "--target-version", "2.9", "crlf.md", cwd=tmp_path).returncode == 0
    assert page.read_bytes() == b"Intro\r\n\r\n```python\r\nimport torch_xla\r\ntorch_xla.sync()\r\n```\r\n"


def test_an_internal_error_is_one_finding_not_a_crash(tmp_path: pathlib.Path, monkeypatch) -> None:
    from flake8_xla.config import Settings
    from flake8_xla.documents import reading
    from flake8_xla.session.running import Job, run_files
    from flake8_xla.session.selection import build_selector

    def boom(path: str, text: str):
        raise RuntimeError("boom")

    (tmp_path / "guide.md").write_text("```python\nimport torch_xla\n```\n", encoding="utf-8")
    (tmp_path / "a.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n", encoding="utf-8")
    monkeypatch.setattr(reading, "read_document", boom)
    monkeypatch.chdir(tmp_path)
    job = Job(Settings(base_dir=str(tmp_path)), build_selector(Settings(base_dir=str(tmp_path))))
    results = {r.path: r for r in run_files(job, ["guide.md", "a.py"], 1)}
    assert [(f.diagnostic.code, f.diagnostic.message) for f in results["guide.md"].findings] == [
        ("XLA000", "flake8-xla internal error, please report: RuntimeError: boom")]
    assert [f.diagnostic.code for f in results["a.py"].findings] == ["XLA102"]  # the run went on


def test_a_line_reference_in_the_help_follows_the_document(tmp_path: pathlib.Path) -> None:
    """XLA306 names the launch's line in its help: a notebook's cells run in one kernel, so the line is
    given as the notebook's; a guide's blocks are separate examples, so the finding is dropped there."""
    (tmp_path / "guide.md").write_text("```python\nimport torch_xla.core.xla_model as xm\ndevice = xm.xla_device()\n"
                                       "```\n\n```python\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
                                       "xmp.spawn(_mp_fn)\n```\n", encoding="utf-8")
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [new_code_cell("import torch_xla.core.xla_model as xm\n"
                              "import torch_xla.distributed.xla_multiprocessing as xmp\ndevice = xm.xla_device()"),
                new_code_cell("def _mp_fn(index):\n    pass\n\nxmp.spawn(_mp_fn)")]
    nbformat.write(nb, str(tmp_path / "tut.ipynb"))
    records = json.loads(run("check", "--no-cache", "--isolated", "--target-version", "2.9", "--select", "XLA306",
                             "--format", "json", "guide.md", "tut.ipynb", cwd=tmp_path).stdout)
    assert [(r["filename"], r.get("cell"), r["line"], r["help"]) for r in records] == [
        ("tut.ipynb", 1, 3, "It initializes the XLA runtime in the launching process before xmp.spawn(...) on cell 2, "
                            "line 4: the launch then raises 'Runtime is already initialized. Do not use the XLA device "
                            "before calling xmp.spawn.' Get the device inside the function you launch.")]
