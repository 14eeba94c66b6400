"""A fix that rewrites to the companion (xla_compat) and the message of its diagnostic agree: the
message names what the fix writes, and the rendezvous helpers' summary says what the companion
does with and without a torch.distributed process group (tests/runtime/test_runtime_without_group.py
runs it)."""
import ast

import pytest

from flake8_xla.engine import fix_source, lint_fixable
from flake8_xla.lifecycle.fixes import destination
from flake8_xla.lifecycle.table import api_table
from flake8_xla.versions import Target, Version

TARGET = Target(Version(2, 9), "test")
COMPANION_ROWS = [r for r in api_table().rows if r.fix.to == "companion"]


def test_the_rendezvous_message_names_the_companion_the_fix_writes_and_upstream_s_precondition() -> None:
    source = "import torch_xla.core.xla_model as xm\n\nxm.rendezvous('checkpoint')\n"
    [(diagnostic, fix)] = lint_fixable(source, ast.parse(source), "m.py", TARGET)[0]
    assert (diagnostic.code, diagnostic.line, diagnostic.col) == ("XLA103", 3, 0)
    assert diagnostic.message == "xm.rendezvous() is planned for removal; use xla_compat.rendezvous()"
    assert diagnostic.help == (
        "The PyTorch/XLA usability plan (pytorch/xla#7739) slates it; not deprecated, but it warns indirectly "
        "from torch_xla 2.8 through xla_device(). Upstream replacement: torch.distributed.barrier(); it needs a "
        "process group: torch.distributed.init_process_group('xla', init_method='xla://') in every worker.")
    assert (fix.title, fix.safe) == ("Replace with xla_compat.rendezvous", False)
    outcome = fix_source(source, "m.py", TARGET, unsafe=True)
    assert outcome.source == "import xla_compat\n\nxla_compat.rendezvous('checkpoint')\n"
    assert outcome.notes == [
        "xla_compat.rendezvous() needs no process group: without one the workers meet in torch_xla's rendezvous, "
        "as before; with one it is a gloo barrier, without torch_xla's graph syncs"]


@pytest.mark.parametrize("row", COMPANION_ROWS, ids=lambda r: r.id)
def test_a_message_names_the_companion_its_fix_writes(row) -> None:
    module, attr = row.names[0].rsplit(".", 1)
    source = f"import {module} as m\n\nf = m.{attr}\n"
    [(diagnostic, fix)] = lint_fixable(source, ast.parse(source), "m.py", TARGET)[0]
    written = destination(row, TARGET.version)
    assert fix is not None and [e.text for e in fix.edits] == [written]
    assert diagnostic.message.endswith(f"; use {written}()"), diagnostic.message
