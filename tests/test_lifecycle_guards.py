"""Release guards, compat imports, aliases through attributes and alias wording of the lifecycle
rules (XLA101-XLA106): what real multi-version code does, with exact diagnostics or exact silence.

Only the lifecycle rules run here, so the expectations name nothing but XLA1xx codes."""
import importlib
import re

import pytest

from flake8_xla.engine import lint
from flake8_xla.lifecycle.rules import LifecycleRule
from flake8_xla.fixing.lines import split_lines

_MODULES = ("xla101_removed_api", "xla102_deprecated_api", "xla103_planned_api_removal", "xla104_moved_module",
            "xla105_changed_argument", "xla106_deprecated_env_var")


def _lifecycle_rules():
    out = []
    for name in _MODULES:
        module = importlib.import_module(f"flake8_xla.rules.api.{name}")
        out += [cls() for cls in vars(module).values()
                if isinstance(cls, type) and issubclass(cls, LifecycleRule) and cls.__module__ == module.__name__]
    return out


RULES = _lifecycle_rules()
XM = "import torch_xla.core.xla_model as xm\n"
XR = "import torch_xla.runtime as xr\n"

MARK_STEP = "xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)"
WORLD_SIZE_REMOVED = "xm.xrt_world_size() was removed in torch_xla 2.7; use torch_xla.runtime.world_size() (2.1+)"
WORLD_SIZE_DEPRECATED = ("xm.xrt_world_size() is deprecated since torch_xla 2.5 (removed in 2.7); "
                         "use torch_xla.runtime.world_size() (2.1+)")
SHARDING = "torch_xla.experimental.xla_sharding moved to torch_xla.distributed.spmd (2.2+)"


def check(source: str, target: str = "2.9", with_help: bool = False):
    source = re.sub(r"(?m)^ {8}", "", source)  # the snippets below are indented by 8 columns
    return [(d.line, d.col + 1, d.code, d.message) + ((d.help,) if with_help else ())
            for d in lint(split_lines(source), None, "<string>", target, rules=RULES)]


# 1. hasattr()/getattr() is a compat guard only on a torch_xla module or object


def test_hasattr_on_an_argument_namespace_is_no_guard():
    assert check(XM + """
        if hasattr(args, "tpu") and args.tpu:
            xm.mark_step()
    """) == [(4, 5, "XLA102", MARK_STEP)]


def test_hasattr_naming_an_xla_api_on_another_object_is_no_guard():
    assert check(XM + """
        if hasattr(trainer, "xrt_world_size"):
            n = trainer.xrt_world_size()
        else:
            n = xm.xrt_world_size()
    """) == [(6, 9, "XLA101", WORLD_SIZE_REMOVED)]


@pytest.mark.parametrize("test", [
    'hasattr(xr, "world_size")',
    'getattr(torch_xla.runtime, "world_size", None) is not None',
    'not hasattr(xm, "xrt_world_size") is False',
])
def test_hasattr_on_torch_xla_stays_a_guard(test):
    assert check("import torch_xla\n" + XM + XR + f"""
        if {test}:
            n = xr.world_size()
        else:
            n = xm.xrt_world_size()
    """) == []


def test_hasattr_on_an_attribute_that_holds_a_torch_xla_module_is_a_guard():
    assert check(XM + """
        class Runner:
            def __init__(self):
                self._xm = xm

            def world(self):
                if hasattr(self._xm, "xrt_world_size"):
                    return self._xm.xrt_world_size()
                return 1
    """) == []


# 2. version guards are evaluated against the target


GUARDS = {
    "RequirementCache flag": ('from lightning_utilities.core.imports import RequirementCache\n'
                              'XLA_GE_2_1 = RequirementCache("torch_xla>=2.1")\n', "XLA_GE_2_1"),
    "packaging Version": ("import torch_xla\nfrom packaging.version import Version\n",
                          'Version(torch_xla.__version__) >= Version("2.1")'),
    "version.parse": ("import torch_xla\nfrom packaging import version\n",
                      'version.parse(torch_xla.__version__) >= version.parse("2.1.0")'),
    "packaging.version module": ("import torch_xla\nimport packaging.version\n",
                                 'packaging.version.parse(torch_xla.__version__) > packaging.version.parse("2.0")'),
    "tuple of version parts": ("import torch_xla\n",
                               'tuple(int(p) for p in torch_xla.__version__.split(".")[:2]) >= (2, 1)'),
    "tuple via map": ("import torch_xla\n", 'tuple(map(int, torch_xla.__version__.split(".")[:2])) >= (2, 1)'),
    "flag assigned from a comparison": ("import torch_xla\nfrom packaging.version import Version\n"
                                        'NEW = Version(torch_xla.__version__) >= Version("2.1")\n', "NEW"),
    "imported _XLA_AVAILABLE_GE_2_1": ("from mylib.imports import _XLA_AVAILABLE_GE_2_1\n",
                                       "_XLA_AVAILABLE_GE_2_1"),
    "imported XLA_GE_2_1": ("from .utils import XLA_GE_2_1\n", "XLA_GE_2_1"),
    "imported _TORCH_XLA_GREATER_EQUAL_2_1": ("from mylib import _TORCH_XLA_GREATER_EQUAL_2_1\n",
                                              "_TORCH_XLA_GREATER_EQUAL_2_1"),
    "flag through a module attribute": ("from mylib import imports\n", "imports._XLA_GREATER_EQUAL_2_1"),
    "torch version flag": ("from mylib import _TORCH_GREATER_EQUAL_2_1\n", "_TORCH_GREATER_EQUAL_2_1"),
    "compare_version helper": ("import operator\n", 'compare_version("torch_xla", operator.ge, "2.1.0")'),
}


@pytest.mark.parametrize("prelude, test", GUARDS.values(), ids=GUARDS.keys())
def test_the_branch_that_runs_on_the_target_is_linted(prelude, test):
    source = XM + XR + prelude + f"if {test}:\n    xm.mark_step()\n    n = xr.world_size()\nelse:\n" \
                                 f"    n = xm.xrt_world_size()\n"
    line = source.splitlines().index("    xm.mark_step()") + 1
    assert check(source) == [(line, 5, "XLA102", MARK_STEP)]


def test_the_other_branch_runs_on_an_older_target():
    source = XM + XR + """
        from lightning.fabric.accelerators.xla import _XLA_GREATER_EQUAL_2_7
        if _XLA_GREATER_EQUAL_2_7:
            n = xr.world_size()
        else:
            n = xm.xrt_world_size()
    """
    assert check(source, "2.9") == []
    assert check(source, "2.6") == [(8, 9, "XLA102", WORLD_SIZE_DEPRECATED)]


def test_early_return_under_an_old_release_leaves_the_rest_linted():
    assert check(XM + """
        import torch_xla
        from packaging.version import Version

        def world():
            if Version(torch_xla.__version__) < Version("2.1"):
                return xm.xrt_world_size()
            xm.mark_step()
    """) == [(9, 5, "XLA102", MARK_STEP)]


def test_early_return_on_the_target_makes_the_rest_compat_code():
    assert check(XM + XR + """
        from mylib import XLA_GE_2_1

        def world():
            if XLA_GE_2_1:
                return xr.world_size()
            return xm.xrt_world_size()
    """) == []


def test_raise_on_old_torch_does_not_make_the_function_compat_code():
    assert check(XM + """
        from mylib import TORCH_GE_2_0

        def train():
            if not TORCH_GE_2_0:
                raise RuntimeError("needs torch 2.0")
            xm.mark_step()
    """) == [(8, 5, "XLA102", MARK_STEP)]


def test_raise_under_a_guard_that_cannot_be_evaluated_is_no_fallback():
    assert check(XM + """
        def train():
            if not XLA_VERSION_OK:
                raise RuntimeError("unsupported torch_xla")
            xm.mark_step()
    """) == [(6, 5, "XLA102", MARK_STEP)]


def test_a_guard_that_cannot_be_evaluated_stays_compat_code():
    assert check(XM + """
        from mylib import XLA_FEATURE_VERSION

        if XLA_FEATURE_VERSION:
            xm.mark_step()
        else:
            xm.xrt_world_size()

        def world():
            if XLA_FEATURE_VERSION:
                return 1
            return xm.xrt_world_size()
    """) == []


def test_availability_alone_is_no_guard_but_combines_with_one():
    assert check(XM + XR + """
        from mylib import _XLA_AVAILABLE, XLA_GE_2_1
        if _XLA_AVAILABLE:
            xm.mark_step()
        if _XLA_AVAILABLE and XLA_GE_2_1:
            n = xr.world_size()
        else:
            n = xm.xrt_world_size()
    """) == [(6, 5, "XLA102", MARK_STEP)]


def test_a_flag_that_can_be_false_on_the_target_leaves_the_else_branch_linted():
    assert check(XM + XR + """
        from mylib import XLA_GE_2_1
        if XLA_GE_2_1 and not legacy:
            n = xr.world_size()
        else:
            n = xm.xrt_world_size()
    """) == [(8, 9, "XLA101", WORLD_SIZE_REMOVED)]


def test_conditional_expression_on_the_release():
    assert check(XM + XR + """
        from mylib import XLA_GE_2_1
        n = xr.world_size() if XLA_GE_2_1 else xm.xrt_world_size()
        sync = xm.mark_step() if XLA_GE_2_1 else None
    """) == [(6, 8, "XLA102", MARK_STEP)]


# 3. try/except ImportError that binds no alternative hides a removed module


@pytest.mark.parametrize("handler", [
    "pass",
    "logger.warning('sharding unavailable')",
    "HAS_SHARDING = False",
])
def test_import_hidden_by_a_handler_without_an_alternative_is_reported(handler):
    assert check(f"""
        try:
            import torch_xla.experimental.xla_sharding as xs
            HAS_SHARDING = True
        except ImportError:
            {handler}
    """) == [(3, 12, "XLA104", SHARDING)]


def test_broad_handler_without_an_alternative_is_reported_too():
    assert check("""
        try:
            from torch_xla.experimental.xla_sharding import Mesh
        except Exception:
            pass
    """) == [(3, 5, "XLA104", SHARDING)]


@pytest.mark.parametrize("handler", [
    "import torch_xla.distributed.spmd as xs",
    "xs = None",
    "xs = load_sharding()",
    "from mylib import sharding_shim as xs",
])
def test_handler_that_binds_an_alternative_is_compat_code(handler):
    assert check(f"""
        try:
            import torch_xla.experimental.xla_sharding as xs
        except ImportError:
            {handler}
    """) == []


# 4. torch_xla modules held in attributes of self


def test_module_held_in_an_attribute_of_self():
    assert check(XM + """
        class Trainer:
            def setup(self):
                self._xm = xm

            def step(self):
                self._xm.mark_step()
                return [self._xm.xrt_world_size() for _ in range(2)]
    """) == [
        (8, 9, "XLA102", "self._xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)"),
        (9, 17, "XLA101", "self._xm.xrt_world_size() was removed in torch_xla 2.7; "
                          "use torch_xla.runtime.world_size() (2.1+)"),
    ]


def test_attribute_imported_inside_a_method():
    assert check("""
        class Trainer:
            def __init__(self):
                self.xm = None

            def lazy(self):
                import torch_xla.core.xla_model as xm
                self.xm = xm

            def step(self):
                self.xm.mark_step()
    """) == [(11, 9, "XLA102", "self.xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)")]


def test_attribute_assigned_something_else_too_is_not_followed():
    assert check(XM + """
        class Trainer:
            def __init__(self, backend):
                self._xm = xm
                if backend:
                    self._xm = backend

            def step(self):
                self._xm.mark_step()

        class Other:
            def step(self):
                self._xm.mark_step()
    """) == []


# 6. an alias names the real API too


def test_alias_names_the_real_api():
    assert check("""
        from torch_xla.core.xla_model import get_ordinal as rank_of
        from torch_xla.core.xla_model import xla_device as dev
        rank = rank_of()
        device = dev()
    """, with_help=True) == [
        (2, 38, "XLA101", "torch_xla.core.xla_model.get_ordinal was removed in torch_xla 2.7; "
                          "use torch_xla.runtime.global_ordinal() (2.1+)", None),
        (4, 8, "XLA101", "rank_of() was removed in torch_xla 2.7; use torch_xla.runtime.global_ordinal() (2.1+)",
         "rank_of is torch_xla.core.xla_model.get_ordinal."),
        (5, 10, "XLA102", "dev() is deprecated since torch_xla 2.8; use torch_xla.device() (2.3+)",
         "dev is torch_xla.core.xla_model.xla_device."),
    ]


def test_alias_of_the_callee_of_a_changed_argument():
    assert check("""
        from torch_xla.core.xla_model import get_local_ordinal as local_rank
        r = local_rank(0)
    """, with_help=True) == [
        (3, 5, "XLA103", "local_rank() is planned for deprecation; use torch_xla.runtime.local_ordinal() (2.1+)",
         "local_rank is torch_xla.core.xla_model.get_local_ordinal. The PyTorch/XLA usability plan "
         "(pytorch/xla#7739) slates it; no warning as of torch_xla 2.9."),
        (3, 16, "XLA105", "local_rank(): `defval` fails since torch_xla 2.5; call it without arguments",
         "local_rank is torch_xla.core.xla_model.get_local_ordinal. The call raises TypeError. "
         "Use torch_xla.runtime.local_ordinal() (2.1+)."),
    ]


# 5. environment values picked from a dict of constants


def test_env_value_from_a_dict_of_constants():
    assert check("""
        import os
        os.environ["PJRT_DEVICE"] = {"cuda": "GPU", "gpu": "GPU", "tpu": "TPU"}[dev]
    """, with_help=True) == [(3, 12, "XLA106",
                              "environment variable PJRT_DEVICE=GPU is unsupported since torch_xla 2.3; "
                              "set PJRT_DEVICE=CUDA on 2.2-2.8",
                              "Set PJRT_DEVICE=CUDA on 2.2-2.8; XLA:CUDA itself was removed in 2.9, so use "
                              "PyTorch's native CUDA backend.")]


def test_env_value_from_a_conditional_expression():
    assert check("""
        import os
        os.environ["PJRT_DEVICE"] = "CUDA" if cuda else "TPU"
        os.environ["XLA_USE_BF16"] = "1" if bf16 else "0"
    """) == [
        (3, 12, "XLA106", "environment variable PJRT_DEVICE=CUDA is unsupported since torch_xla 2.9; "
                          "no replacement"),
        (4, 12, "XLA106", "environment variable XLA_USE_BF16 is deprecated since torch_xla 2.4; "
                          "cast the model to bf16"),
    ]


# 9. a fallback chain tries the legacy call first and goes on without it


def test_a_value_tried_under_a_broad_except_is_a_probe_not_a_use():
    assert check(XM + XR + """
        try:
            n = xm.xrt_world_size()
        except Exception:
            pass
        n = xr.world_size()
    """) == []


@pytest.mark.parametrize("body", ["xm.mark_step()", "n = xm.xrt_world_size()\n    m = n * 2"])
def test_a_statement_that_does_something_under_a_broad_except_is_still_reported(body):
    found = check(XM + "try:\n    " + body + "\nexcept Exception:\n    pass\n")
    assert [(line, col, code) for line, col, code, _ in found] == \
        [(3, 5, "XLA102")] if "mark_step" in body else [(3, 9, "XLA101")]


def test_the_process_group_advice_under_spmd_is_a_cpu_group():
    rendezvous = "xm.rendezvous() is planned for removal; use xla_compat.rendezvous()"
    plan = ("The PyTorch/XLA usability plan (pytorch/xla#7739) slates it; not deprecated, but it warns indirectly "
            "from torch_xla 2.8 through xla_device(). Upstream replacement: torch.distributed.barrier(); ")
    assert check(XM + XR + "xm.rendezvous('init')\n", with_help=True) == [(3, 1, "XLA103", rendezvous, plan + (
        "it needs a process group: torch.distributed.init_process_group('xla', init_method='xla://') in every "
        "worker."))]
    spmd = XM + XR + "xr.use_spmd()\nxm.rendezvous('init')\n"
    assert check(spmd, with_help=True) == [(4, 1, "XLA103", rendezvous, plan + (
        "it needs a process group, under SPMD a CPU one (the 'xla' backend asserts with SPMD): "
        "torch.distributed.init_process_group('gloo', init_method='xla://')."))]
