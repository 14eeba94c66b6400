"""tools/migrated_run_check.py on hand-written examples: the static pass (names bound only where
torch_xla imports), the added-import-in-guard and rewritten-probe counters, the import outcome
classes, and one whole run with a stand-in fixer. Needs no TorchTPU venv and no real fixer."""
import importlib.util
import json
import sys
import textwrap
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("migrated_run_check", ROOT / "tools" / "migrated_run_check.py")
mrc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mrc)


def findings(source):
    return [(line, name) for line, name, _ in mrc.dead_name_uses(textwrap.dedent(source))]


GUARD = """\
import torch
try:
    import torch_xla.core.xla_model as xm
    HAS_XLA = True
except ImportError:
    HAS_XLA = False
"""


def test_flag_bound_in_both_branches_is_no_finding():
    assert findings(GUARD + "print(HAS_XLA)\ndef f():\n    return HAS_XLA\n") == []


def test_name_bound_only_after_the_import_in_try():
    src = """\
    try:
        import torch_xla
        DEVICE = torch_xla.device()
        def helper(): return 1
    except ModuleNotFoundError:
        pass
    else:
        EXTRA = 1
    print(DEVICE)
    def f():
        return helper(), EXTRA, DEVICE
    """
    assert findings(src) == [(9, "DEVICE"), (11, "DEVICE"), (11, "EXTRA"), (11, "helper")]


def test_guarded_module_used_in_a_function_and_none_fallback():
    assert findings(GUARD + "def f():\n    xm.mark_step()\n    xm.mark_step()\n") == [(8, "xm")]  # once a scope
    fallback = GUARD.replace("HAS_XLA = False", "HAS_XLA = False\n    xm = None")
    assert findings(fallback + "def f():\n    xm.mark_step()\n") == []


def test_uses_under_a_falsy_flag_do_not_run():
    src = GUARD + textwrap.dedent("""\
    def f():
        if HAS_XLA:
            xm.mark_step()
        if not HAS_XLA or xm is None:
            return 1
        else:
            xm.mark_step()
        if HAS_XLA and torch.cuda.is_available():
            xm.mark_step()
        y = HAS_XLA and xm.is_master_ordinal() or xm.xla_device() if HAS_XLA else 0
        if torch.cuda.is_available():
            xm.mark_step()
    """)
    assert findings(src) == [(18, "xm")]


def test_flag_reassigned_to_a_non_constant_is_not_a_flag():
    src = GUARD + "HAS_XLA = HAS_XLA and torch.cuda.is_available()\nif HAS_XLA:\n    xm.mark_step()\n"
    assert findings(src) == [(9, "xm")]


def test_code_after_an_uncaught_import_does_not_run():
    unguarded = "import torch_xla.core.xla_model as xm\ndef f():\n    xm.mark_step()\n"
    wrong_handler = "try:\n    import torch_xla\n    X = 1\nexcept KeyError:\n    pass\nprint(X)\n"
    reraise = "try:\n    import torch_xla\n    X = 1\nexcept ImportError:\n    raise SystemExit('no xla')\nprint(X)\n"
    function = "def f():\n    import torch_xla\n    y = torch_xla.device()\n    return y\n"
    assert findings(unguarded) == findings(wrong_handler) == findings(reraise) == findings(function) == []


def test_function_level_guard():
    src = """\
    def f():
        try:
            import torch_xla.core.xla_model as xm
            dev = xm.xla_device()
            ok = True
        except Exception:
            ok = False
        return dev, ok
    """
    assert findings(src) == [(8, "dev")]


def test_scopes():
    src = GUARD + textwrap.dedent("""\
    def local():
        xm = 3          # its own binding
        return xm
    def uses_global():
        global xm
        xm = None       # a live binding of the module's name
    class C:
        xm = 1
        def m(self):
            return xm   # the class body's xm is not visible here: the module's is
    never = [xm for _ in ()]
    def dead_def_body():
        pass
    """)
    assert findings(src) == []
    src2 = GUARD + "class C:\n    xm = 1\n    def m(self):\n        return xm\n"
    assert findings(src2) == [(10, "xm")]
    src3 = GUARD + "def g():\n    return [xm for _ in range(2)] + [lambda: xm]\n"
    assert [(ln, n) for ln, n, scope in mrc.dead_name_uses(src3)] == [(8, "xm"), (8, "xm")]


def test_star_import_and_defs_in_dead_code():
    assert findings("from os.path import *\n" + GUARD + "def f():\n    return xm\n") == []
    src = "try:\n    import torch_xla\n    def g():\n        return undefined_name\nexcept ImportError:\n    pass\n"
    assert findings(src) == []


def counters(before, after):
    return mrc.compare(textwrap.dedent(before), textwrap.dedent(after))


def test_added_imports_inside_a_guard():
    before = GUARD + "if HAS_XLA:\n    x = 1\nprint(1)\n"
    after = textwrap.dedent("""\
    import os
    import torch
    try:
        import torch_xla.core.xla_model as xm
        import torch.distributed as dist
        HAS_XLA = True
    except ImportError:
        import math
        HAS_XLA = False
    if HAS_XLA:
        from torch import tpu
        x = 1
    print(1)
    """)
    got = counters(before, after)
    assert [ln for ln, _ in got["guard_imports"]] == [5, 8, 11]  # not `import os`, not the old imports
    assert got["probes"] == []


def test_import_put_in_place_of_the_torch_xla_import():
    # the try no longer imports torch_xla after the fix; it did before, so it is still the guard
    after = GUARD.replace("import torch_xla.core.xla_model as xm", "import torch.distributed as xm")
    assert [t for _, t in counters(GUARD, after)["guard_imports"]] == ["import torch.distributed as xm"]


def test_rewritten_probes():
    before = GUARD + textwrap.dedent("""\
    def probe():
        try:
            d = xm.xla_device()
            return True
        except Exception:
            d = xm.xla_device()
            return False
    def plain():
        return xm.xla_device()
    def other_try():
        try:
            d = open("x")
        except OSError:
            pass
    """)
    after = before.replace("xm.xla_device()", 'torch.device("tpu", 0)').replace('open("x")', 'torch.device("tpu")')
    got = counters(before, after)
    assert got["probes"] == [(9, 'd = torch.device("tpu", 0)')]  # not the handler, not outside try
    assert got["guard_imports"] == []


def test_classify():
    def out(exc_type, mro, name=None, last=""):
        return {"type": exc_type, "mro": mro, "name": name, "last": last}
    mnf = ["ModuleNotFoundError", "ImportError", "Exception"]
    assert mrc.classify(out(None, []), "", False) == ("ok", "")
    assert mrc.classify(out("ModuleNotFoundError", mnf, "torch_xla.core"), "", False)[0] == "torch_xla"
    cannot = out("ImportError", mnf[1:], "torch_xla.core.xla_model", "cannot import name")
    assert mrc.classify(cannot, "", False)[0] == "torch_xla"
    missing = out("ModuleNotFoundError", mnf, "transformers")
    assert mrc.classify(missing, "", False) == ("missing-dependency", "transformers")
    unbound = out("UnboundLocalError", ["UnboundLocalError", "NameError"])
    assert mrc.classify(unbound, "", False)[0] == "name-error"
    exited = out("SystemExit", ["SystemExit"], last="SystemExit: 2")
    assert mrc.classify(exited, "", False) == ("other", "SystemExit: 2")
    assert mrc.classify(None, "F0000 check failed\n", False) == ("other", "crashed: F0000 check failed")
    assert mrc.classify(None, "", True) == ("other", "timeout")


def test_import_target(tmp_path):
    (tmp_path / "src" / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "partial" / "inner").mkdir(parents=True)
    for f in ("src/pkg/__init__.py", "src/pkg/sub/__init__.py", "src/pkg/sub/mod.py", "train.py",
              "partial/inner/__init__.py"):
        (tmp_path / f).write_text("")
    (tmp_path / "partial" / "inner" / "deep.py").write_text("from .. import x\n")  # partial has no __init__
    src = str(tmp_path / "src")
    assert mrc.import_target(tmp_path, "src/pkg/sub/mod.py") == (
        "module", "pkg.sub.mod", [src, str(tmp_path)], [])
    assert mrc.import_target(tmp_path, "src/pkg/__init__.py")[:2] == ("module", "pkg")
    assert mrc.import_target(tmp_path, "partial/inner/deep.py")[:2] == ("module", "partial.inner.deep")
    assert mrc.import_target(tmp_path, "train.py") == ("path", "train", [str(tmp_path), src], [])


def test_whole_run_with_a_stand_in_fixer(tmp_path, capsys):
    tree = tmp_path / "trees" / "demo"
    tree.mkdir(parents=True)
    (tree / "train.py").write_text(GUARD + "def f():\n    return xm.xla_device()\n")
    (tree / "untouched.py").write_text("x = 1\n")
    fixer = tmp_path / "fake-python"  # called as `fake-python -m flake8_xla fix ...` in the copy
    fixer.write_text(f"#!{sys.executable}\nimport pathlib\np = pathlib.Path('train.py')\n"
                     "p.write_text(p.read_text().replace('xm.xla_device()', 'torch.device(\"tpu\", 0)')"
                     ".replace('    HAS_XLA = True', '    import torch.distributed\\n    HAS_XLA = True'))\n")
    fixer.chmod(0o755)
    assert mrc.main(["--trees", str(tmp_path / "trees"), "--engine-python", str(fixer), "--static-only", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    demo = report["trees"][0]
    assert demo["changed"] == ["train.py"] and demo["imports"] == {}
    assert [(g["line"], g["text"]) for g in demo["guard_imports"]] == [(4, "import torch.distributed")]
    assert demo["static"] == [] and demo["probes"] == []
    assert report["totals"]["files changed"] == 1
    assert (tree / "train.py").read_text().count("xm.xla_device()") == 1  # the original is untouched
