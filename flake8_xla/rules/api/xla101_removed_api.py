"""XLA101 removed-api."""
from flake8_xla.lifecycle.rules import LifecycleRule, LifecycleUse, removal_phrase
from flake8_xla.rule import Example


class RemovedApi(LifecycleRule):
    code = "XLA101"
    name = "removed-api"
    summary = "A torch_xla function or class that no longer exists on the target release"
    kinds = ("function", "class", "decorator")
    states = ("removed",)
    level = "error"  # every use raises on the target (AttributeError, ImportError)
    what_it_does = (
        "Flags uses of torch_xla functions, classes and decorators that were removed on the target "
        "release, including the `from ... import` line that names them, and names the replacement. "
        "The help names the API an alias stands for (`rank_of is torch_xla.core.xla_model.get_ordinal`).\n\n"
        "Compat code is not reported. A release check is evaluated against the target: under "
        "`if XLA_GE_2_1:` (a flag from `RequirementCache(\"torch_xla>=2.1\")`, a "
        "`Version(torch_xla.__version__) >= Version(\"2.1\")` comparison, a tuple of version parts, or "
        "a flag imported from elsewhere whose name carries the release, such as "
        "`_XLA_GREATER_EQUAL_2_1`) the branch that runs on the target is linted and only the branch "
        "that cannot run there is compat code; torch version checks are read as the torch_xla release "
        "of the same number. A check that cannot be evaluated (a flag whose name carries no release, "
        "such as `XLA_FEATURE_VERSION`, or `hasattr(xr, ...)` on a torch_xla module) keeps both of its "
        "branches silent, and so does the rest of a block after `if <check>: return`; a check "
        "whose branch raises (`if not TORCH_GE_2_0: raise ...`) silences nothing after it. "
        "`hasattr()` on anything but a torch_xla module or object (`hasattr(args, \"tpu\")`) is no "
        "compat check. A `try` that imports is compat code only when its `except ImportError` "
        "handler binds an alternative (imports another module or assigns the imported names); a "
        "handler that only passes, logs or sets a flag hides the failure and the import is reported."
    )
    why_bad = (
        "The code fails on the target release: the attribute lookup raises `AttributeError` and "
        "the from-import raises `ImportError`, often far from the training loop that needs it "
        "(for example `xm.xrt_world_size()` inside a data sampler). Several of these APIs were "
        "removed without a deprecation release, so no warning ever announced it."
    )
    fix_safety = (
        "Where the replacement is a rename with the same meaning (for example "
        "`xm.get_ordinal()` -> `torch_xla.runtime.global_ordinal()`) the fix is safe; arguments "
        "with no equivalent (`xm.xla_device(n, devkind)`) leave the call to a human. On a target "
        "older than the replacement the fix uses the companion (`xla_compat.*`), which adds a "
        "dependency on it, so that fix is unsafe. APIs without a replacement have no fix."
    )
    valid = (
        Example("import torch_xla.runtime as xr\n\nworld = xr.world_size()\n", title="the replacement"),
        Example(
            "import torch_xla.core.xla_model as xm\n\nworld = xm.xrt_world_size()\n",
            target="2.4",
            title="fine on a target before the deprecation",
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n"
            "import torch_xla.runtime as xr\n\n"
            "if hasattr(xr, 'world_size'):\n"
            "    world = xr.world_size()\n"
            "else:\n"
            "    world = xm.xrt_world_size()\n",
            title="compat code in the other branch of a hasattr() check",
        ),
        Example(
            "def save(obj, path):\n    pass\n\nsave({}, 'model.pt')\n",
            title="an unrelated local definition",
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n"
            "import torch_xla.runtime as xr\n"
            "from mylib.imports import _XLA_GREATER_EQUAL_2_1\n\n"
            "if _XLA_GREATER_EQUAL_2_1:\n"
            "    world = xr.world_size()\n"
            "else:\n"
            "    world = xm.xrt_world_size()\n",
            title="the branch for releases older than the target is compat code",
        ),
    )
    invalid = (
        Example(
            "import torch_xla.core.xla_model as xm\n\nworld = xm.xrt_world_size()\n",
            expect=((3, 9, "xm.xrt_world_size() was removed in torch_xla 2.7; "
                           "use torch_xla.runtime.world_size() (2.1+)", None),),
            fixed=("import torch_xla.runtime as xr\n"
                   "\n"
                   "world = xr.world_size()\n"),
        ),
        Example(
            "from torch_xla.core.xla_model import get_ordinal\n\nrank = get_ordinal()\n",
            expect=(
                (1, 38, "torch_xla.core.xla_model.get_ordinal was removed in torch_xla 2.7; "
                        "use torch_xla.runtime.global_ordinal() (2.1+)"),
                (3, 8, "get_ordinal() was removed in torch_xla 2.7; "
                       "use torch_xla.runtime.global_ordinal() (2.1+)"),
            ),
            title="the import line itself fails",
            fixed=("import torch_xla.runtime as xr\n"
                   "\n"
                   "rank = xr.global_ordinal()\n"),
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\n"
            "if hasattr(args, 'tpu') and args.tpu:\n"
            "    world = xm.xrt_world_size()\n",
            expect=((4, 13, "xm.xrt_world_size() was removed in torch_xla 2.7; "
                            "use torch_xla.runtime.world_size() (2.1+)"),),
            title="hasattr() on a non-torch_xla object is no compat check",
            fixed=("import torch_xla.runtime as xr\n"
                   "\n"
                   "if hasattr(args, 'tpu') and args.tpu:\n"
                   "    world = xr.world_size()\n"),
        ),
        Example(
            "from torch_xla.core.xla_model import get_ordinal as rank_of\n\nrank = rank_of()\n",
            expect=(
                (1, 38, "torch_xla.core.xla_model.get_ordinal was removed in torch_xla 2.7; "
                        "use torch_xla.runtime.global_ordinal() (2.1+)"),
                (3, 8, "rank_of() was removed in torch_xla 2.7; use torch_xla.runtime.global_ordinal() (2.1+)",
                 "rank_of is torch_xla.core.xla_model.get_ordinal."),
            ),
            title="an alias names the API it stands for",
            fixed=("import torch_xla.runtime as xr\n"
                   "\n"
                   "rank = xr.global_ordinal()\n"),
        ),
        Example(
            "import torch_xla.runtime as xr\n\n@xr.requires_pjrt\ndef main():\n    pass\n",
            expect=((3, 2, "xr.requires_pjrt was removed in torch_xla 2.5; remove the decorator",
                     "No replacement; remove the decorator: PJRT is the only runtime since torch_xla 2.1."),),
            title="a decorator",
        ),
    )

    def message(self, use: LifecycleUse) -> str:
        return f"{use.api} {removal_phrase(use.row, use.state)}; {use.advice().first}"
