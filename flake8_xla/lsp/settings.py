"""Settings for one open file: the project's configuration, found from the file's directory upwards
as the CLI finds it from its working directory, with the editor's settings layered over it (the
editor's value wins where it gives one; its ``ignore`` adds to the project's)."""
from __future__ import annotations

import os
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..config import CONFIG_FILES, ConfigError, Settings, check_target_version, discover, merge, split_list
from ..session.selection import CodeSelector, build_selector
from ..versions import check_migration
from ..versions import forget_project_files

# the files whose change can change a diagnostic: configuration, and the torch_xla pins the target
# is inferred from (see flake8_xla.versions)
WATCHED_GLOBS = tuple(f"**/{name}" for name in CONFIG_FILES) + ("**/requirements*.txt",)
_REQUIREMENTS = re.compile(r"requirements.*\.txt")
SECTION = "flake8-xla"


def is_project_file(path: str) -> bool:
    name = os.path.basename(path)
    return name in CONFIG_FILES or _REQUIREMENTS.fullmatch(name) is not None


class ClientSettings(NamedTuple):
    """What the editor sets (``initializationOptions`` or ``workspace/didChangeConfiguration``)."""

    target_version: Optional[str] = None
    select: Optional[Tuple[str, ...]] = None
    ignore: Tuple[str, ...] = ()
    assume_torch_xla: Optional[bool] = None
    migrate_to: Optional[str] = None


_SPELLINGS = {"target-version": "target_version", "targetVersion": "target_version",
              "xla-target-version": "target_version", "select": "select", "ignore": "ignore",
              "assume-torch-xla": "assume_torch_xla", "assumeTorchXla": "assume_torch_xla",
              "migrate-to": "migrate_to", "migrateTo": "migrate_to"}


def client_settings(raw: object) -> Tuple[Optional[ClientSettings], List[str]]:
    """The editor's settings, from ``{"flake8-xla": {...}}`` or the section alone; and a message for
    each value that is ignored because it is malformed. None when ``raw`` holds no flake8-xla
    settings at all (``null``, ``{}``, another tool's section): a client that sends such a change
    has not changed ours, so what it sent before stays."""
    if isinstance(raw, dict) and isinstance(raw.get(SECTION), dict):
        raw = raw[SECTION]
    elif not isinstance(raw, dict) or not any(key in _SPELLINGS for key in raw):
        return None, []
    values: Dict[str, object] = {}
    problems: List[str] = []
    for key, value in raw.items():
        field = _SPELLINGS.get(key)
        if field is None or value is None:
            continue
        where = f"editor setting {SECTION}.{key}"
        if field == "target_version":
            try:
                values[field] = check_target_version(value, where)
            except ConfigError as exc:
                problems.append(str(exc))
        elif field == "migrate_to":
            try:
                values[field] = check_migration(value, where)
            except ValueError as exc:
                problems.append(str(exc))
        elif field == "assume_torch_xla":
            if isinstance(value, bool):
                values[field] = value
            else:
                problems.append(f"{where} must be true or false, not {value!r}")
        elif isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            values[field] = split_list(value)
        else:
            problems.append(f"{where} must be a list of codes, not {value!r}")
    return ClientSettings(**values), problems  # type: ignore[arg-type]


class Resolved(NamedTuple):
    settings: Settings
    selector: CodeSelector
    problem: Optional[str]  # a configuration error; the settings are then the defaults


class ProjectSettings:
    """The settings per directory, read once and kept until a project file changes."""

    def __init__(self) -> None:
        self._by_directory: Dict[Tuple[str, ClientSettings], Resolved] = {}
        self.client = ClientSettings()

    def forget(self) -> None:
        self._by_directory.clear()
        forget_project_files()

    def set_client(self, client: ClientSettings) -> None:
        self.client = client
        self._by_directory.clear()

    def for_path(self, path: str) -> Resolved:
        directory = os.path.dirname(os.path.abspath(path))
        key = (directory, self.client)
        found = self._by_directory.get(key)
        if found is None:
            found = self._by_directory[key] = self._resolve(directory)
        return found

    def _resolve(self, directory: str) -> Resolved:
        start = directory if os.path.isdir(directory) else os.getcwd()
        client = self.client
        try:
            settings = merge(discover(start), select=client.select, ignore=client.ignore,
                             target_version=client.target_version, assume_torch_xla=client.assume_torch_xla,
                             migrate_to=client.migrate_to,
                             target_origin=f"editor setting {SECTION}.target-version"
                             if client.target_version else None)
            return Resolved(settings, build_selector(settings), None)
        except ConfigError as exc:
            defaults = Settings(base_dir=start)
            return Resolved(defaults, build_selector(defaults), f"{exc}; using the default settings")


__all__ = ["ClientSettings", "ProjectSettings", "Resolved", "SECTION", "WATCHED_GLOBS", "client_settings",
           "is_project_file"]
