"""torch_xla release numbers and the target-version inference.

The target is the torch_xla release the linted code is judged against. It comes from,
in order: the explicit option, the floor of a ``torch_xla``/``torch-xla`` requirement in the
nearest project file, the installed torch_xla's package metadata (torch is never imported),
and finally the newest release the rule data knows. The resolved :class:`Target` says which,
down to the file and line (``origin``), for ``-v`` and ``--show-settings``.
"""
from __future__ import annotations

import functools
import os
import re
import sys
from typing import Callable, Iterable, NamedTuple, Optional, Sequence, Tuple

from . import tomlcache


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


class _LazyPattern:
    """A regular expression compiled on first use: compiling them all is ~4 ms of every start, and a
    run served from the cache uses few of them."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: Optional["re.Pattern[str]"] = None

    def __getattr__(self, name: str):
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


_RELEASE_RE = _LazyPattern(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?")
# a whole version text: the release, then local or pre-release parts (``+cpu``, ``rc1``, ``.dev2023``)
_VERSION_RE = _LazyPattern(r"^\s*v?\d+\.\d+[\w.+-]*\s*$")


def release_numbers(text: str) -> Optional[Tuple[int, int, int]]:
    """The (major, minor, patch) a text starts with: ``"2.8"`` -> (2, 8, 0), ``"v2.8.1+cpu"`` -> (2, 8, 1),
    ``"2.8 or later"`` -> (2, 8, 0); None when it does not start with MAJOR.MINOR."""
    match = _RELEASE_RE.match(text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def parse_version(text: str) -> Version:
    """Parse ``"2.8"``, ``"2.8.1"`` or ``"2.9.0+cpu"`` into ``Version(2, 8)``."""
    numbers = release_numbers(str(text))
    if numbers is None or not _VERSION_RE.match(str(text)):
        raise ValueError(f"not a torch_xla version: {text!r} (expected MAJOR.MINOR, e.g. 2.8)")
    return Version(numbers[0], numbers[1])


# where code can be moving to (``--migrate-to``): the XLA5xx rules speak for "torchtpu"
MIGRATIONS = ("torchtpu",)


def check_migration(value: object, where: str) -> str:
    """A ``migrate-to`` value a user gave, checked (ValueError, one line)."""
    if value not in MIGRATIONS:
        raise ValueError(f"{where} must be one of {', '.join(MIGRATIONS)}, not {value!r}")
    return str(value)


class Target(NamedTuple):
    version: Version
    source: str  # what kind of place the version came from, in short ("installed torch_xla", ...)
    # exactly where: "--xla-target-version 2.8", "<config> [tool.flake8-xla] target-version = 2.8",
    # "<file>:<line>: torch_xla>=2.6", "the installed torch_xla 2.9", "the newest release flake8-xla knows";
    # empty for targets built by hand (tests, rule examples)
    origin: str = ""
    # what the code is moving to ("torchtpu": the XLA5xx rules speak), or None
    migrate_to: Optional[str] = None


def check_target(value: object, where: str, known: Sequence[Version], warn: Optional["Warn"] = None) -> Version:
    """A target version a user gave (option or config value), checked.

    ``where`` names the option or the file, section and key. Raises ValueError (one line) for a
    value that is not text (TOML reads an unquoted ``2.10`` as the float 2.1, so a number is never
    trusted) or not a version; warns through ``warn`` (default: once, on stderr) for a release
    outside ``known``, whose rule data may not describe it.
    """
    if not isinstance(value, str):
        hint = " (TOML reads an unquoted 2.10 as 2.1)" if isinstance(value, float) else ""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        shown = f"the number {value!r}" if number else repr(value)
        raise ValueError(f'{where} must be a quoted string such as "2.10", not {shown}{hint}')
    try:
        version = parse_version(value)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if known and version > max(known):
        (warn or _warn_once)(f"{where}: {past_the_last(version, max(known))}")
    elif known and version not in known:
        (warn or _warn_once)(f"{where}: torch_xla {version} is outside the releases flake8-xla knows "
                             f"({min(known)} to {max(known)}); its rule data may not describe that release")
    return version


def past_the_last(version: Version, last: Version) -> str:
    """What is said of a target newer than the rule data: one wording whether the user gave it or a
    project's pin declared it (both are linted as that version)."""
    return (f"torch_xla {version} is newer than the last release flake8-xla knows ({last}); "
            "its rule data may not describe that release")


# A requirement names torch_xla (any spelling, extras allowed) followed by its specifiers.
_REQ_NAME_RE = _LazyPattern(r"^\s*torch[-_.]xla(?![\w.-])\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#]*)", re.IGNORECASE)
_FLOOR_RE = _LazyPattern(r"(?P<op>>=|==|~=|===|>|\^|~)\s*v?(?P<ver>\d+(?:\.\d+){0,2})")
# one clause of a specifier as pip or poetry write it: >=2.5, ==2.5.*, <3, ^2.5, ~2.5, 2.5, *
_CLAUSE_RE = _LazyPattern(r"(?:(?:===|==|>=|<=|~=|!=|>|<|\^|~)\s*)?v?\d+(?:\.\d+)*(?:\.\*)?"
                        r"(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|post|dev)\d*)*(?:\+[a-z0-9.]+)?|\*",
                        re.IGNORECASE)
# a direct reference to a wheel: torch_xla @ https://.../torch_xla-2.5.0-cp310-...whl
_WHEEL_VERSION_RE = _LazyPattern(r"torch[-_]xla-(\d+\.\d+(?:\.\d+)?)[^/]*\.whl$", re.IGNORECASE)


def requirement_floor(requirement: str) -> Optional[Version]:
    """The lowest torch_xla release a requirement string admits, or None if it is unbounded."""
    return read_requirement(requirement)[0]


def read_requirement(requirement: str) -> Tuple[Optional[Version], Optional[str]]:
    """A torch_xla requirement's floor, and why it could not be read when it names torch_xla with
    a version nobody can read (``torch_xla==2.x``, a URL that is no wheel): such a pin is reported,
    not taken for "any release"."""
    match = _REQ_NAME_RE.match(requirement)
    if not match:
        return None, None
    # what follows the specifier on a requirements line: `-f URL`, `--hash=...`, a continuation
    spec = re.split(r"\s+-|\s*\\\s*$", match.group("spec"))[0].strip()
    if spec.startswith("(") and spec.endswith(")"):  # the old `torch_xla (>=2.5)` form
        spec = spec[1:-1].strip()
    if spec.startswith("@"):  # a direct reference: only a wheel's file name says its version
        wheel = _WHEEL_VERSION_RE.search(spec.split("#", 1)[0].strip())
        if wheel:
            return parse_version(wheel.group(1)), None
        return None, "its version cannot be read from the URL (only a wheel's file name says it)"
    clauses = [c.strip() for c in spec.split(",")]
    if spec and not all(_CLAUSE_RE.fullmatch(c) for c in clauses):
        return None, "it is not a version specifier (e.g. torch_xla>=2.6 or torch_xla==2.8.*)"
    return _spec_floor(spec), None


def _spec_floor(spec: str) -> Optional[Version]:
    floors = [_floor_version(m.group("ver")) for m in _FLOOR_RE.finditer(spec)]
    bare = re.fullmatch(r"\s*v?(\d+(?:\.\d+){0,2})\s*", spec)  # poetry: "2.5" means ==2.5
    if bare:
        floors.append(_floor_version(bare.group(1)))
    return max(floors) if floors else None


def _floor_version(text: str) -> Version:
    return parse_version(text if "." in text else f"{text}.0")  # >=3 admits 3.0


Warn = Callable[[str], None]


def _warn_stderr(message: str) -> None:
    sys.stderr.write(f"flake8-xla: warning: {message}\n")


# A floor, the requirement as shown to the user, and the text that finds its line (Target.origin)
Floor = Tuple[Version, str, str]


def _floor_from_requirements(lines: Iterable[str], path: str) -> Optional[Floor]:
    found = []
    for line in lines:
        if isinstance(line, str):
            floor, problem = read_requirement(line)
            text = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if problem is not None:
                number = _line_of(path, text)
                where = _shown(path) if number is None else f"{_shown(path)}:{number}"
                _warn_once(f"{where}: {text}: not used as the target: {problem}")
            elif floor is not None:
                found.append((floor, text, text))
    return min(found, key=lambda item: item[0]) if found else None


def _table(value) -> dict:
    # a project file of the wrong shape (``project = 5``) declares nothing, it does not crash
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _from_pyproject(path: str) -> Optional[Floor]:
    data = tomlcache.load(path)  # tomllib.load, without importing tomllib on every run
    project = _table(data.get("project"))
    reqs = list(_list(project.get("dependencies")))
    for extra in _table(project.get("optional-dependencies")).values():
        reqs.extend(_list(extra))
    for group in _table(data.get("dependency-groups")).values():
        reqs.extend(_list(group))
    floor = _floor_from_requirements(reqs, path)
    if floor is not None:
        return floor
    poetry = _table(_table(data.get("tool")).get("poetry"))
    tables = [_table(poetry.get("dependencies"))]
    tables += [_table(_table(g).get("dependencies")) for g in _table(poetry.get("group")).values()]
    for table in tables:
        for name, spec in table.items():
            if re.fullmatch(r"torch[-_.]xla", name, re.IGNORECASE):
                if isinstance(spec, dict):
                    spec = spec.get("version", "")
                if isinstance(spec, str):
                    floor = _spec_floor(spec)
                    return None if floor is None else (floor, f"{name} {spec}", name)
    return None


def _from_setup_cfg(path: str) -> Optional[Floor]:
    import configparser  # only projects with a setup.cfg pay for it

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    lines: list = []
    if parser.has_option("options", "install_requires"):
        lines += parser.get("options", "install_requires").splitlines()
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            lines += value.splitlines()
    return _floor_from_requirements(lines, path)


def _from_requirements_txt(path: str) -> Optional[Floor]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return _floor_from_requirements(f, path)


def _shown(path: str) -> str:
    """A project file as the user sees it: relative to the working directory when inside it (as the
    CLI shows the linted files)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # Windows: another drive
        return path
    return path if relative.startswith("..") else relative


def _line_of(path: str, requirement: str) -> Optional[int]:
    """The first line of ``path`` that holds ``requirement`` (1-based), to point the user at it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if requirement in line:
                    return number
    except OSError:
        pass
    return None


def _project_files(directory: str) -> list:
    files = [("pyproject.toml", _from_pyproject), ("setup.cfg", _from_setup_cfg)]
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
    files += [(n, _from_requirements_txt) for n in names if re.fullmatch(r"requirements.*\.txt", n)]
    return [(os.path.join(directory, n), reader) for n, reader in files]


@functools.lru_cache(maxsize=None)
def _floor_in_directory(directory: str) -> Optional[Target]:
    """The torch_xla floor declared by the project files of ``directory`` (memoised per process)."""
    for path, reader in _project_files(directory):
        if not os.path.isfile(path):
            continue
        try:
            found = reader(path)
        except Exception as exc:  # a broken project file must never stop linting
            _warn_once(f"could not read {_shown(path)} ({type(exc).__name__}: {exc}); ignoring it")
            continue
        if found is not None:
            floor, shown, needle = found
            line = _line_of(path, needle)
            where = _shown(path) if line is None else f"{_shown(path)}:{line}"
            return Target(floor, f"torch_xla requirement in {_shown(path)}", f"{where}: {shown}")
    return None


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    _warn_stderr(message)


@functools.lru_cache(maxsize=None)
def installed_version() -> Optional[Version]:
    """The installed torch_xla's version, from the metadata of the first ``torch_xla-*.dist-info``
    (or ``.egg-info``) on ``sys.path``, as ``importlib.metadata`` would find it but without its
    12 ms import; torch_xla itself is not imported."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue  # missing directories, zip files
        for name in names:
            if _TORCH_XLA_METADATA.match(name):
                found = _metadata_version(os.path.join(entry or ".", name))
                if found is not None:
                    return found
    return None


_TORCH_XLA_METADATA = _LazyPattern(r"(?i)torch[-_]xla(?:-[^-]+)?\.(?:dist|egg)-info$")


def _metadata_version(directory: str) -> Optional[Version]:
    for metadata in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(directory, metadata), encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.startswith("Version:"):
                        return parse_version(line.split(":", 1)[1].strip())
                    if not line.strip():
                        break  # the headers end at the first blank line
        except (OSError, ValueError):
            continue
    return None


_ROOT_MARKERS = (".git", "pyproject.toml", "setup.cfg", ".hg")


@functools.lru_cache(maxsize=None)
def _search_root(directory: str) -> Optional[str]:
    """Where the upward search for the target stops: the first directory, from ``directory`` up,
    that declares a torch_xla floor or holds a root marker; None when none does."""
    if _floor_in_directory(directory) is not None or \
            any(os.path.exists(os.path.join(directory, m)) for m in _ROOT_MARKERS):
        return directory
    parent = os.path.dirname(directory)
    return None if parent == directory else _search_root(parent)


def _project_floor(directory: str) -> Optional[Target]:
    root = _search_root(directory)
    return None if root is None else _floor_in_directory(root)


def project_root(filename: str) -> str:
    """The directory whose project files decide ``filename``'s target, where :func:`infer_target`'s
    search stops; the working directory when none does (the target then comes from elsewhere)."""
    return _search_root(_start_directory(filename)) or os.getcwd()


def _start_directory(filename: str) -> str:
    # an editor's unsaved new file still belongs to the project of the directory it is in
    directory = os.path.dirname(os.path.abspath(filename)) if filename not in ("stdin", "-", "") else ""
    return directory if os.path.isdir(directory) else os.getcwd()


EXPLICIT = "--xla-target-version"


def infer_target(filename: str, explicit: Optional[str], latest: Version, origin: Optional[str] = None) -> Target:
    """Resolve the target version for one file (``filename`` may be ``stdin`` or ``-``).

    ``origin`` names where ``explicit`` was set when that is not the command line, e.g. the
    config file, section and key (``Settings.target_origin``).
    """
    if explicit:
        where = origin or EXPLICIT
        separator = " " if where == EXPLICIT else " = "
        return Target(parse_version(explicit), where, f"{where}{separator}{explicit}")
    found = _project_floor(_start_directory(filename))
    if found is not None:
        if found.version > latest:
            # linted as that version, as --xla-target-version 2.12 is: release guards (`>= "2.10"`) read it
            _warn_once(f"{found.origin}: {past_the_last(found.version, latest)}")
        return found
    installed = installed_version()
    if installed is not None:
        return Target(installed, "installed torch_xla", f"the installed torch_xla {installed}")
    return Target(latest, "newest release known to flake8-xla", "the newest release flake8-xla knows")


def forget_project_files() -> None:
    """Drop what was read from project files, for processes that lint many times (an editor's
    flake8 server runs flake8 in-process on every save; a changed requirement must count)."""
    for cached in (_floor_in_directory, _search_root, _warn_once, installed_version):
        cached.cache_clear()
