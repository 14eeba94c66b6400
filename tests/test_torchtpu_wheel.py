"""The TorchTPU migration table agrees with the torch-tpu 0.2.0 wheel and torch 2.13.0, read statically.

tools/check_torchtpu.py reads both wheels from the cache ($XLA_WHEEL_CACHE, else /work/cache/wheels
when it exists, else ~/.cache/flake8-xla/wheels); a fresh machine downloads them once (``pip download``,
about 96 MB + 192 MB, never installed). What it read is cached there too, keyed by the wheels' sha256
and the script's hash, so after the first run this module takes about a second.

Every check is run twice: on the real table (it must pass) and on a deliberately broken copy of a row,
written to a temporary YAML file (it must fail), so that no assertion passes vacuously.
"""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import check_torchtpu as tool  # noqa: E402

SCRIPT = ROOT / "tools" / "check_torchtpu.py"


@pytest.fixture(scope="module")
def wheels():
    """(facts of the torch-tpu wheel, torch name resolver); a failed download fails, never skips."""
    try:
        facts, names, _ = tool.load_facts(tool.default_cache())
    except RuntimeError as exc:
        pytest.fail(f"the torch-tpu / torch wheels could not be fetched, so the table cannot be checked: {exc}")
    tool.check(tool.load_table(), facts, names)
    tool.save_facts(names)  # the real table's torch names; the broken copies' are not kept
    return facts, names


@pytest.fixture(scope="module")
def report(wheels):
    facts, names = wheels
    return tool.check(tool.load_table(), facts, names)


@pytest.fixture
def broken(tmp_path, wheels):
    """broken(mutate) -> the failures of a copy of the table changed by ``mutate(table)``, via a tmp file."""
    facts, names = wheels

    def run(mutate, internal_apis_file=tool.INTERNAL_APIS, facts_=None):
        table = copy.deepcopy(tool.load_table())
        mutate(table)
        path = tmp_path / "torchtpu_migration.yaml"
        path.write_text(yaml.safe_dump(table, sort_keys=False), encoding="utf-8")
        return tool.check(tool.load_table(path), facts_ or facts, names, internal_apis_file).failures
    return run


def row(table, row_id):
    return next(r for r in table["rows"] if r["id"] == row_id)


def env_row(table, name):
    return next(r for r in table["env_vars"] if name in r["names"])


def lines(failures, check=None):
    return [f["line"] for f in failures if check is None or f["check"] == check]


def names_failing(failures, check):
    return {f["name"] for f in failures if f["check"] == check}


# --- the whole table -------------------------------------------------------------------------------

def test_every_row_is_checked(report) -> None:
    table = tool.load_table()
    assert report.checked_rows == [r["id"] for r in table["rows"]] + [
        f"env:{'/'.join(r['names'])}" for r in table["env_vars"]]
    assert report.checks > 100


def test_the_table_agrees_with_the_wheels(report) -> None:
    assert not report.failures, "the table disagrees with the wheels:\n" + "\n".join(lines(report.failures))


def test_nothing_is_skipped(report) -> None:
    assert report.skipped == []


# --- metadata ---------------------------------------------------------------------------------------

def test_version_and_torch_range_are_the_wheels(report, broken) -> None:
    assert not lines(report.failures, "metadata")
    meta = report.wheels["torch-tpu"]["metadata"]
    assert (meta["version"], meta["requires_torch"]) == ("0.2.0", ">=2.11.0,<=2.15.0")
    assert report.wheels["torch-tpu"]["glue_torch_versions"] == ["2.11.0", "2.12.0", "2.13.0", "2.14.0", "2.15.0"]

    def same_range_spelled_otherwise(t):
        t["requires_torch"] = ">=2.11.0,<=2.15.0"
    assert not lines(broken(same_range_spelled_otherwise), "metadata")

    def narrower(t):
        t["requires_torch"] = ">=2.11,<2.15"
    assert names_failing(broken(narrower), "metadata") == {""}
    assert "requires_torch" in " ".join(lines(broken(narrower), "metadata"))

    def newer(t):
        t["version"] = "0.2.1"
    assert "Version 0.2.1" in " ".join(lines(broken(newer), "metadata"))


# --- the public API table and the stages -----------------------------------------------------------

def test_stage_counts_match_the_research_catalog(report, broken, wheels) -> None:
    assert report.catalog["found"] == report.catalog["expected"] == tool.CATALOG
    assert report.counts["torch 2.11.0"]["internal"] == 8  # initial_seed, get_rng_state: internal from 2.13
    facts = copy.deepcopy(wheels[0])
    facts["exports"]["torch.tpu.ops.splash_sdpa"]["stage"] = "stable"
    assert names_failing(broken(lambda t: None, facts_=facts), "catalog") == {"stable", "experimental"}


def test_stages_come_from_decorators_and_stage_maps(wheels) -> None:
    exports = wheels[0]["exports"]
    assert len(exports) == 71
    expect = {
        "torch.tpu.synchronize": ("internal", "decorator"),
        "torch.tpu.device": ("internal", "decorator"),  # a class attribute bound to a decorated class
        "torch.tpu.device_of": ("experimental", "decorator"),
        "torch.tpu.EagerMode": ("experimental", "stages-map"),  # not defined on the class
        "torch.tpu.precision": ("experimental", "decorator"),  # a package binding hiding its submodule
        "torch.tpu.allow_excess_precision": ("experimental", "decorator"),  # Property(...)
        "torch.tpu.topology_aware_mesh": ("deprecated", "decorator"),
        "torch.tpu.ops.max_pool2d": ("stable", "decorator"),
        "torch.tpu.ops.splash_sdpa": ("experimental", "decorator"),
    }
    assert {n: (exports[n]["stage"], exports[n]["via"]) for n in expect} == expect
    assert exports["torch.tpu.topology_aware_mesh"]["deprecated_version"] == "0.2.0"
    assert exports["torch.tpu.allow_excess_precision"]["kind"] == "property"
    assert exports["torch.tpu.set_eager_mode"]["forbidden_in_compile"] is True
    assert exports["torch.tpu.synchronize"]["evidence"] == "torch_tpu/_internal/device/_device_module.py:754"


def test_recommended_tpu_names_exist_with_the_wheels_stage(report, broken) -> None:
    assert not lines(report.failures, "tpu_names")

    def wrong_stage(t):
        row(t, "device-kind")["tpu_names"]["torch.tpu.get_device_name"] = "stable"
    assert names_failing(broken(wrong_stage), "tpu_names") == {"torch.tpu.get_device_name"}

    def missing(t):
        r = row(t, "device-kind")
        r["tpu_names"]["torch.tpu.get_chip_name"] = "experimental"
        r["becomes"] += "; or torch.tpu.get_chip_name() (experimental)"
    assert "missing from _PUBLIC_MODULES" in " ".join(lines(broken(missing), "tpu_names"))

    def internal(t):
        r = row(t, "wait-device-ops")
        r["becomes"] = "torch.tpu.synchronize() (experimental)"
        r["tpu_names"] = {"torch.tpu.synchronize": "experimental"}
    assert "not internal" in " ".join(lines(broken(internal), "tpu_names"))

    def internal_from_2_13(t):  # experimental on torch 2.11/2.12, internal from 2.13: still not recommendable
        r = row(t, "get-rng-state")
        r["becomes"] = "torch.tpu.get_rng_state() (experimental)"
        r["tpu_names"] = {"torch.tpu.get_rng_state": "experimental"}
    assert "not internal" in " ".join(lines(broken(internal_from_2_13), "tpu_names"))


def test_every_tpu_mention_is_listed_and_experimental_ones_are_tagged(report, broken) -> None:
    assert not lines(report.failures, "mentions")
    assert not lines(report.failures, "stage_tag")

    def unlisted(t):
        del row(t, "device-kind")["tpu_names"]
    assert names_failing(broken(unlisted), "mentions") == {"torch.tpu.get_device_name"}

    def unlisted_in_why(t):
        row(t, "launcher")["why"] += "; torch.tpu.distributed.spmd_safe may help"
    assert names_failing(broken(unlisted_in_why), "mentions") == {"torch.tpu.distributed.spmd_safe"}

    def listed_but_not_mentioned(t):
        row(t, "device-kind")["tpu_names"]["torch.tpu.is_initialized"] = "experimental"
    assert names_failing(broken(listed_but_not_mentioned), "mentions") == {"torch.tpu.is_initialized"}

    def untagged(t):
        r = row(t, "device-kind")
        r["becomes"] = r["becomes"].replace(" (experimental)", "")
    assert names_failing(broken(untagged), "stage_tag") == {"torch.tpu.get_device_name"}

    def tag_after_someone_else(t):
        row(t, "pallas")["becomes"] = 'torch.tpu.ops.splash_sdpa or @torch.tpu.pallas.jax_op("ns::name") (experimental)'
    assert names_failing(broken(tag_after_someone_else), "stage_tag") == {"torch.tpu.ops.splash_sdpa"}

    def stable_tagged_experimental(t):
        r = row(t, "device-kind")
        r["becomes"] += "; torch.tpu.ops.max_pool2d (experimental)"
        r["tpu_names"]["torch.tpu.ops.max_pool2d"] = "stable"
    assert names_failing(broken(stable_tagged_experimental), "stage_tag") == {"torch.tpu.ops.max_pool2d"}

    def called_internal_but_is_not(t):
        row(t, "wait-device-ops")["becomes"] += "; torch.tpu.manual_seed is internal"
    assert names_failing(broken(called_internal_but_is_not), "mentions") == {"torch.tpu.manual_seed"}

    def called_internal_and_is(t):
        row(t, "devices")["becomes"] += " (torch.tpu.device_count is internal)"
    assert not lines(broken(called_internal_and_is), "mentions")

    def module_without_main(t):
        row(t, "launcher")["becomes"] += "; or `python -m torch.tpu.ops`"
    assert names_failing(broken(module_without_main), "mentions") == {"torch.tpu.ops"}


# --- torch names -------------------------------------------------------------------------------------

def test_torch_names_resolve_in_torch_2_13(report, broken) -> None:
    assert not lines(report.failures, "torch_names")
    kinds = {n: report.torch_names[n]["kind"] for n in (
        "torch.accelerator.synchronize", "torch.device", "torch.distributed.fsdp.fully_shard", "torch.optim.Adam",
        "torch.nn.functional.scaled_dot_product_attention", "torch.distributed.device_mesh.init_device_mesh")}
    assert kinds == {"torch.accelerator.synchronize": "def", "torch.device": "class",  # torch/_C/__init__.pyi
                     "torch.distributed.fsdp.fully_shard": "def", "torch.optim.Adam": "class",
                     "torch.nn.functional.scaled_dot_product_attention": "assign",
                     "torch.distributed.device_mesh.init_device_mesh": "def"}

    def misspelt(t):
        row(t, "wait-device-ops")["torch_names"] = ["torch.accelerator.synchronise", "torch.distributed.fsdp.shard",
                                                    "torch.nn.parallel.DataParallelTPU", "torch.tpux.sync"]
    assert names_failing(broken(misspelt), "torch_names") == {
        "torch.accelerator.synchronise", "torch.distributed.fsdp.shard", "torch.nn.parallel.DataParallelTPU",
        "torch.tpux.sync"}

    def fix_writes_an_unlisted_name(t):
        row(t, "wait-device-ops")["torch_names"] = []
    assert names_failing(broken(fix_writes_an_unlisted_name), "mentions") == {"torch.accelerator.synchronize"}


def test_accelerator_random_get_rng_state_is_absent_in_torch_2_13(report, broken, wheels) -> None:
    assert not lines(report.failures, "torch_absent")
    assert wheels[1].resolve("torch.accelerator.random.get_rng_state")["found"] is False
    assert wheels[1].resolve("torch.accelerator.random")["found"] is False
    assert wheels[1].resolve("torch.accelerator.synchronize")["found"] is True

    def listed(t):
        row(t, "get-rng-state")["torch_names"] = ["torch.accelerator.random.get_rng_state"]
    failures = broken(listed)
    assert names_failing(failures, "torch_absent") == names_failing(failures, "torch_names") == {
        "torch.accelerator.random.get_rng_state"}


# --- environment variables -------------------------------------------------------------------------

def test_env_vars_are_not_read_and_their_replacements_are(report, broken, wheels) -> None:
    assert not lines(report.failures, "env_vars")
    tokens = wheels[0]["tokens"]
    assert "PJRT_DEVICE" not in tokens and "TORCH_TPU_LAUNCH_BLOCKING" in tokens

    def read_after_all(t):
        env_row(t, "XLA_USE_SPMD")["names"].append("XLA_FLAGS")  # still read by the .so
    assert names_failing(broken(read_after_all), "env_vars") == {"XLA_FLAGS"}

    def instead_not_read(t):
        env_row(t, "TPU_LAUNCH_BLOCKING")["read_instead"] = "TORCH_TPU_LAUNCH_BLOCKINGS"
    assert names_failing(broken(instead_not_read), "env_vars") == {"TORCH_TPU_LAUNCH_BLOCKINGS"}


# --- the internal device APIs (rules/torchtpu_internal_apis.json, imported by XLA511) ----------------

def test_internal_apis_file_is_what_the_wheel_says(report, broken, wheels, tmp_path) -> None:
    assert not lines(report.failures, "internal_apis")
    assert tool.INTERNAL_APIS.read_text(encoding="utf-8") == tool.render_internal_apis(wheels[0]), (
        "regenerate it: python tools/check_torchtpu.py --write-internal-apis")
    data = json.loads(tool.INTERNAL_APIS.read_text(encoding="utf-8"))
    assert data["torch.tpu.synchronize"] == {"prefer": "torch.accelerator.synchronize", "internal_when": "torch>=2.11"}
    assert data["torch.tpu.initial_seed"]["internal_when"] == "torch>=2.13"
    assert len(data) == 10

    stale = dict(data)
    stale["torch.tpu.synchronize"] = {"prefer": "torch.cuda.synchronize", "internal_when": "torch>=2.11"}
    del stale["torch.tpu.device"]
    stale["torch.tpu.manual_seed"] = {"prefer": "torch.manual_seed", "internal_when": "torch>=2.11"}
    path = tmp_path / "internal_apis.json"
    path.write_text(json.dumps(stale), encoding="utf-8")
    assert names_failing(broken(lambda t: None, internal_apis_file=path), "internal_apis") == {
        "torch.tpu.synchronize", "torch.tpu.device", "torch.tpu.manual_seed"}


def test_public_api_file_is_what_the_wheel_says(wheels) -> None:
    assert tool.PUBLIC_API.read_text(encoding="utf-8") == tool.render_public_api(wheels[0]), (
        "regenerate it: python tools/check_torchtpu.py --write-internal-apis")
    data = json.loads(tool.PUBLIC_API.read_text(encoding="utf-8"))
    assert data["torch.tpu.get_device_name"] == "experimental" and data["torch.tpu.ops"] == "module"
    assert data["torch.tpu.synchronize"] == "internal" and "torch.tpu.empty_cache" not in data
    assert sum(1 for stage in data.values() if stage != "module") == 71


# --- the command line ------------------------------------------------------------------------------

def test_cli_json_report(report, tmp_path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cache", str(tool.default_cache()), "--json"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == (1 if report.failures else 0), proc.stderr
    out = json.loads(proc.stdout)
    assert out["failures"] == report.failures and out["checked_rows"] == report.checked_rows
    assert out["exports"]["torch.tpu.synchronize"]["target"] == (
        "torch_tpu._internal.device._device_module:TpuDeviceModule.synchronize")

    table = tool.load_table()
    row(table, "device-kind")["tpu_names"]["torch.tpu.get_device_name"] = "stable"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(table), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cache", str(tool.default_cache()), "--table", str(path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1 and "tpu_names device-kind: torch.tpu.get_device_name" in proc.stdout


def test_a_failed_download_fails_with_the_command(tmp_path, monkeypatch) -> None:
    def pip_fails(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for torch-tpu==0.2.0")
    monkeypatch.setattr(tool.subprocess, "run", pip_fails)
    with pytest.raises(RuntimeError, match=r"pip download torch-tpu==0\.2\.0 into .* failed[\s\S]*No matching"):
        tool.fetch(tool.TPU_PROJECT, tool.TPU_VERSION, tmp_path / "empty", tool.TPU_PLATFORM)
    assert tool.main(["--cache", str(tmp_path / "empty")]) == 2
