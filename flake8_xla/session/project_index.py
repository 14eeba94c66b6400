"""The project around a file, for `check`/`fix`: its imports resolved to the project's own files and
their function summaries (a metric helper in ``utils.py`` that does ``.cpu().numpy()``), computed
once per file per process and remembered by content.

Resolution: a relative import from the importer's package; an absolute one from the importer's
directory and each directory above it up to the project root (the nearest one holding a
``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``, or the working directory when the file
is under it), and their ``src/`` folders. Nothing outside the project (installed packages) is read.
"""
from __future__ import annotations

import os
import re
import time
from typing import Dict, List, Optional, Set, Tuple

from ..analysis.project import OTHER_DEVICE, CallSite, ModuleSummary, OutgoingCall, Project, is_test_file, not_project
from .cache import file_digest
from ..prefilter import TOO_DEEP, might_match
from ..fixing.lines import split_lines
from ..lifecycle.table import api_table
from ..rule import FileContext
from ..versions import Target
from .sources import DEFAULT_MAX_FILE_SIZE, decode_source, read_file_bytes

_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# a language server lives long: what was not found (or a project's scan) is looked at again after this
_RECHECK_SECONDS = 30.0
# a module more files than this import and call is a library of the project (``utils``, torch_xla's own
# xla_model): what one caller passes says little, and reading every caller costs more than a lint
_MAX_CALLERS = 12
_MAX_LEVELS = 8  # directories searched above the importer, at most


class ProjectIndex(Project):
    """One process's view of the projects it lints. ``begin()``/``consulted()`` bracket one file's
    lint and tell which project files it read summaries of (the result cache keeps them)."""

    def __init__(self, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> None:
        self.max_file_size = max_file_size
        # path -> (stat stamp, digest, summary)
        self._summaries: Dict[str, Tuple[tuple, str, Optional[ModuleSummary]]] = {}
        self._found: Dict[Tuple[str, str, int], Tuple[float, Optional[str]]] = {}  # -> (when, file)
        self._roots: Dict[str, List[str]] = {}
        self._tops: Dict[Tuple[str, str], Tuple[float, bool]] = {}  # (directory, name) -> (when, a project module)
        self._consulted: Set[str] = set()
        # project root -> (when, [(file that names torch_xla, the names its imports mention, its imports)])
        self._xla_files: Dict[str, Tuple[float, List[Tuple[str, frozenset, tuple]]]] = {}
        self._incoming: Dict[str, Tuple[Dict[str, List[CallSite]], Set[str]]] = {}  # path -> (sites, callers)
        self._importers: Dict[int, tuple] = {}  # id(an _xla_files list) -> (that list, its index by module name)
        # path -> (stamp, digest, calls)
        self._calls: Dict[str, Tuple[tuple, str, Optional[Tuple[OutgoingCall, ...]]]] = {}

    def begin(self, hooks_only: bool = False, entry_functions: Optional[frozenset] = None) -> None:
        self._consulted = set()
        self.hooks_only = hooks_only
        self.entry_functions = entry_functions

    def consulted(self) -> Dict[str, str]:
        """Path -> content digest of the files read since :meth:`begin`."""
        out = {}
        for path in sorted(self._consulted):
            known = self._summaries.get(path) or self._calls.get(path)
            if known is not None:
                out[path] = known[1]
        return out

    def module(self, importer: str, name: str, level: int = 0) -> Optional[ModuleSummary]:
        path = self.find(os.path.abspath(importer), name, level)
        if path is None:
            return None
        return self._summary(path)  # edited since: summarized again (a long-lived language server)

    def has_top_level(self, importer: str, name: str) -> bool:
        key = (os.path.dirname(importer), name)
        when, known = self._tops.get(key, (0.0, False))
        now = time.monotonic()
        if key not in self._tops or not known and now - when > _RECHECK_SECONDS:  # a module made since
            known = any(os.path.isfile(os.path.join(root, name + ".py")) or os.path.isdir(os.path.join(root, name))
                        for root in self._search_roots(key[0]))
            self._tops[key] = (now, known)
        return known

    def find(self, importer: str, name: str, level: int) -> Optional[str]:
        """The file of module ``name`` as ``importer`` imports it, or None."""
        key = (os.path.dirname(importer), name, level)
        when, found = self._found.get(key, (0.0, None))
        now = time.monotonic()
        # a module that is not there, or a file that went away, is looked for again after a while
        if key not in self._found or (found is None or not os.path.isfile(found)) and now - when > _RECHECK_SECONDS:
            found = self._find(importer, name, level)
            self._found[key] = (now, found)
        return None if found == importer else found

    def _find(self, importer: str, name: str, level: int) -> Optional[str]:
        parts = [p for p in name.split(".") if p]
        if level:
            base = os.path.dirname(importer)
            for _ in range(level - 1):
                base = os.path.dirname(base)
            return _module_file(base, parts)
        for root in self._search_roots(os.path.dirname(importer)):
            found = _module_file(root, parts)
            if found is not None:
                return found
        return None

    def call_sites(self, path: str, function: str) -> Tuple[CallSite, ...]:
        sites, callers = self._calls_into(os.path.abspath(path))
        self._consulted.update(callers)
        return tuple(sites.get(function, ()))

    def entry_points(self, path: str) -> frozenset:
        """The functions of ``path`` that the project's code on XLA calls with the XLA device, a
        device loader, a device tensor or a module (``Class`` for a constructor)."""
        sites, callers = self._calls_into(os.path.abspath(path))
        self._consulted.update(callers)
        return frozenset(function for function, calls in sites.items()
                         if any(fact != OTHER_DEVICE for call in calls for _, fact in call.arguments))

    def gives_xla_modules(self, path: str, text: str) -> bool:
        """Whether a file that never names torch_xla imports a function of the project's XLA code
        that returns torch_xla modules (``from utils import import_xla`` ... ``xm, pl = import_xla()``)."""
        path = os.path.abspath(path)
        xla_files = None
        for match in _FROM_IMPORT.finditer(text):
            dots, module, names = match.groups()
            found = self.find(path, module, len(dots))
            if found is None:
                continue
            if xla_files is None:
                xla_files = {entry[0] for entry in self._xla_files_of(path)}
            if found not in xla_files or not _may_return_modules(found):
                continue
            summary = self._summary(found)
            functions = summary.functions if summary is not None else {}
            if any(functions.get(n.split()[0]) is not None and functions[n.split()[0]].returns_modules
                   for n in names.split(",") if n.strip()):
                return True
        return False

    def gives_xla_values(self, path: str, text: str) -> bool:
        """Whether a file that never names torch_xla calls a function of the project's XLA code that hands
        it the XLA device, syncs the graph, wraps a model in FSDP or steps an optimizer the XLA way
        (``device = xla_utils.get_device()``, ``xla_utils.mark_step()``): a script written against the
        project's wrapper of torch_xla."""
        path = os.path.abspath(path)
        xla_files = None
        for match in _FROM_IMPORT.finditer(text):
            dots, module, names = match.groups()
            for written in (n.split() for n in names.split(",") if n.strip()):
                name, bound = written[0], written[-1]
                if xla_files is None:
                    xla_files = {entry[0] for entry in self._xla_files_of(path)}
                submodule = self.find(path, f"{module}.{name}" if module else name, len(dots))
                if submodule in xla_files:  # ``from pkg import xla_utils`` ... ``xla_utils.get_device()``
                    called = set(re.findall(r"\b%s\.(\w+)\s*\(" % re.escape(bound), text))
                    summary = self._summary(submodule) if called else None
                    if summary is not None and any(_speaks_xla(summary.functions.get(f)) for f in called):
                        return True
                    continue
                found = self.find(path, module, len(dots)) if module else None
                if found in xla_files and re.search(r"\b%s\s*\(" % re.escape(bound), text):
                    summary = self._summary(found)  # ``from xla_utils import get_device``
                    if summary is not None and _speaks_xla(summary.functions.get(name)):
                        return True
        return False

    def _calls_into(self, path: str) -> Tuple[Dict[str, List[CallSite]], Set[str]]:
        known = self._incoming.get(path)
        if known is not None:
            return known
        sites: Dict[str, List[CallSite]] = {}
        callers: Set[str] = set()
        defined = _defined_names(path)
        # it imports the module, or one of the module's functions or classes, by name, and calls one
        # a test passes what it tests with, not what a run passes: tests count only for a test helper
        tests_count = is_test_file(path)
        candidates = [caller for caller in self._importers_of(path).get(path, ()) if defined
                      if caller != path and (tests_count or not is_test_file(caller)) and
                      not defined.isdisjoint(_called_words(caller))]
        if len(candidates) > _MAX_CALLERS:
            candidates = []  # a library of the project that every file uses: its callers pass anything
        for caller in candidates:
            for call in self._outgoing(caller):
                function = self._resolves_to(caller, call.level, call.name, path)
                if function is not None:
                    sites.setdefault(function, []).append(CallSite(caller, call.line, call.arguments, call.per_step))
                    callers.add(caller)
        self._incoming[path] = sites, callers
        return sites, callers

    def _resolves_to(self, importer: str, level: int, name: str, path: str) -> Optional[str]:
        """The function of ``path`` a dotted name imported by ``importer`` runs, if it is one there."""
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0 if level == 0 else -1, -1):
            if self.find(importer, ".".join(parts[:cut]), level) == path:
                return ".".join(parts[cut:])
        return None

    def _importers_of(self, path: str) -> Dict[str, List[str]]:
        """For the project of ``path``: file -> the XLA files whose import statements resolve to it
        (``import a.b``, ``from a import b``, ``from a.b import f``), each import resolved once."""
        files = self._xla_files_of(path)
        known = self._importers.get(id(files))
        if known is None or known[0] is not files:
            index: Dict[str, List[str]] = {}
            for caller, _, imports in files:
                targets = set()
                for level, module, names in imports:
                    if level == 0 and (not module or not_project(module) or
                                       not self.has_top_level(caller, module.split(".", 1)[0])):
                        continue
                    targets.add(self.find(caller, module, level) if module else None)
                    for name in names:
                        targets.add(self.find(caller, f"{module}.{name}" if module else name, level))
                for target in targets - {None, caller}:
                    index.setdefault(target, []).append(caller)
            known = self._importers[id(files)] = (files, index)
        return known[1]

    def _xla_files_of(self, path: str) -> List[Tuple[str, frozenset, tuple]]:
        root = self._root(path)
        when, known = self._xla_files.get(root, (0.0, None))
        now = time.monotonic()
        if known is None or now - when > _RECHECK_SECONDS:
            known = _xla_files(root)
            self._xla_files[root] = (now, known)
        return known

    def _summary(self, path: str) -> Optional[ModuleSummary]:
        self._consulted.add(path)
        stamp = _stamp(path)
        known = self._summaries.get(path)
        if known is None or known[0] != stamp:
            known = self._summaries[path] = (stamp, file_digest(path), self._summarize(path))
        return known[2]

    def _outgoing(self, path: str) -> Tuple[OutgoingCall, ...]:
        """The calls of ``path`` into the project's modules, with what they pass that is on XLA."""
        self._consulted.add(path)
        stamp = _stamp(path)
        known = self._calls.get(path)
        if known is None or known[0] != stamp:
            known = self._calls[path] = (stamp, file_digest(path), self._analyse(path, self._outgoing_calls))
        return known[2] or ()

    def _outgoing_calls(self, ctx) -> Tuple[OutgoingCall, ...]:
        from ..analysis.summaries import outgoing_calls

        importer = ctx.filename
        return outgoing_calls(ctx, lambda level, name: any(
            self.find(importer, ".".join(name.split(".")[:cut]), level) is not None
            for cut in range(name.count("."), 0 if level == 0 else -1, -1)))

    def _root(self, path: str) -> str:
        roots = self._search_roots(os.path.dirname(os.path.abspath(path)))
        return next((r for r in reversed(roots) if os.path.basename(r) != "src"), roots[-1])

    def trains_on_xla(self, path: str) -> bool:
        """Whether the project of ``path`` has a Python file that passes the pre-filter (imports
        torch_xla, ``Trainer(accelerator="tpu")``): then a LightningModule or a Trainer subclass of it
        that never names torch_xla runs on XLA too. At most ``_SCAN_LIMIT`` files are read."""
        return bool(self._xla_files_of(path))

    def _search_roots(self, directory: str) -> List[str]:
        roots = self._roots.get(directory)
        if roots is None:
            roots, here, cwd = [], directory, os.getcwd()
            stop_at_cwd = here == cwd or here.startswith(cwd + os.sep)
            for _ in range(_MAX_LEVELS):
                roots.append(here)
                if os.path.isdir(os.path.join(here, "src")):
                    roots.append(os.path.join(here, "src"))
                if (stop_at_cwd and here == cwd) or any(os.path.exists(os.path.join(here, m)) for m in _ROOT_MARKERS):
                    break
                parent = os.path.dirname(here)
                if parent == here:
                    break
                here = parent
            self._roots[directory] = roots
        return roots

    def _summarize(self, path: str) -> Optional[ModuleSummary]:
        # the analysis loads when a summary is first needed: a run over files that cannot concern
        # torch_xla imports no rule machinery (tests/test_startup.py)
        from ..analysis.summaries import summarize

        return self._analyse(path, summarize)

    def _analyse(self, path: str, what):
        """``what(ctx)`` of the file alone (no project: one module's facts never wait on another's)."""
        import ast  # a run over cached files summarises none

        try:
            text = decode_source(read_file_bytes(path, self.max_file_size), False).text
            tree = ast.parse(text, path)
        except (OSError, ValueError, SyntaxError, *TOO_DEEP):
            return None  # unreadable or broken: its callers are linted as if it were not there
        table = api_table()
        ctx = FileContext(split_lines(text), tree, path, Target(table.latest, "project summary"), table)
        try:
            return what(ctx)
        except TOO_DEEP:
            return None
        finally:
            ctx.forget_facts()  # freed now, not by the garbage collector (see FileContext.forget_facts)


_SCAN_LIMIT = 5000
_SKIPPED_DIRS = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "build",
                           "dist", "site-packages", ".flake8_xla_cache"})
# a file that may hold framework hooks: a class deriving from a LightningModule, a Trainer or a fastai
# Callback (analysis.hooks decides; this only spares the parse of every other file)
_FRAMEWORK_HOOKS_TEXT = re.compile(r"(?m)^[ \t]*class \w+\([^)\n]*(LightningModule|Trainer|Callback)\b")


def may_hold_framework_hooks(text: str) -> bool:
    """Cheap words first: most files that fail the pre-filter name none of the base classes."""
    return ("LightningModule" in text or "Trainer" in text or "Callback" in text) and \
        _FRAMEWORK_HOOKS_TEXT.search(text) is not None


# the modules an import statement names: ``import a.b as c``, ``from .a.b import c, d``
_IMPORT_LINE = re.compile(r"(?m)^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(?:\(([^)]*)\)|([\w ,\t]+))"
                          r"|import[ \t]+([\w., \t]+))")


_FROM_IMPORT = re.compile(r"(?m)^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w ,\t]+)")


_TOP_DEF = re.compile(r"(?m)^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)")


_XLA_IMPORT_ALIAS = re.compile(r"(?m)^[ \t]*(?:import[ \t]+torch_xla[\w.]*[ \t]+as[ \t]+(\w+)|"
                               r"from[ \t]+torch_xla[\w.]*[ \t]+import[ \t]+(\w+)(?:[ \t]+as[ \t]+(\w+))?)")


def _read_text(path: str) -> str:
    """A project file's text for the cheap tests below ("" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(DEFAULT_MAX_FILE_SIZE).decode("utf-8", "replace")
    except OSError:
        return ""


def _speaks_xla(function) -> bool:
    """A project function whose call shows the caller runs on XLA: it returns the XLA device or an FSDP
    wrapper, syncs the graph, or all-reduces an optimizer's gradients."""
    return function is not None and bool(function.returns_xla_device or function.syncs or function.returns_fsdp or
                                         function.reduces)


def _may_return_modules(path: str) -> bool:
    """A cheap test before a module is summarised: some ``return`` names what a torch_xla import bound."""
    text = _read_text(path)
    aliases = {m[2] or m[1] or m[0] for m in _XLA_IMPORT_ALIAS.findall(text)} - {""}
    return bool(aliases) and re.search(r"(?m)^[ \t]*return\b[^\n]*\b(?:%s)\b" % "|".join(map(re.escape, aliases)),
                                       text) is not None


# a word called in a file: ``name(`` / ``obj.name (`` (the whole word: what \bname\s*\( finds)
_CALLED_WORD = re.compile(r"\b(\w+)\s*\(")


def _called_words(path: str) -> frozenset:
    """Every word a file calls, to ask whether it calls any of a module's names: one scan per file
    instead of a pattern of all the names compiled per module (~0.7 ms each)."""
    return frozenset(_CALLED_WORD.findall(_read_text(path)))


def _defined_names(path: str) -> frozenset:
    """The names of a module's top-level functions and classes (what another module imports to call)."""
    return frozenset(_TOP_DEF.findall(_read_text(path)))


def _xla_files(root: str) -> List[Tuple[str, frozenset, tuple]]:
    """The files under ``root`` that pass the pre-filter, each with every name its imports mention and
    its imports as (level, module, names imported from it; none for ``import a.b``)."""
    out, seen = [], 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith(".egg-info")]
        for name in files:
            if not name.endswith(".py"):
                continue
            seen += 1
            if seen > _SCAN_LIMIT:
                return out
            path = os.path.join(folder, name)
            text = _read_text(path)
            if might_match(text):
                names, imports = set(), []
                for module, listed, plain, modules in _IMPORT_LINE.findall(text):
                    if module:
                        pieces = [w.split() for w in (listed or plain).split(",")]
                        imported = tuple(w[0] for w in pieces if w and w[0][0] != "#")
                        dotted = module.lstrip(".")
                        imports.append((len(module) - len(dotted), dotted, imported))
                        names.update(dotted.split("."))
                        names.update(imported)
                    else:
                        for piece in modules.split(","):
                            if piece.split():
                                dotted = piece.split()[0]
                                imports.append((0, dotted, ()))
                                names.update(dotted.split("."))
                names.discard("")
                out.append((path, frozenset(names), tuple(imports)))
    return out


def _stamp(path: str) -> tuple:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return st.st_mtime_ns, st.st_size, st.st_ino


def _module_file(base: str, parts: List[str]) -> Optional[str]:
    stem = os.path.join(base, *parts) if parts else base
    for candidate in (stem + ".py", os.path.join(stem, "__init__.py")) if parts else \
            (os.path.join(stem, "__init__.py"),):
        if os.path.isfile(candidate):
            return candidate
    return None


_INDEX: Optional[ProjectIndex] = None


def project_index() -> ProjectIndex:
    """This process's index (a worker builds its own after the fork)."""
    global _INDEX
    if _INDEX is None:
        _INDEX = ProjectIndex()
    return _INDEX


def reset_project_index() -> None:
    """Forget what was read: a new run sees the project as it is now."""
    global _INDEX
    _INDEX = None
