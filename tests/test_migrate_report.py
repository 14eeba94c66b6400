"""`flake8-xla migrate-report`: per file what moving to TorchTPU takes and what `fix --migrate-to torchtpu`
leaves (its counts agree with fix's), as text, JSON and Markdown; and the fix command check names under
--migrate-to."""
import json

import pytest

from cli_helpers import run
from test_migration import SCRIPT

DONE = "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n"
# the fix removes the two imports it leaves unused above `import torch_xla` and adds `import torch`: that import
# moves from line 3 to line 2, and, unused now but kept for what it registers, becomes a human's
SHIFT = ("import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.parallel_loader as pl\n"
         "import torch_xla\n\ndevice = xm.xla_device()\nxm.mark_step()\ntorch_xla.sync()\n")
PROBE = ('import importlib.util\nimport sys\n\nif importlib.util.find_spec("torch_xla") is not None:\n'
         '    backend = "tpu"\nif "torch_xla" in sys.modules:\n    backend = "tpu"\n')

DELETE_CALL = "delete the call: TorchTPU runs eagerly and has nothing pending to execute"
DEVICE = 'torch.device("tpu", 0): one device per process, seen as tpu:0'
UNUSED = ("delete it: nothing uses what it binds, and torch_xla (torch 2.9) cannot be installed beside TorchTPU "
          "(torch 2.11-2.15)")
REGISTERS = (UNUSED + "; needs a human: it is imported for what it registers (the xla device, the 'xla' process-group "
             "backend, torch.ops.xla): remove it once nothing relies on that")
PJRT = "delete it: TorchTPU finds the TPU by a PCI scan and reads no PJRT_DEVICE"
MASTER_PRINT = ('print(...) guarded by int(os.environ.get("RANK", "0")) == 0 (LOCAL_RANK for local=True; fd= becomes '
                'file=)')
OPTIMIZER_STEP = ("wrap the model in torch.nn.parallel.DistributedDataParallel (or FSDP2 fully_shard) and call "
                  "optimizer.step(); needs a human: gradient averaging moves from the step into the model wrapper")
SPAWN = ("no launcher of its own: export the output of `python -m torch.tpu.distributed`, then `torchrun "
         "--nproc_per_node=$WORLD_SIZE train.py`; or torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=N) "
         "(experimental) and torch.multiprocessing.spawn; needs a human: the script's entry point changes, and rank "
         "and process-group set-up become the script's job")
TPU_CHECK = 'torch.accelerator.is_available() and torch.accelerator.current_accelerator().type == "tpu"'

TRAIN = [
    "train.py: 7 to migrate: 4 mechanical (3 fixable), 3 need a human; after fix: 4 remain, torch_xla still imported",
    f"  mechanical     environment variable PJRT_DEVICE x1 (line 7): {PJRT}",
    f"  mechanical     xm.xla_device() x1 (line 11): {DEVICE}",
    f"  mechanical     xm.mark_step() x1 (line 16): {DELETE_CALL}",
    f"  mechanical     xm.master_print() x1 (line 17): {MASTER_PRINT}",
    f"  needs a human  import of torch_xla x1 (line 3): {REGISTERS}",
    f"  needs a human  xm.optimizer_step() x1 (line 15): {OPTIMIZER_STEP}",
    f"  needs a human  xmp.spawn() x1 (line 21): {SPAWN}",
    "  after fix      import of torch_xla (line 3), environment variable PJRT_DEVICE (line 7), xm.optimizer_step() "
    "(line 15), xmp.spawn() (line 21)",
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_text_says_per_file_what_the_fix_leaves(project, capsys):
    (project / "clean.py").write_text("import torch\n")
    (project / "done.py").write_text(DONE)
    (project / "shift.py").write_text(SHIFT)
    code, out, err = run(capsys, "migrate-report", ".")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "done.py: 1 to migrate: 1 mechanical (1 fixable), 0 need a human; done after fix",
        f"  mechanical     xm.mark_step() x1 (line 3): {DELETE_CALL}",
        "shift.py: 4 to migrate: 4 mechanical (4 fixable), 0 need a human; after fix: 1 remains, torch_xla still "
        "imported",
        f"  mechanical     import of torch_xla.distributed.parallel_loader x1 (line 2): {UNUSED}",
        f"  mechanical     xm.xla_device() x1 (line 5): {DEVICE}",
        f"  mechanical     xm.mark_step() x1 (line 6): {DELETE_CALL}",
        f"  mechanical     torch_xla.sync() x1 (line 7): {DELETE_CALL}",
        "  after fix      import of torch_xla (line 3, uncovered by the fix)",
        *TRAIN,
        "4 files checked, 3 with torch_xla uses: 9 mechanical, 3 need a human; 8 fixable with `flake8-xla fix "
        "--migrate-to torchtpu` (1 more with --unsafe-fixes); after fix: 1 of 3 files done, 5 uses remain (1 uncovered "
        "by the fix)",
    ]


def test_the_report_and_fix_count_the_same(project, capsys):
    """fix goes to a fixpoint: the import of torch_xla that its rewrites leave unused is reported then, as
    a human's; the report runs the same fix in memory, so its "remain" is fix's "need a human" and "more
    fixable with --unsafe-fixes" together."""
    (project / "done.py").write_text(DONE)
    (project / "shift.py").write_text(SHIFT)
    code, out, err = run(capsys, "migrate-report", "--no-cache", ".")
    assert out.splitlines()[-1] == (
        "3 files checked, 3 with torch_xla uses: 9 mechanical, 3 need a human; 8 fixable with `flake8-xla fix "
        "--migrate-to torchtpu` (1 more with --unsafe-fixes); after fix: 1 of 3 files done, 5 uses remain (1 uncovered "
        "by the fix)")
    assert (project / "shift.py").read_text() == SHIFT  # nothing written
    code, out, err = run(capsys, "fix", "--migrate-to", "torchtpu", ".")
    assert err.splitlines()[0] == ("Fixed 8 issues in 3 files (XLA501 x8); 4 need a human (listed above); 1 more "
                                   "fixable with --unsafe-fixes.")


def test_unsafe_fixes_are_fixed_in_the_report_too(project, capsys):
    code, out, err = run(capsys, "migrate-report", "--unsafe-fixes", "train.py")
    lines = out.splitlines()
    assert lines[0] == ("train.py: 7 to migrate: 4 mechanical (4 fixable), 3 need a human; after fix: 3 remain, "
                        "torch_xla still imported")
    assert lines[-2:] == [
        "  after fix      import of torch_xla (line 3), xm.optimizer_step() (line 15), xmp.spawn() (line 21)",
        "1 file checked, 1 with torch_xla uses: 4 mechanical, 3 need a human; 4 fixable with `flake8-xla fix "
        "--migrate-to torchtpu --unsafe-fixes`; after fix: 0 of 1 file done, 3 uses remain",
    ]


def test_availability_checks_are_counted_apart(project, capsys):
    (project / "probe.py").write_text(PROBE)
    (project / "done.py").write_text(DONE)
    code, out, err = run(capsys, "migrate-report", "probe.py", "done.py")
    assert out.splitlines() == [
        "probe.py: 2 to migrate: 0 mechanical (0 fixable), 0 need a human, 2 availability checks (1 fixable); after "
        "fix: 1 remains",
        f"  availability   importlib.util.find_spec(\"torch_xla\") x1 (line 4): {TPU_CHECK}",
        f"  availability   \"torch_xla\" in sys.modules x1 (line 6): {TPU_CHECK}; needs a human: it asks whether "
        "torch_xla was imported, not whether a TPU is there",
        "  after fix      \"torch_xla\" in sys.modules (line 6)",
        "done.py: 1 to migrate: 1 mechanical (1 fixable), 0 need a human; done after fix",
        f"  mechanical     xm.mark_step() x1 (line 3): {DELETE_CALL}",
        "2 files checked, 2 with torch_xla uses: 1 mechanical, 0 need a human, 2 availability checks; 2 fixable with "
        "`flake8-xla fix --migrate-to torchtpu`; after fix: 1 of 2 files done, 1 use remains",
    ]
    code, out, err = run(capsys, "migrate-report", "--format", "markdown", "probe.py")
    assert out.splitlines()[4:7] == [
        "| File | Uses | Mechanical | Fixable | Needs a human | Availability checks | Done after fix |",
        "|---|--:|--:|--:|--:|--:|---|",
        "| `probe.py` | 2 | 0 | 1 | 0 | 2 | no: 1 remains |",
    ]


def test_json(project, capsys):
    (project / "shift.py").write_text(SHIFT)
    code, out, err = run(capsys, "migrate-report", "--format", "json", "train.py", "shift.py")
    data = json.loads(out)
    assert code == 0 and data["fix_command"] == "flake8-xla fix --migrate-to torchtpu"
    assert {k: v for k, v in data["totals"].items() if k != "by_api"} == {
        "files_checked": 2, "files_with_uses": 2, "mechanical": 8, "manual": 3, "availability_checks": 0,
        "fixable": 7, "unsafe_fixable": 1, "files_done_after_fix": 0, "remaining_after_fix": 5, "new_after_fix": 1}
    assert data["totals"]["by_api"][:2] == [{"api": "xm.mark_step()", "rewrite": "mechanical", "count": 2},
                                            {"api": "xm.xla_device()", "rewrite": "mechanical", "count": 2}]
    train, shift = data["files"]
    assert (train["mechanical"], train["manual"], train["availability_checks"], train["fixable"]) == (4, 3, 0, 3)
    assert train["uses"][0] == {"api": "environment variable PJRT_DEVICE", "code": "XLA503", "rewrite": "mechanical",
                                "advice": PJRT, "lines": [7], "fixable": 0}
    assert (train["done_after_fix"], train["torch_xla_after_fix"]) == (False, True)
    assert [(u["api"], u["lines"], u["new"]) for u in train["remaining_after_fix"]] == [
        ("import of torch_xla", [3], False), ("environment variable PJRT_DEVICE", [7], False),
        ("xm.optimizer_step()", [15], False), ("xmp.spawn()", [21], False)]
    assert shift["remaining_after_fix"] == [{"api": "import of torch_xla", "code": "XLA502", "advice": REGISTERS,
                                             "lines": [3], "new": True}]


def test_markdown_is_a_pull_request_description(project, capsys):
    (project / "done.py").write_text(DONE)
    code, out, err = run(capsys, "migrate-report", "--format", "markdown", "train.py", "done.py")
    assert code == 0
    assert out.splitlines() == [
        "## Moving from torch_xla to TorchTPU",
        "",
        "8 torch_xla uses in 2 of 2 files checked: 5 mechanical, 3 need a human; 4 fixable with `flake8-xla fix "
        "--migrate-to torchtpu` (1 more with --unsafe-fixes); after fix: 1 of 2 files done, 4 uses remain.",
        "",
        "| File | Uses | Mechanical | Fixable | Needs a human | Done after fix |",
        "|---|--:|--:|--:|--:|---|",
        "| `train.py` | 7 | 4 | 3 | 3 | no: 4 remain, torch_xla still imported |",
        "| `done.py` | 1 | 1 | 1 | 0 | yes |",
        "",
        "### Left for a human after `flake8-xla fix --migrate-to torchtpu`",
        "",
        f"- [ ] `train.py:3` import of `torch_xla` — {REGISTERS}",
        f"- [ ] `train.py:7` environment variable `PJRT_DEVICE` — {PJRT}",
        f"- [ ] `train.py:15` `xm.optimizer_step()` — {OPTIMIZER_STEP}",
        f"- [ ] `train.py:21` `xmp.spawn()` — {SPAWN}",
    ]


def test_markdown_of_a_tree_without_uses(project, capsys):
    (project / "train.py").write_text("import torch\n")
    code, out, err = run(capsys, "migrate-report", "--format", "markdown", ".")
    assert out == "## Moving from torch_xla to TorchTPU\n\nNo torch_xla uses in 1 file checked.\n"


def test_notebook_lines_are_in_their_cells(project, capsys):
    cells = [["import torch_xla.core.xla_model as xm\n", "import torch_xla\n"],
             ["xm.mark_step()\n", "torch_xla.sync()\n", "xm.optimizer_step(opt)\n"]]
    (project / "nb.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}
                  for source in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    code, out, err = run(capsys, "migrate-report", "nb.ipynb")
    assert out.splitlines()[0] == ("nb.ipynb: 3 to migrate: 2 mechanical (2 fixable), 1 needs a human; after fix: "
                                   "2 remain, torch_xla still imported")
    assert out.splitlines()[4] == ("  after fix      import of torch_xla (cell 1:2, uncovered by the fix), "
                                   "xm.optimizer_step() (cell 2:3)")


def test_names_files_it_could_not_read(project, capsys):
    (project / "broken.py").write_text("import torch_xla\ndef f(:\n")
    code, out, err = run(capsys, "migrate-report", ".")
    assert code == 0
    assert err == "flake8-xla: broken.py:2:7: E999 SyntaxError: invalid syntax\n"
    assert out.splitlines()[-1] == (
        "2 files checked, 1 with torch_xla uses: 4 mechanical, 3 need a human; 3 fixable with `flake8-xla fix "
        "--migrate-to torchtpu` (1 more with --unsafe-fixes); after fix: 0 of 1 file done, 4 uses remain")


# --- the fix command check names ----------------------------------------------------------------------

@pytest.mark.parametrize("argv, config, note", [
    (("--migrate-to", "torchtpu"), None,
     "Found 7 diagnostics; 3 fixable with `flake8-xla fix --migrate-to torchtpu` (marked [*]); 1 more with "
     "`flake8-xla fix --migrate-to torchtpu --unsafe-fixes`."),
    (("--migrate-to", "torchtpu", "--unsafe-fixes"), None,
     "Found 7 diagnostics; 4 fixable with `flake8-xla fix --migrate-to torchtpu --unsafe-fixes` (marked [*])."),
    ((), '[tool.flake8-xla]\nmigrate-to = "torchtpu"\n',
     "Found 7 diagnostics; 3 fixable with `flake8-xla fix --migrate-to torchtpu` (marked [*]); 1 more with "
     "`flake8-xla fix --migrate-to torchtpu --unsafe-fixes`."),
    (("--select", "XLA102", "--target-version", "2.9"), None,  # a target of its own: no `target:` line
     "Found 2 diagnostics; 2 fixable with `flake8-xla fix` (marked [*])."),
])
def test_check_names_the_fix_command_of_its_settings(project, capsys, argv, config, note):
    if config:
        (project / "pyproject.toml").write_text(config)
    code, out, err = run(capsys, "check", "--no-cache", *argv, "train.py")
    assert err == note + "\n"


def test_markdown_names_an_import_guard_with_its_module_in_backticks():
    from flake8_xla.migration.report import _code

    assert _code("import of torch_xla.core.xla_model in try") == "import of `torch_xla.core.xla_model` in try"
    assert _code("import of torch_xla") == "import of `torch_xla`"


def test_the_report_reads_the_facts_a_diagnostic_carries_not_its_message():
    from flake8_xla.migration.facts import MANUAL, MECHANICAL, MigrationFacts
    from flake8_xla.migration.report import Use, build
    from flake8_xla.output.formats import Finding
    from flake8_xla.rule import Diagnostic

    facts = MigrationFacts("xm.mark_step()", MECHANICAL, "delete the call")
    carried = Diagnostic(3, 0, "XLA501", "any wording at all", data=facts, applicability="safe")
    bare = Diagnostic(4, 0, "XLA502", "a message without facts", help="its help")
    (report,), checked = build([Finding("a.py", carried), Finding("a.py", bare)], 1)
    assert report.uses == (Use("XLA501", "xm.mark_step()", MECHANICAL, "delete the call", 3, True),
                           Use("XLA502", "a message without facts", MANUAL, "its help", 4, False))


def test_the_facts_survive_the_worker_processes(project, capsys, monkeypatch):
    import flake8_xla.session.running as running

    (project / "done.py").write_text(DONE)
    code, alone, err = run(capsys, "migrate-report", "--jobs", "1", "train.py", "done.py")
    monkeypatch.setattr(running, "PARALLEL_MIN_FILES", 1)
    code, pooled, err = run(capsys, "migrate-report", "--jobs", "2", "train.py", "done.py")
    assert pooled == alone and TRAIN[1] in pooled.splitlines()
