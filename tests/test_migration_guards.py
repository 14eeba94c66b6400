"""`fix --migrate-to torchtpu` around tests of torch_xla's presence: what XLA504 reports and rewrites,
where the imports a fix adds go, and probes that are not rewritten (issue 35)."""
import pytest

from flake8_xla.engine import fix_source, lint_source
from flake8_xla.versions import Target, parse_version

CHECK = 'torch.accelerator.is_available() and torch.accelerator.current_accelerator().type == "tpu"'


def fixed(source: str) -> str:
    outcome = fix_source(source, "train.py", Target(parse_version("2.9"), "test", migrate_to="torchtpu"))
    assert outcome.error is None
    return outcome.source


def found(source: str):
    return [(d.line, d.col + 1, d.code, d.message, d.help)
            for d in lint_source(source, target="2.9", migrate_to="torchtpu")]


def test_an_import_added_in_a_lazy_function_goes_before_the_guard_in_that_function():
    source = ("def main(accelerator):\n    print('start')\n    if accelerator == 'TPU':\n"
              "        import torch_xla.core.xla_model as xm\n        device = xm.xla_device()\n"
              "        xm.master_print('on', device)\n")
    assert fixed(source) == (
        "def main(accelerator):\n    print('start')\n    import os\n    import torch\n    if accelerator == 'TPU':\n"
        "        device = torch.device(\"tpu\", 0)\n        if int(os.environ.get(\"RANK\", \"0\")) == 0:\n"
        "            print('on', device)\n")


def test_a_guard_whose_uses_are_all_rewritten_becomes_the_flag_after_the_module_imports():
    source = ("import sys\n\ntry:\n    import torch_xla.core.xla_model as xm\n    HAS_XLA = True\n"
              "except ImportError:\n    HAS_XLA = False\n\n\ndef step():\n    if HAS_XLA:\n        xm.mark_step()\n")
    assert fixed(source) == (f"import sys\nimport torch\n\nHAS_XLA = {CHECK}\n\n\ndef step():\n    if HAS_XLA:\n"
                             "        pass\n")


def test_a_guard_first_in_the_module_gets_its_import_right_before_it():
    source = "try:\n    import torch_xla\n    XLA = True\nexcept ImportError:\n    XLA = False\nprint(XLA)\n"
    assert fixed(source) == f"import torch\nXLA = {CHECK}\nprint(XLA)\n"


def test_a_guard_inside_a_function_becomes_the_flag_there():
    source = ("def has_tpu():\n    try:\n        import torch_xla.core.xla_model as xm\n        ok = True\n"
              "    except (ImportError, RuntimeError):\n        ok = False\n    return ok\n")
    assert fixed(source) == f"def has_tpu():\n    import torch\n    ok = {CHECK}\n    return ok\n"


def test_a_guard_is_left_while_a_use_of_what_it_imports_needs_a_human():
    source = ("import torch\n\ntry:\n    import torch_xla.core.xla_model as xm\n    HAS_XLA = True\n"
              "except ImportError:\n    HAS_XLA = False\n\nif HAS_XLA:\n    xm.optimizer_step(opt)\n")
    assert fixed(source) == source
    assert [f[:3] for f in found(source)] == [(4, 5, "XLA504"), (10, 5, "XLA502")]


@pytest.mark.parametrize("guard", [
    "try:\n    import torch_xla  # TPU support\n    XLA = True\nexcept ImportError:\n    XLA = False\n",
    "try:\n    import torch_xla\n    XLA = True\nexcept ImportError as error:\n    XLA = False\n",
    "try:\n    import torch_xla\n    XLA = True\nexcept ImportError:\n    XLA = False\nelse:\n    print('tpu')\n",
])
def test_a_guard_with_a_comment_a_bound_error_or_an_else_is_reported_not_rewritten(guard):
    source = "import torch\n\n" + guard
    assert fixed(source) == source
    assert [f[2] for f in found(source)] == ["XLA504"]


@pytest.mark.parametrize("test, becomes", [
    ('find_spec("torch_xla") is not None', CHECK),
    ('find_spec("torch_xla") is None', f"not ({CHECK})"),
    ('not find_spec("torch_xla")', f"not ({CHECK})"),
    ('bool(find_spec("torch_xla"))', f"bool({CHECK})"),
    ('find_spec("torch_xla.core") or USE_TPU', f"({CHECK}) or USE_TPU"),
])
def test_find_spec_becomes_the_check(test, becomes):
    source = f"import torch\nfrom importlib.util import find_spec\n\nif {test}:\n    pass\n"
    assert fixed(source) == f"import torch\nfrom importlib.util import find_spec\n\nif {becomes}:\n    pass\n"


def test_a_spec_used_for_more_than_a_yes_or_no_needs_a_human():
    source = "import importlib.util\n\nspec = importlib.util.find_spec('torch_xla')\nprint(spec.origin)\n"
    assert found(source) == [(3, 8, "XLA504", "importlib.util.find_spec(\"torch_xla\") finds nothing on TorchTPU; "
                              "test torch.accelerator instead",
                              CHECK + "; needs a human: the spec is used for more than a yes or no")]
    assert fixed(source) == source


def test_sys_modules_and_device_type_not_equal():
    source = "import sys\nimport torch\n\nXLA = 'torch_xla' in sys.modules\nif x.device.type != 'xla':\n    pass\n"
    assert found(source) == [
        (4, 7, "XLA504", "\"torch_xla\" in sys.modules is always false on TorchTPU; test torch.accelerator instead",
         CHECK + "; needs a human: it asks whether torch_xla was imported, not whether a TPU is there"),
        (5, 21, "XLA504", "x.device.type != \"xla\" -> x.device.type != \"tpu\" on TorchTPU", None)]
    assert fixed(source) == source.replace("!= 'xla'", "!= 'tpu'")


@pytest.mark.parametrize("probe", ["xm.xla_device()", "_ = xm.xla_device()", "dev = xm.xla_device()\n    print(dev)"])
def test_a_probe_in_try_is_not_rewritten(probe):
    source = (f"import torch\nimport torch_xla.core.xla_model as xm\n\ntry:\n    {probe}\n    TPU = True\n"
              "except RuntimeError:\n    TPU = False\n")
    assert fixed(source) == source
    assert "it probes for a TPU inside try" in found(source)[0][4]


def test_a_device_taken_in_try_and_used_after_it_is_rewritten():
    source = ("import torch\nimport torch_xla.core.xla_model as xm\n\ntry:\n    device = xm.xla_device()\n"
              "    model.to(device)\nexcept KeyError:\n    pass\n")
    assert fixed(source) == source.replace("xm.xla_device()", 'torch.device("tpu", 0)').replace(
        "import torch_xla.core.xla_model as xm\n", "")


def test_a_master_print_over_lines_keeps_its_arguments_as_written():
    source = ("import torch_xla.core.xla_model as xm\n\nxm.master_print(\n    f'epoch {epoch}',  # progress\n"
              "    loss,\n)\n")
    assert fixed(source) == ("import os\n\nif int(os.environ.get(\"RANK\", \"0\")) == 0:\n    print(\n"
                             "    f'epoch {epoch}',  # progress\n    loss,\n)\n")


def test_a_master_print_over_lines_with_fd_is_left_to_a_human():
    source = "import sys\nimport torch_xla.core.xla_model as xm\n\nxm.master_print(\n    'x', fd=sys.stderr)\n"
    assert fixed(source) == source


def test_device_strings_are_rewritten_where_they_name_a_device_only():
    source = ("import torch\n\nx = t.to('xla')\nwith torch.autocast(device_type='xla', dtype=torch.bfloat16):\n"
              "    pass\nreply = InfoResponse(device_type='xla')\n")
    assert fixed(source) == source.replace("'xla')\nwith", "'tpu')\nwith").replace("device_type='xla', dtype",
                                                                                    "device_type='tpu', dtype")


def test_library_tests_are_found_by_name_wherever_they_are_imported_from():
    source = ("import torch_xla\nfrom .utils import is_tpu_available\nfrom transformers.file_utils import "
              "is_torch_tpu_available\n\n\ndef is_torch_xla_available():\n    return True\n\n\n"
              "if is_tpu_available(check_device=False) or is_torch_tpu_available() or is_torch_xla_available():\n"
              "    pass\n")
    assert [(line, col, code) for line, col, code, *_ in found(source) if code == "XLA504"] == [
        (10, 4, "XLA504"), (10, 44, "XLA504")]


def test_xla504_says_what_the_table_row_checked_against_the_wheels_says():
    from flake8_xla.migration.table import migration_table
    from flake8_xla.rules.torchtpu.xla504_torchtpu_availability_check import TPU_CHECK

    row = migration_table().availability
    assert row.fix.to == row.becomes == TPU_CHECK
    assert row.torch_names == ("torch.accelerator.is_available", "torch.accelerator.current_accelerator")
