"""--migrate-to torchtpu: the table, the XLA5xx message contract, and every front-end (check, fix, config,
flake8; migrate-report: tests/test_migrate_report.py)."""
import re
import subprocess
import sys

import pytest

from flake8_xla.engine import all_rules, lint_source
from flake8_xla.migration.facts import CHECK, MANUAL, MigrationFacts
from flake8_xla.migration.table import TABLE_FILE, build_table, migration_table
from flake8_xla.tables.core import TableError, read_table

from cli_helpers import run

SCRIPT = '''import os
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

os.environ["PJRT_DEVICE"] = "TPU"


def _mp_fn(index):
    device = xm.xla_device()
    for batch in loader:
        loss = model(batch.to(device))
        loss.backward()
        xm.optimizer_step(opt)
        xm.mark_step()
    xm.master_print("done", flush=True)


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=())
'''

CHECKED = [
    "train.py:3:1: XLA502 import of torch_xla is unused and fails on TorchTPU; delete it",
    "train.py:7:12: XLA503 environment variable PJRT_DEVICE has no effect on TorchTPU; delete it",
    "train.py:11:14: XLA501 [*] xm.xla_device() -> torch.device(\"tpu\", 0) on TorchTPU",
    "train.py:15:9: XLA502 xm.optimizer_step() -> optimizer.step() under DistributedDataParallel on TorchTPU",
    "train.py:16:9: XLA501 [*] xm.mark_step() does nothing on TorchTPU; delete it",
    "train.py:17:5: XLA501 [*] xm.master_print() -> print() guarded by a rank-0 test on TorchTPU",
    "train.py:21:5: XLA502 xmp.spawn() -> torchrun on TorchTPU",
]

FIXED = '''import os
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp



def _mp_fn(index):
    device = torch.device("tpu", 0)
    for batch in loader:
        loss = model(batch.to(device))
        loss.backward()
        xm.optimizer_step(opt)
    if int(os.environ.get("RANK", "0")) == 0:
        print("done", flush=True)


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=())
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- the table ------------------------------------------------------------------------------------

def test_the_shipped_table_loads_and_names_each_api_once():
    table = migration_table()
    assert len(table.rows) == len({r.id for r in table.rows})
    assert table.package == "torch-tpu" and table.version == "0.2.0"
    assert table.lookup("torch_xla.core.xla_model.mark_step").id == "sync"
    assert table.import_row("torch_xla.core.xla_model").id == "torch-xla-import"
    assert table.import_row("torch_xlax") is None


@pytest.mark.parametrize("change, message", [
    (lambda row: row.pop("why"), "a manual rewrite says why it needs a human"),
    (lambda row: row.update(fix={"kind": "delete"}), "only a mechanical rewrite has a fix"),
    (lambda row: row.update(tpu_names={"torch.tpu.ops.all_gather_dim": "internal"}), "a tpu_names stage is one of"),
    (lambda row: row.update(colour="red"), "unknown fields ['colour']"),
])
def test_a_malformed_row_is_refused(change, message):
    data = read_table(TABLE_FILE)
    row = next(r for r in data["rows"] if r["id"] == "optimizer-step")
    change(row)
    with pytest.raises(TableError, match=message.replace("[", r"\[").replace("(", r"\(")):
        build_table(data)


def test_a_name_in_two_rows_is_refused():
    data = read_table(TABLE_FILE)
    data["rows"][1]["names"] = data["rows"][1]["names"] + ["torch_xla.core.xla_model.mark_step"]
    with pytest.raises(TableError, match="is in rows sync and"):
        build_table(data)


# --- what migrate-report reads: the facts each diagnostic carries -----------------------------------

MIGRATION_RULES = [rule for rule in all_rules() if rule.migration]


@pytest.mark.parametrize("rule", MIGRATION_RULES, ids=lambda r: r.code)
def test_each_diagnostic_carries_its_use_and_a_one_clause_message(rule):
    """The message names the API first, in at most 100 characters; the help is the advice in full (unless the
    message says it), and the advice says when a human is needed."""
    for example in rule.invalid:
        found = [d for d in lint_source(example.source, target=example.target, migrate_to="torchtpu")
                 if d.code == rule.code]
        assert found
        for d in found:
            facts = d.data
            assert isinstance(facts, MigrationFacts)
            assert d.message.startswith(facts.api) and len(d.message) <= 100
            assert d.help == facts.advice or d.help is None and facts.advice in d.message
            assert (facts.rewrite == CHECK) == (rule.code == "XLA504")
            if facts.rewrite != CHECK:  # an availability check counts apart, a human's or not
                assert ("; needs a human" in facts.advice) == (facts.rewrite == MANUAL)
            if rule.code in ("XLA502", "XLA512", "XLA513") or example.fixed is None and rule.code != "XLA503":
                assert "; needs a human" in facts.advice


def test_every_name_a_short_form_gives_is_in_the_full_replacement():
    """A short names nothing its row does not (its becomes and names are checked against the wheels): a name
    of its torch_names, or of its becomes, or its last part beside its parent ("ReduceOp.SUM (PRODUCT, ...)")."""
    for row in migration_table().rows:
        for short in {row.short, *(s for _, s in row.short_for)} - {""}:
            for name in re.findall(r"[\w.]*\w\.\w+", short):
                parent, _, last = name.rpartition(".")
                assert name in row.torch_names or name in row.becomes or parent in row.becomes and \
                    last in row.becomes, (row.id, name)


def test_migration_rules_are_silent_without_migrate_to_and_alone_with_it():
    source = "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n"
    assert [d.code for d in lint_source(source)] == ["XLA102"]
    assert [d.code for d in lint_source(source, migrate_to="torchtpu")] == ["XLA501"]


# --- the CLI ----------------------------------------------------------------------------------------

def test_check_migrate_to_reports_each_use(project, capsys):
    code, out, err = run(capsys, "check", "--migrate-to", "torchtpu", "--no-cache", "train.py")
    assert code == 1
    assert out.splitlines() == CHECKED
    assert err == ("Found 7 diagnostics; 3 fixable with `flake8-xla fix --migrate-to torchtpu` (marked [*]); 1 more "
                   "with `flake8-xla fix --migrate-to torchtpu --unsafe-fixes`.\n")


def test_fix_migrate_to_applies_the_mechanical_rewrites(project, capsys):
    code, out, err = run(capsys, "fix", "--migrate-to", "torchtpu", "--unsafe-fixes", "train.py")
    assert (project / "train.py").read_text() == FIXED
    code, out, err = run(capsys, "check", "--migrate-to", "torchtpu", "--no-cache", "train.py")
    assert [line.split(": ", 1)[1].split()[0] for line in out.splitlines()] == ["XLA502"] * 3


def test_config_migrate_to(project, capsys):
    (project / "pyproject.toml").write_text('[tool.flake8-xla]\nmigrate-to = "torchtpu"\n')
    code, out, err = run(capsys, "check", "--no-cache", "train.py")
    assert out.splitlines() == CHECKED


@pytest.mark.parametrize("argv, config, message", [
    (("check", "--migrate-to", "jax", "train.py"), None, "argument --migrate-to/--xla-migrate-to: invalid choice: "
                                                        "'jax' (choose from 'torchtpu')"),
    (("check", "train.py"), '[tool.flake8-xla]\nmigrate-to = "tpu"\n',
     "pyproject.toml [tool.flake8-xla]: migrate-to must be one of torchtpu, not 'tpu'"),
])
def test_a_bad_migrate_to_is_a_usage_error(project, capsys, argv, config, message):
    if config:
        (project / "pyproject.toml").write_text(config)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err


def test_torchtpu_code_passes_the_pre_filter_only_when_migrating(project, capsys):
    (project / "env.py").write_text("import os\n\nos.environ['TPU_LAUNCH_BLOCKING'] = '1'\n")
    code, out, err = run(capsys, "check", "--no-cache", "env.py")
    assert (code, out) == (0, "")
    code, out, err = run(capsys, "check", "--migrate-to", "torchtpu", "--no-cache", "env.py")
    assert out == ("env.py:3:12: XLA503 environment variable TPU_LAUNCH_BLOCKING has no effect on TorchTPU; set "
                   "TORCH_TPU_LAUNCH_BLOCKING\n")


# --- flake8 -------------------------------------------------------------------------------------------

def flake8(cwd, *args):
    return subprocess.run([sys.executable, "-m", "flake8", "--select=XLA", *args], cwd=cwd, capture_output=True,
                          text=True)


def test_flake8_migrate_to(project):
    result = flake8(project, "--xla-migrate-to", "torchtpu", "train.py")
    assert result.stdout.splitlines() == [line.replace(" [*]", "") for line in CHECKED]
    result = flake8(project, "train.py")
    assert "XLA5" not in result.stdout and "XLA102" in result.stdout


def test_flake8_bad_migrate_to(project):
    result = flake8(project, "--xla-migrate-to", "jax", "train.py")
    assert result.returncode != 0
    assert "--xla-migrate-to must be one of torchtpu, not 'jax'" in result.stderr
