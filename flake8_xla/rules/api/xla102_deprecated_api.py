"""XLA102 deprecated-api."""
from flake8_xla.lifecycle.rules import LifecycleRule, LifecycleUse, removal_phrase
from flake8_xla.rule import Example


class DeprecatedApi(LifecycleRule):
    code = "XLA102"
    name = "deprecated-api"
    summary = "A torch_xla function or class deprecated on the target release"
    kinds = ("function", "class", "decorator")
    states = ("deprecated",)
    what_it_does = (
        "Flags uses of torch_xla functions and classes that are deprecated on the target release "
        "and names the replacement and the release it appeared in."
    )
    why_bad = (
        "Deprecated torch_xla APIs are removed after a grace period of about two releases "
        "(`xm.xrt_world_size()` warned in 2.5 and was gone in 2.7), and the warning is easy to miss. "
        "From torch_xla 2.8 it is a `DeprecationWarning`, which Python's default filters show once "
        "per call site and only for code run as `__main__`: a library's calls print nothing. "
        "Measured on torch_xla 2.9, CPU: 5 `xm.mark_step()` calls in a loop of a script print 1 "
        "warning; the same loop in an imported module prints none, `python -W default` shows it once "
        "per call site, pytest lists every call in its warnings summary, and "
        "`-W error::DeprecationWarning` turns it into an error. Before 2.8 it was a "
        "`logging.warning`, once per deprecated alias, that `-W error` cannot catch."
    )
    fix_safety = (
        "`xm.mark_step()` -> `torch_xla.sync()` and `xm.xla_device()` -> `torch_xla.device()` are "
        "safe renames (their arguments are mapped: `wait=`, `n` -> `index`); an argument without an "
        "equivalent leaves the call to a human."
    )
    valid = (
        Example("import torch_xla\n\ntorch_xla.sync()\ndevice = torch_xla.device()\n", title="the replacements"),
        Example(
            "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n",
            target="2.4",
            title="fine before the deprecation",
        ),
        Example(
            "class Trainer:\n    def mark_step(self):\n        pass\n\n    def run(self):\n        self.mark_step()\n",
            title="a method of the same name",
        ),
    )
    invalid = (
        Example(
            "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\nxm.mark_step()\n",
            expect=(
                (3, 10, "xm.xla_device() is deprecated since torch_xla 2.8; use torch_xla.device() (2.3+)", None),
                (4, 1, "xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() (2.4+)", None),
            ),
            fixed=("import torch_xla\n"
                   "\n"
                   "device = torch_xla.device()\n"
                   "torch_xla.sync()\n"),
        ),
        Example(
            "import torch_xla\n\ntorch_xla.core.xla_model.mark_step()\n",
            expect=((3, 1, "torch_xla.core.xla_model.mark_step() is deprecated since torch_xla 2.8; "
                           "use torch_xla.sync() (2.4+)"),),
            title="the full dotted path",
            fixed=("import torch_xla\n"
                   "\n"
                   "torch_xla.sync()\n"),
        ),
        Example(
            "import torch_xla.core.xla_model as xm\n\nworld = xm.xrt_world_size()\n",
            target="2.6",
            expect=((3, 9, "xm.xrt_world_size() is deprecated since torch_xla 2.5 (removed in 2.7); "
                           "use torch_xla.runtime.world_size() (2.1+)"),),
            title="deprecated on the target, removed later",
            fixed=("import torch_xla.runtime as xr\n"
                   "\n"
                   "world = xr.world_size()\n"),
        ),
    )

    def message(self, use: LifecycleUse) -> str:
        return f"{use.api} {removal_phrase(use.row, use.state)}; {use.advice().first}"
