"""The lifecycle corrections of the third errata pass (shared/research/torch_xla_api.md 3.1-3.5):
parse_xla_device's advice, the rendezvous helpers that warn only through xla_device(), the
spawn -> launch fix (the index fn receives; join/daemon ignored), and the spmd star import.
The torch_xla behaviour behind each is checked in tests/runtime/test_runtime_warnings.py."""
import pytest

from flake8_xla.engine import fix_source, lint_source
from flake8_xla.lifecycle.table import api_table
from flake8_xla.versions import Target, Version

XM = "import torch_xla.core.xla_model as xm\n"
XMP = "import torch_xla.distributed.xla_multiprocessing as xmp\n"
ROWS = {r.id: r for r in api_table().rows}


def target(text: str = "2.9") -> Target:
    return Target(Version(*map(int, text.split("."))), "test")


def codes(source: str, version: str = "2.9"):
    return [(d.code, d.message, d.help) for d in lint_source(source, target=version)]


def test_parse_xla_device_is_never_sent_to_torch_device() -> None:
    row = ROWS["xm-parse-xla-device"]
    assert "torch.device" not in row.instead + (row.companion_note or "")
    assert "partition(':')" in row.instead and "device_type()" in row.instead
    [(code, message, help)] = codes(XM + "kind, index = xm.parse_xla_device('TPU:0')\n")
    assert code == "XLA101" and "partition(':')" in help and "torch.device" not in message + help
    source = XM + "kind, index = xm.parse_xla_device('TPU:0')\n"
    assert fix_source(source, "m.py", target(), unsafe=True).source == source


@pytest.mark.parametrize("call", ["xm.rendezvous('t')", "xm.xla_rendezvous(b'x')", "xm.mesh_reduce('t', 1, sum)",
                                  "xm.do_on_ordinals(print, (), (0,))"])
def test_the_rendezvous_helpers_are_planned_and_warn_only_through_xla_device(call: str) -> None:
    [(code, message, help)] = codes(XM + call + "\n")
    assert code == "XLA103" and "is deprecated" not in message + help
    assert "not deprecated, but it warns indirectly from torch_xla 2.8 through xla_device()" in help
    # before 2.8 nothing warns: the helpers without an upstream replacement are then the opt-in XLA903
    [(old_code, _, old_help)] = codes(XM + call + "\n", "2.7")
    assert old_code == ("XLA103" if "rendezvous" in call else "XLA903")
    assert "warns indirectly from torch_xla 2.8" in old_help


def test_get_memory_info_without_a_device_warns_indirectly() -> None:
    source = XM + "used = xm.get_memory_info()['bytes_used']\n"
    [(code, message, help)] = codes(source)
    assert code == "XLA105" and "is deprecated" not in message
    assert "a call without `device` warns from torch_xla 2.8" in message
    assert "not deprecated; the call warns indirectly from torch_xla 2.8 through xla_device()" in help
    assert codes(source, "2.7") == []
    assert [c for c, _, _ in codes(source, "2.4")] == ["XLA105"]  # the device is required before 2.5


@pytest.mark.parametrize("call, launched", [
    # join and daemon are ignored by every PJRT release: dropped
    ("xmp.spawn(main, args=(1,), join=False, daemon=True)", "torch_xla.launch(main, args=(1,))"),
    # the fourth positional argument is join, not start_method
    ("xmp.spawn(main, (1,), 1, 'fork')", "torch_xla.launch(main, (1,), debug_single_process=True)"),
    ("xmp.spawn(main, (1,), None, True, False, start_method='fork')",
     "torch_xla.launch(main, (1,), start_method='fork')"),
])
def test_spawn_to_launch_maps_the_real_signature(call: str, launched: str) -> None:
    outcome = fix_source(XMP + call + "\n", "m.py", target(), unsafe=True)
    assert outcome.source == "import torch_xla\n" + launched + "\n"


def test_the_spawn_fix_is_unsafe_for_the_index_and_says_so() -> None:
    source = XMP + "xmp.spawn(main, args=())\n"
    assert fix_source(source, "m.py", target()).source == source  # unsafe: not applied by default
    outcome = fix_source(source, "m.py", target(), unsafe=True)
    assert outcome.source == "import torch_xla\ntorch_xla.launch(main, args=())\n"
    [note] = outcome.notes
    assert "LOCAL_RANK" in note and "global ordinal" in note and "if index == 0:" in note
    assert "LOCAL_RANK" in ROWS["xmp-spawn"].notes and "ignored" in ROWS["xmp-spawn"].notes


def test_a_star_import_of_the_old_sharding_module_is_left_to_a_human() -> None:
    star = "from torch_xla.experimental.xla_sharding import *\n"
    assert fix_source(star, "m.py", target(), unsafe=True).source == star
    named = "from torch_xla.experimental.xla_sharding import Mesh\n"
    assert fix_source(named, "m.py", target()).source == "from torch_xla.distributed.spmd import Mesh\n"
    assert "import *" in ROWS["experimental-xla-sharding"].notes
