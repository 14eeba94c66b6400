"""The lifecycle table is typed data: every row must be complete and self-consistent."""
import re

import pytest

from flake8_xla.lifecycle.table import FIX_KINDS, FIX_SAFETY, KINDS, STATUSES, api_table
from flake8_xla.versions import Version

TABLE = api_table()
ROWS = TABLE.rows


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_is_complete(row) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", row.id)
    assert row.kind in KINDS and row.status in STATUSES
    assert row.fix.kind in FIX_KINDS and row.fix.safety in FIX_SAFETY
    assert (row.fix.kind == "manual") == (row.fix.safety == "none")
    assert row.evidence.strip()
    assert row.replacement or row.instead, "say what to do instead"
    assert bool(row.companion) != bool(row.companion_note), "name the companion replacement or say why there is none"
    if row.companion:
        assert row.companion.startswith("xla_compat.")
    if row.fix.to == "companion":
        assert row.fix.safety == "unsafe", "a rewrite to xla_compat adds a dependency: never safe"
    if row.kind == "env_var":
        assert row.env is not None and not row.names
    else:
        assert row.names and all(n.startswith("torch_xla.") for n in row.names)
    assert (row.kind == "argument") == (row.argument is not None)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_status_matches_the_versions(row) -> None:
    """`status` is the state on the newest release; it must agree with deprecated_in/removed_in."""
    if row.status == "planned":
        assert row.deprecated_in is None and row.removed_in is None and row.plan
    elif row.status == "warns":
        assert row.warns_in and not (row.deprecated_in or row.plan), "a row that only warns through a call"
        assert row.state(TABLE.latest) == "warns"
    elif row.status == "current":
        assert row.kind == "argument" and row.added_in and not (row.deprecated_in or row.removed_in or row.plan)
        assert row.state(TABLE.latest) is None
    else:
        assert row.plan is None or row.status == "deprecated", "only a planned API that started to warn keeps its plan"
        assert row.state(TABLE.latest) == row.status
        assert row.deprecated_in or row.removed_in
    if row.deprecated_in and row.removed_in:
        assert row.deprecated_in < row.removed_in
    if row.warns_in or row.warns_through:
        # not deprecated upstream: the warning comes from the deprecated API it calls
        assert row.warns_in and row.warns_through and not row.deprecated_in and row.warns_in <= TABLE.latest
    if row.removed_in and row.kind != "env_var":
        assert row.effect in ("AttributeError", "ImportError", "TypeError", "ValueError")
    if row.replacement_since:
        assert row.replacement_since <= TABLE.latest


def test_ids_and_names_are_unique() -> None:
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))
    names = [n for r in ROWS if r.kind not in ("argument", "env_var") for n in r.names]
    assert len(names) == len(set(names))


def test_table_covers_the_usability_plan_and_the_catalog() -> None:
    xm = "torch_xla.core.xla_model."
    required = [xm + n for n in (
        "parse_xla_device xrt_world_size get_ordinal get_local_ordinal xla_real_devices xla_device_hw "
        "xla_replication_devices set_replication unlazy RateTracker ToXlaTensorArena check_view_sharing "
        "add_step_closure mark_step reduce_gradients optimizer_step save xla_rendezvous rendezvous "
        "do_on_ordinals mesh_reduce set_rng_state get_rng_state xla_device get_xla_supported_devices").split()]
    required += ["torch_xla.runtime.using_pjrt", "torch_xla.runtime.requires_pjrt", "torch_xla.runtime.xla_device",
                 "torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.amp.GradScaler",
                 "torch_xla.core.functions.nms", "torch_xla.experimental.compile"]
    required += [f"torch_xla.experimental.{m}" for m in (
        "pjrt", "tpu", "gpu", "xla_sharding", "xla_sharded_tensor", "triton", "dynamo_mark_sharding",
        "dynamo_set_buffer_donor")]
    required += ["torch_xla.distributed.xla_dist", "torch_xla.core.xrt_run_server", "torch_xla.utils.gcsfs"]
    missing = [n for n in required if n not in TABLE.by_name]
    assert not missing
    arguments = {(n, r.argument.keyword) for r in ROWS if r.argument for n in r.names}
    assert {(xm + "xrt_world_size", "defval"), (xm + "get_ordinal", "defval"),
            (xm + "get_local_ordinal", "defval"), (xm + "get_xla_supported_devices", "devkind"),
            ("torch_xla.distributed.xla_multiprocessing.spawn", "nprocs"),
            ("torch_xla.distributed.fsdp.XlaFullyShardedDataParallel", "mark_step_on_finalization")} <= arguments
    env = {r.env.name for r in TABLE.env_vars}
    assert {"XRT_", "GPU_NUM_DEVICES", "PJRT_DEVICE", "XLA_USE_BF16", "XLA_DOWNCAST_BF16", "XLA_USE_FP16",
            "XLA_DOWNCAST_FP16", "XLA_USE_32BIT_LONG", "XLA_USE_SPMD"} == env


def test_shim_module_is_not_flagged() -> None:
    """torch_xla.core.dynamo_bridge moved but keeps a shim that torch itself imports."""
    assert TABLE.lookup("torch_xla.core.dynamo_bridge.dynamo_backend") is None


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_a_message_and_its_help_together_say_all_the_advice(row) -> None:
    """The first line says the short advice; what it leaves out (a caveat, the other replacement, the
    companion) is in the help, on every release the row is reported on."""
    if row.instead_brief:
        assert row.instead and len(row.instead_brief) <= len(row.instead)
    for minor in range(1, TABLE.latest.minor + 1):
        target = Version(2, minor)
        if row.state(target) is None or (row.instead_before and row.added_in and target < row.added_in):
            continue
        for spmd in (False, True):
            advice = row.advice(target, spmd)
            said = f"{advice.first}; {advice.rest or ''}"
            instead = row.instead_spmd if spmd and row.instead_spmd else row.instead
            assert all(part in said for part in (row.replacement, instead) if part), (target, said)
            if row.companion and not (row.upstream_on(target) and row.fix.to != "companion"):
                assert f"{row.companion}()" in said
