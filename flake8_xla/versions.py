"""torch_xla release numbers and the target-version inference.

The target is the torch_xla release the linted code is judged against. It comes from,
in order: the explicit option, the floor of a ``torch_xla``/``torch-xla`` requirement in the
nearest project file, the installed torch_xla's package metadata (torch is never imported),
and finally the newest release the rule data knows.
"""
from __future__ import annotations

import configparser
import functools
import os
import re
import sys
from typing import Callable, Iterable, NamedTuple, Optional


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.\d+)?(?:[.+-]?\w*)*\s*$")


def parse_version(text: str) -> Version:
    """Parse ``"2.8"``, ``"2.8.1"`` or ``"2.9.0+cpu"`` into ``Version(2, 8)``."""
    match = _VERSION_RE.match(str(text))
    if not match:
        raise ValueError(f"not a torch_xla version: {text!r} (expected MAJOR.MINOR, e.g. 2.8)")
    return Version(int(match.group(1)), int(match.group(2)))


class Target(NamedTuple):
    version: Version
    source: str  # where the version came from, for --verbose style reporting


# A requirement names torch_xla (any spelling, extras allowed) followed by its specifiers.
_REQ_NAME_RE = re.compile(r"^\s*torch[-_.]xla\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#]*)", re.IGNORECASE)
_FLOOR_RE = re.compile(r"(?P<op>>=|==|~=|===|>|\^|~)\s*v?(?P<ver>\d+\.\d+(?:\.\d+)?)")


def requirement_floor(requirement: str) -> Optional[Version]:
    """The lowest torch_xla release a requirement string admits, or None if it is unbounded."""
    match = _REQ_NAME_RE.match(requirement)
    if not match:
        return None
    return _spec_floor(match.group("spec"))


def _spec_floor(spec: str) -> Optional[Version]:
    floors = [parse_version(m.group("ver")) for m in _FLOOR_RE.finditer(spec)]
    bare = re.fullmatch(r"\s*v?(\d+\.\d+(?:\.\d+)?)\s*", spec)  # poetry: "2.5" means ==2.5
    if bare:
        floors.append(parse_version(bare.group(1)))
    return max(floors) if floors else None


Warn = Callable[[str], None]


def _warn_stderr(message: str) -> None:
    sys.stderr.write(f"flake8-xla: warning: {message}\n")


def _floor_from_requirements(lines: Iterable[str]) -> Optional[Version]:
    floors = [f for f in (requirement_floor(line) for line in lines) if f is not None]
    return min(floors) if floors else None


def _from_pyproject(path: str) -> Optional[Version]:
    try:
        import tomllib  # type: ignore[import-not-found]
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    with open(path, "rb") as f:
        data = tomllib.load(f)
    project = data.get("project", {})
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        reqs.extend(extra)
    for group in data.get("dependency-groups", {}).values():
        reqs.extend(r for r in group if isinstance(r, str))
    floor = _floor_from_requirements(r for r in reqs if isinstance(r, str))
    if floor is not None:
        return floor
    poetry = data.get("tool", {}).get("poetry", {})
    tables = [poetry.get("dependencies", {})]
    tables += [g.get("dependencies", {}) for g in poetry.get("group", {}).values()]
    for table in tables:
        for name, spec in table.items():
            if re.fullmatch(r"torch[-_.]xla", name, re.IGNORECASE):
                if isinstance(spec, dict):
                    spec = spec.get("version", "")
                if isinstance(spec, str):
                    return _spec_floor(spec)
    return None


def _from_setup_cfg(path: str) -> Optional[Version]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    lines: list = []
    if parser.has_option("options", "install_requires"):
        lines += parser.get("options", "install_requires").splitlines()
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            lines += value.splitlines()
    return _floor_from_requirements(lines)


def _from_requirements_txt(path: str) -> Optional[Version]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return _floor_from_requirements(f)


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
            floor = reader(path)
        except Exception as exc:  # a broken project file must never stop linting
            _warn_once(f"could not read {path} ({type(exc).__name__}: {exc}); ignoring it")
            continue
        if floor is not None:
            return Target(floor, f"torch_xla requirement in {path}")
    return None


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    _warn_stderr(message)


@functools.lru_cache(maxsize=None)
def installed_version() -> Optional[Version]:
    """The installed torch_xla's version from its metadata; torch_xla itself is not imported."""
    from importlib import metadata

    for dist in ("torch_xla", "torch-xla"):
        try:
            return parse_version(metadata.version(dist))
        except Exception:
            continue
    return None


_ROOT_MARKERS = (".git", "pyproject.toml", "setup.cfg", ".hg")


@functools.lru_cache(maxsize=None)
def _project_floor(directory: str) -> Optional[Target]:
    """Walk up from ``directory`` to the project root (first dir with a root marker)."""
    found = _floor_in_directory(directory)
    if found is not None:
        return found
    parent = os.path.dirname(directory)
    if parent == directory or any(os.path.exists(os.path.join(directory, m)) for m in _ROOT_MARKERS):
        return None
    return _project_floor(parent)


def infer_target(filename: str, explicit: Optional[str], latest: Version) -> Target:
    """Resolve the target version for one file (``filename`` may be ``stdin`` or ``-``)."""
    if explicit:
        return Target(parse_version(explicit), "--xla-target-version")
    # an editor's unsaved new file still belongs to the project of the directory it is in
    directory = os.path.dirname(os.path.abspath(filename)) if filename not in ("stdin", "-", "") else ""
    if not os.path.isdir(directory):
        directory = os.getcwd()
    found = _project_floor(directory)
    if found is not None:
        return found
    installed = installed_version()
    if installed is not None:
        return Target(installed, "installed torch_xla")
    return Target(latest, "newest release known to flake8-xla")


def forget_project_files() -> None:
    """Drop what was read from project files, for processes that lint many times (an editor's
    flake8 server runs flake8 in-process on every save; a changed requirement must count)."""
    for cached in (_floor_in_directory, _project_floor, _warn_once, installed_version):
        cached.cache_clear()
