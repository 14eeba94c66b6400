"""What the lifecycle table and the XLA102/XLA103 texts say about torch_xla's warnings and about the
spawn -> launch and parse_xla_device advice, checked on the installed torch_xla (CPU). Each script
runs in a fresh interpreter, so Python's default warning filters are the ones a user gets."""
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from flake8_xla.lifecycle.table import api_table

ROWS = {r.id: r for r in api_table().rows}
_XLA_DEVICE_WARNING = re.compile(r"torch_xla/core/xla_model\.py:\d+: DeprecationWarning: Use torch_xla\.device instead")


def _run(code: str, *flags: str, cwd=None, env=None) -> str:
    """stderr of ``python FLAGS -c CODE`` (or of a script file in ``cwd``)."""
    environ = {**os.environ, "PJRT_DEVICE": "CPU", **(env or {})}
    environ.pop("PYTHONWARNINGS", None)
    args = [sys.executable, *flags, *(["-c", code] if cwd is None else [code])]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=cwd, env=environ)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


_RENDEZVOUS = "import torch_xla.core.xla_model as xm\nxm.rendezvous('t')\nxm.mesh_reduce('t', 1.0, sum)\n"


@pytest.mark.release(">=2.8", why="the rendezvous helpers call the deprecated xla_device() from 2.8")
def test_rendezvous_helpers_warn_only_through_xla_device_and_default_filters_hide_it() -> None:
    for row in ("xm-rendezvous", "xm-xla-rendezvous", "xm-mesh-reduce", "xm-do-on-ordinals"):
        assert ROWS[row].status == "planned" and ROWS[row].deprecated_in is None
        assert str(ROWS[row].warns_in) == "2.8" and ROWS[row].warns_through == "xla_device()"
    assert "DeprecationWarning" not in _run(_RENDEZVOUS)  # called from __main__, attributed to torch_xla
    shown = _run(_RENDEZVOUS, "-W", "default")
    assert _XLA_DEVICE_WARNING.search(shown.replace("\\", "/")), shown[-2000:]
    assert "rendezvous" not in " ".join(line for line in shown.splitlines() if "DeprecationWarning" in line)


@pytest.mark.release("<2.8", why="from 2.8 the rendezvous helpers warn through xla_device()")
def test_rendezvous_helpers_do_not_warn_before_2_8() -> None:
    assert "DeprecationWarning" not in _run(_RENDEZVOUS, "-W", "default")


_LOOP = "import torch_xla.core.xla_model as xm\n\n\ndef steps():\n    for _ in range(5):\n        xm.mark_step()\n"


@pytest.mark.release(">=2.8", why="xm.mark_step is @deprecated from 2.8")
def test_a_deprecation_warning_shows_once_per_call_site_and_only_for_main(tmp_path) -> None:
    """XLA102's why_bad: 5 calls in a loop of a script print 1 warning; the same loop in an imported
    module prints none under the default filters, and one per call site under -W default."""
    (tmp_path / "loop_lib.py").write_text(_LOOP)
    (tmp_path / "script.py").write_text(_LOOP + "\n\nsteps()\n")
    (tmp_path / "uses_lib.py").write_text("import loop_lib\n\nloop_lib.steps()\n")

    def count(text: str) -> int:
        return text.count("DeprecationWarning: Use torch_xla.sync instead")

    assert count(_run("script.py", cwd=tmp_path)) == 1
    assert count(_run("uses_lib.py", cwd=tmp_path)) == 0
    assert count(_run("uses_lib.py", "-W", "default", cwd=tmp_path)) == 1
    assert count(_run("uses_lib.py", "-W", "always", cwd=tmp_path)) == 5


def _parse_xla_device():
    """Upstream's parser: xm.parse_xla_device up to 2.6, the private copy from 2.5."""
    import torch_xla.core.xla_model as xm

    if hasattr(xm, "parse_xla_device"):
        return xm.parse_xla_device  # noqa: XLA101,XLA102 -- the API whose replacement advice is under test
    from torch_xla._internal.utils import parse_xla_device

    return parse_xla_device


def test_parse_xla_device_took_hardware_strings_that_torch_device_rejects() -> None:
    parse = _parse_xla_device()
    assert parse("TPU:0") == ("TPU", 0)
    assert parse("CPU:3") == ("CPU", 3)
    assert parse("xla:0") is None
    with pytest.raises(RuntimeError):
        torch.device("TPU:0")
    # the table's advice: split the string
    row = ROWS["xm-parse-xla-device"]
    assert "partition(':')" in row.instead and "torch.device" not in row.instead
    kind, _, index = "TPU:0".partition(":")
    assert (kind, int(index)) == parse("TPU:0")
    assert row.fix.kind == "manual" and row.companion is None  # nothing rewrites it


@pytest.mark.release(">=2.5", why="torch_xla.launch is 2.5+")
def test_launch_under_torchrun_passes_local_rank_where_spawn_passes_the_global_ordinal() -> None:
    """The reason the xmp.spawn -> torch_xla.launch fix is unsafe (the row's fix note)."""
    code = textwrap.dedent("""
        import torch_xla, torch_xla.runtime as xr
        import torch_xla.distributed.xla_multiprocessing as xmp

        def show(index, tag):
            print(tag, index, xr.global_ordinal(), flush=True)

        if __name__ == '__main__':
            import os
            if os.environ.get('TORCHELASTIC_RUN_ID'):
                torch_xla.launch(show, args=('launch',))
            else:
                xmp.spawn(show, args=('spawn',), nprocs=1, join=False, daemon=True)
                print('returned', flush=True)
        """)
    # torchrun's environment for local process 3 of a host: launch hands fn that LOCAL_RANK
    launched = _run(code, env={"TORCHELASTIC_RUN_ID": "t", "LOCAL_RANK": "3"})
    assert re.search(r"^launch 3 ", launched, re.M), launched[-2000:]
    # spawn hands fn the global ordinal; join=False did not return before fn ran (ignored under PJRT)
    spawned = _run(code)
    assert re.search(r"^spawn 0 0$", spawned, re.M) and spawned.index("spawn 0") < spawned.index("returned")
    note = ROWS["xmp-spawn"].fix.note
    assert "LOCAL_RANK" in note and "global ordinal" in note


@pytest.mark.release(">=2.2", why="torch_xla.distributed.spmd is 2.2+")
def test_the_star_import_of_spmd_fails_from_2_7() -> None:
    from flake8_xla.versions import parse_version
    import torch_xla

    result = subprocess.run([sys.executable, "-c", "from torch_xla.distributed.spmd import *"],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "PJRT_DEVICE": "CPU"})
    broken = parse_version(torch_xla.__version__) >= parse_version("2.7")
    assert (result.returncode != 0) == broken, result.stderr[-2000:]
    if broken:
        assert "AttributeError" in result.stderr and "MarkShardingFunctionmark_sharding" in result.stderr
