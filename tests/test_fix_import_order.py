"""An import a fix adds goes where isort (profile black) puts it among the imports it joins: `import x`
lines by module, before `from x import y` lines; a run of imports that is not in that order keeps the
added import right after the import of the old API, as before."""
import textwrap

import pytest

from flake8_xla.engine import fix_source
from flake8_xla.versions import Target, Version

USES = "\nxm.mark_step()\nprint(xm)\n"  # the old module stays in use: its import stays where it is


def fixed(source: str) -> str:
    return fix_source(source, "m.py", Target(Version(2, 9), "test")).source


@pytest.mark.parametrize("before, after", [
    # `import a` neighbours: by module name
    ("import os\nimport torch\nimport torch_xla.core.xla_model as xm\nimport zipfile\n",
     "import os\nimport torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\nimport zipfile\n"),
    # `from a import b` neighbours: after every `import a`
    ("import torch_xla.core.xla_model as xm\nfrom torch_xla import runtime\n",
     "import torch_xla\nimport torch_xla.core.xla_model as xm\nfrom torch_xla import runtime\n"),
    # names compare without case and numbers by value, as isort's natural sort
    ("import Alpha\nimport torch_xla.core.xla_model as xm\nimport xla2\nimport xla10\n",
     "import Alpha\nimport torch_xla\nimport torch_xla.core.xla_model as xm\nimport xla2\nimport xla10\n"),
    # `from __future__` stays first
    ("from __future__ import annotations\nimport torch_xla.core.xla_model as xm\n",
     "from __future__ import annotations\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"),
    # a blank line ends the run the import joins
    ("import aaa\n\nimport torch_xla.core.xla_model as xm\n",
     "import aaa\n\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"),
    # a run that is not in isort's order: right after the old import, as before
    ("import zzz\nimport torch_xla.core.xla_model as xm\nimport aaa\n",
     "import zzz\nimport torch_xla.core.xla_model as xm\nimport torch_xla\nimport aaa\n"),
    ("from torch_xla import runtime\nimport torch_xla.core.xla_model as xm\n",
     "from torch_xla import runtime\nimport torch_xla.core.xla_model as xm\nimport torch_xla\n"),
    ("import os, sys\nimport torch_xla.core.xla_model as xm\n",  # isort would split the first line
     "import os, sys\nimport torch_xla.core.xla_model as xm\nimport torch_xla\n"),
])
def test_import_torch_xla_among_its_neighbours(before: str, after: str) -> None:
    assert fixed(before + USES) == after + "\ntorch_xla.sync()\nprint(xm)\n"


def test_import_a_b_as_c_among_its_neighbours() -> None:
    source = ("import torch_xla.core.xla_model as xm\nimport torch_xla.debug.metrics as met\n"
              "import torch_xla.utils.utils as xu\nfrom torch_xla.distributed import spmd\n\n"
              "n = xm.xrt_world_size()\nprint(xm, met, xu, spmd)\n")
    assert fixed(source) == (
        "import torch_xla.core.xla_model as xm\nimport torch_xla.debug.metrics as met\nimport torch_xla.runtime as xr\n"
        "import torch_xla.utils.utils as xu\nfrom torch_xla.distributed import spmd\n\n"
        "n = xr.world_size()\nprint(xm, met, xu, spmd)\n")


def test_two_added_imports_each_in_its_place() -> None:
    source = "import torch_xla.core.xla_model as xm\n\nn = xm.xrt_world_size()" + USES
    assert fixed(source) == ("import torch_xla\nimport torch_xla.core.xla_model as xm\n"
                             "import torch_xla.runtime as xr\n\nn = xr.world_size()\ntorch_xla.sync()\nprint(xm)\n")


def test_inside_a_guard_among_the_guarded_imports() -> None:
    source = textwrap.dedent("""\
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.utils.utils as xu
        except ImportError:
            xm = xu = None


        def world():
            return xm.xrt_world_size(), xu
        """)
    assert fixed(source) == textwrap.dedent("""\
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            import torch_xla.utils.utils as xu
        except ImportError:
            xm = xu = None


        def world():
            return xr.world_size(), xu
        """)
