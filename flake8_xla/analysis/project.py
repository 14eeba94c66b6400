"""The project a file belongs to, as the graph rules see it across files: summaries of the
functions of other modules (what they do with their arguments, whether they sync, what they
return), and which of them a call of this file runs. Part of the shared semantic layer.

A summary says which parameters a function reads to the host (``.item()``, ``.cpu()``,
``.numpy()``, ``.tolist()``, ``.to("cpu")``, ``float()``/``int()``, ``np.asarray()``: of the
parameter or of a value computed from it), whether it syncs the graph, whether it returns a device
tensor, and which torch_xla modules it returns (``xm, pl = import_xla()``). Summaries are plain,
picklable data that :mod:`flake8_xla.analysis.summaries` makes from one module's tree; a front-end
that knows the file system (the CLI) computes them once per file, caches them, and hands them to
the lint of the files that import that module through :class:`Project`;
:class:`flake8_xla.analysis.calls.ProjectCalls` answers, in the importing file, which summary a call runs.
"""
from __future__ import annotations

import re
from typing import Dict, NamedTuple, Optional, Tuple


class HostRead(NamedTuple):
    position: int  # of the parameter among the call's positional arguments (self/cls not counted)
    parameter: str
    how: str  # ".cpu()", "float()", ...
    line: int
    copies: bool  # a copy to the host (.cpu(), .numpy(), np.asarray()), not a read of the value (.item())


class FunctionSummary(NamedTuple):
    name: str  # "f", or "Class.method"
    path: str  # the module's file
    line: int
    reads: Tuple[HostRead, ...]
    syncs: bool
    returns_device: bool
    returns_modules: Tuple[Optional[str], ...]  # torch_xla modules returned: one, or one per tuple element
    returns_xla_device: str = ""  # "all" / "any" of its returns that can run on XLA give the XLA device
    returns_fsdp: str = ""  # "v1" / "v2": it returns an FSDP wrapper it builds (``return FSDP(module)``)
    reduces: Tuple[int, ...] = ()  # positions of the optimizers whose gradients it all-reduces
    saves_on_master: Tuple[Tuple[int, int], ...] = ()  # (position, line): arguments it saves on the master only


# What a call passes for one argument, as far as the callee needs to know: the value kinds of
# :mod:`flake8_xla.analysis.tensors` ("device", "module", ...) and these two.
XLA_DEVICE = "xla-device"  # the XLA device itself (``xm.xla_device()``, ``torch_xla.device()``)
DEVICE_LOADER = "device-loader"  # a loader whose batches are on the XLA device (MpDeviceLoader)
OTHER_DEVICE = "other-device"  # a device that is not XLA's ("cpu", torch.device("cuda"))
XLA_MODULE = "xla-module"  # a model on the XLA device where the call passes it (``Net().to(device)``)


class OutgoingCall(NamedTuple):
    """A call of a module's code to a function it imports, with what it passes that is on XLA."""
    level: int  # the dots of a relative import
    name: str  # dotted, as the caller names it: ``engine.train_one_epoch``, ``Trainer``
    line: int
    arguments: Tuple[Tuple[object, str], ...]  # (position or keyword, fact); unknown ones left out
    per_step: bool = False  # the call runs once per step of the caller (inside its step region)


class CallSite(NamedTuple):
    """A call from another module of the project into a function of this one."""
    path: str  # the calling file
    line: int
    arguments: Tuple[Tuple[object, str], ...]  # (position, self not counted, or keyword; fact)
    per_step: bool = False  # the caller runs it once per step


class ModuleSummary(NamedTuple):
    path: str
    functions: Dict[str, FunctionSummary]
    # names the module imports at its top level: name -> (level, module, attribute) (re-exports)
    imports: Dict[str, Tuple[int, str, str]]


class Project:
    """The other modules of the project a file belongs to; a front-end that knows the file system
    subclasses it. This one knows none (the flake8 plugin lints each file on its own)."""

    # the file is linted only because it holds framework hooks (a LightningModule of a project that
    # trains on XLA, never naming torch_xla itself): only the hooks, and what they call, are step code
    hooks_only = False

    def module(self, importer: str, name: str, level: int = 0) -> Optional[ModuleSummary]:
        """The summary of module ``name`` as imported by the file ``importer`` (``level``: the dots
        of a relative import), or None when it is no file of the project."""
        return None

    def has_top_level(self, importer: str, name: str) -> bool:
        """Whether an absolute import of ``name`` from ``importer`` can reach a file of the project
        (a cheap test before looking for its submodules)."""
        return False

    def function(self, importer: str, level: int, dotted_name: str, depth: int = 0) -> Optional[FunctionSummary]:
        """``pkg.utils.accuracy`` / ``pkg.utils.Meter.update`` as ``importer`` imports it: the module
        is the longest prefix that is a file of the project; a name that module imports from
        elsewhere is followed (a package's ``__init__`` re-exporting it)."""
        if depth > 3 or (level == 0 and (not_project(dotted_name) or
                                         not self.has_top_level(importer, dotted_name.split(".", 1)[0]))):
            return None
        parts = dotted_name.split(".")
        for cut in range(len(parts) - 1, 0 if level == 0 else -1, -1):
            module_name, rest = ".".join(parts[:cut]), ".".join(parts[cut:])
            summary = self.module(importer, module_name, level)
            if summary is None:
                continue
            found = summary.functions.get(rest)
            if found is not None:
                return found
            head, _, tail = rest.partition(".")
            if head in summary.imports:
                sub_level, sub_module, attr = summary.imports[head]
                target = ".".join(x for x in (sub_module, attr, tail) if x)
                return self.function(summary.path, sub_level, target, depth + 1)
            return None
        return None

    # the file is linted only because code of the project that runs on XLA calls these functions of
    # it (a module that never names torch_xla): only they, and what they call, are step code
    entry_functions: Optional[frozenset] = None

    def call_sites(self, path: str, function: str) -> Tuple[CallSite, ...]:
        """The calls from the project's modules that run on XLA into ``function`` (``f``,
        ``Class.method``; ``Class`` for its constructor) of the file ``path``."""
        return ()

    def returned_modules(self, importer: str, qualname: str) -> Tuple[Optional[str], ...]:
        """The torch_xla modules the project function ``qualname`` returns (``xm, pl = import_xla()``)."""
        found = self.function(importer, 0, qualname)
        return found.returns_modules if found is not None else ()


NO_PROJECT = Project()


def is_test_file(filename: str) -> bool:
    """A test module (``test_*.py``, ``*_test.py``, or directly in a ``test``/``tests`` folder): its
    assertions read values on purpose, and what it passes to the project's functions is no run's."""
    parts = re.split(r"[\\/]", filename)
    name = parts[-1]
    return name.startswith("test_") or name.endswith("_test.py") or (len(parts) > 1 and parts[-2] in ("test", "tests"))


def not_project(dotted_name: str) -> bool:
    """Whether an absolute name is surely of an installed package, not of the project."""
    return dotted_name.split(".", 1)[0] in _NOT_PROJECT


# top-level packages that are never a project's own modules
_NOT_PROJECT = frozenset({"torch", "torch_xla", "numpy", "os", "sys", "math", "time", "json", "re", "logging",
                          "typing", "collections", "functools", "itertools", "transformers", "lightning",
                          "pytorch_lightning", "accelerate", "ignite", "tqdm", "datasets", "xla_compat"})


__all__ = ["CallSite", "DEVICE_LOADER", "FunctionSummary", "HostRead", "ModuleSummary", "NO_PROJECT", "OTHER_DEVICE",
           "OutgoingCall",
           "Project", "XLA_DEVICE", "XLA_MODULE", "is_test_file", "not_project"]
