"""Configuration of the standalone CLI.

Searched from the working directory upwards; the first file with a relevant section wins:
``pyproject.toml`` ``[tool.flake8-xla]``, then ``[flake8-xla]`` in setup.cfg / tox.ini / .flake8,
then the plugin's options in their ``[flake8]`` section (so a team that configured the flake8 plugin
gets the same behaviour from the CLI). Command-line options override the file.
"""
from __future__ import annotations

import functools
import os
import re
from typing import Dict, FrozenSet, NamedTuple, Optional, Tuple, Union

from . import tomlcache
from .lifecycle.table import api_table
from .versions import EXPLICIT, Version, check_migration, check_target


class ConfigError(Exception):
    """A broken or invalid configuration: a usage error (exit status 2)."""


PerFileIgnores = Tuple[Tuple[str, Tuple[str, ...]], ...]
# assume-torch-xla: True / False for every file, or glob patterns (matched like per-file-ignores)
AssumeXla = Union[bool, Tuple[str, ...]]


class Settings(NamedTuple):
    select: Optional[Tuple[str, ...]] = None  # None: the default rule set
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    per_file_ignores: PerFileIgnores = ()
    exclude: Optional[Tuple[str, ...]] = None  # None: the default excludes
    extend_exclude: Tuple[str, ...] = ()
    target_version: Optional[str] = None
    target_origin: Optional[str] = None  # where target_version was set: "<file> [<section>] <key>" or the option
    assume_torch_xla: AssumeXla = False  # lint files that never mention torch_xla too (all, or these globs)
    sync_functions: FrozenSet[str] = frozenset()  # the project's own graph syncs, e.g. mylib.sync
    migrate_to: Optional[str] = None  # "torchtpu": report what the code becomes there (XLA5xx) instead
    output_format: str = "text"
    source: Optional[str] = None  # the file these settings came from
    base_dir: str = "."  # per-file-ignores and excludes are relative to it


FORMATS = ("text", "json", "sarif", "github", "concise", "full")
_KEYS = {
    "select", "extend-select", "ignore", "extend-ignore", "per-file-ignores", "exclude", "extend-exclude",
    "target-version", "xla-target-version", "output-format", "assume-torch-xla", "xla-assume-torch-xla",
    "sync-functions", "xla-sync-functions", "migrate-to", "xla-migrate-to",
}
# what a [flake8] section may hold that the CLI takes over (codes are filtered to XLA ones)
_FLAKE8_KEYS = {"xla-target-version", "select", "extend-select", "ignore", "extend-ignore",
                "per-file-ignores", "exclude", "extend-exclude", "xla-assume-torch-xla", "enable-extensions",
                "xla-sync-functions", "xla-migrate-to"}
# the words configparser (and so flake8, for a store_true option) reads as booleans
_BOOLEANS = {"1": True, "yes": True, "true": True, "on": True, "0": False, "no": False, "false": False, "off": False}


def _is_text_list(value) -> bool:
    return isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))


def split_list(value) -> Tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = re.split(r"[,\s]+", str(value))
    return tuple(item.strip() for item in items if item.strip())


def _text_list(values: Dict[str, object], key: str, where: str, names: Dict[str, str]) -> Tuple[str, ...]:
    """A list-valued option: TOML may give a list or a string, anything else is a mistake (a number
    read as one pattern once replaced the default excludes)."""
    value = values.get(key, ())
    if value == ():
        return ()
    if not _is_text_list(value):
        raise ConfigError(f"{where}: {names.get(key, key)} must be a string or a list of strings, not {value!r}")
    return split_list(value)


_PFI_EXAMPLE = '(e.g. "tests/*.py:XLA101")'


def _parse_pfi_text(text: str, where: str) -> PerFileIgnores:
    from flake8.utils import parse_files_to_codes_mapping

    # flake8's own parser keeps the CLI and the plugin reading [flake8] alike; it raises its
    # ExecutionError (not a ValueError) on an entry without codes
    try:
        pairs = parse_files_to_codes_mapping(text)
    except Exception:  # noqa: BLE001 - flake8's exception type is not part of its API
        raise ConfigError(f"{where}: {text.strip()!r} is not GLOB:CODES {_PFI_EXAMPLE}") from None
    # flake8's parser silently drops 'a.py:' and ':XLA1'; an entry that says nothing is a mistake
    if (text.strip() and not pairs) or any(not glob or not codes for glob, codes in pairs):
        raise ConfigError(f"{where}: {text.strip()!r} is not GLOB:CODES {_PFI_EXAMPLE}")
    return tuple((glob, tuple(codes)) for glob, codes in pairs)


def parse_per_file_ignores(value, where: str = "--per-file-ignores") -> PerFileIgnores:
    """``{"tests/*" = ["XLA101"]}`` or ``["tests/*:XLA101"]`` (TOML), or flake8's ``GLOB: CODES``
    text. ``where`` names the option, or the file, section and key, for the ConfigError."""
    if isinstance(value, dict):
        out = []
        for glob, codes in value.items():
            if not _is_text_list(codes):
                raise ConfigError(f"{where}: the codes for {glob!r} must be a string or a list of strings, "
                                  f"not {codes!r}")
            out.append((str(glob), split_list(codes)))
        return tuple(out)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(pair for item in value for pair in _parse_pfi_text(item, where))
    if isinstance(value, str):
        return _parse_pfi_text(value, where)
    raise ConfigError(f"{where} must be a table of GLOB = [CODES], a list or a string, not {value!r}")


@functools.lru_cache(maxsize=None)
def known_releases() -> Tuple[Version, ...]:
    """The torch_xla releases the API table speaks of: from the oldest it names to its latest."""
    table = api_table()
    named = {v for row in table.rows for v in (row.deprecated_in, row.removed_in, row.replacement_since) if v}
    oldest = min(named | {table.latest})
    if oldest.major != table.latest.major:
        return tuple(sorted(named | {table.latest}))
    return tuple(Version(oldest.major, minor) for minor in range(oldest.minor, table.latest.minor + 1))


def check_target_version(value, where: str) -> str:
    """A target version from an option or a config file: text and a version (else ConfigError), and
    a warning on stderr when the API table does not know the release. Returns it as given."""
    try:
        check_target(value, where, known_releases())
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return str(value)


def _parse_assume_xla(value, where: str, key: str, booleans_only: bool) -> AssumeXla:
    """``true`` / ``false``, or (except in [flake8], where flake8 itself reads a boolean) glob patterns:
    a TOML list, or comma / whitespace separated text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
        return _BOOLEANS[value.strip().lower()]
    if booleans_only:
        raise ConfigError(f"{where}: {key} must be true or false, not {value!r} (flake8 reads it as a boolean; "
                          "glob patterns go in [flake8-xla] or [tool.flake8-xla])")
    if isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
        return split_list(value) or False
    raise ConfigError(f"{where}: {key} must be true, false or a list of glob patterns, not {value!r}")


def _normalize(raw: Dict[str, object], where: str, known: set) -> Tuple[Dict[str, object], Dict[str, str]]:
    """The values by normalised key, and each key as the file spells it (for messages)."""
    out: Dict[str, object] = {}
    names: Dict[str, str] = {}
    for key, value in raw.items():
        norm = key.replace("_", "-").lower()
        if norm not in known:
            if known is _KEYS:
                raise ConfigError(f"{where}: unknown option {key!r} (known: {', '.join(sorted(_KEYS))})")
            continue
        out[norm] = value
        names[norm] = key
    return out, names


def settings_from_mapping(raw: Dict[str, object], where: str, base_dir: str, xla_codes_only: bool = False,
                          known: Optional[set] = None) -> Settings:
    values, names = _normalize(raw, where, known or _KEYS)

    def codes(key: str) -> Tuple[str, ...]:
        items = _text_list(values, key, where, names)
        return tuple(c for c in items if c.upper().startswith("X")) if xla_codes_only else items

    kwargs: Dict[str, object] = {"source": where, "base_dir": base_dir}
    if "select" in values and codes("select"):
        kwargs["select"] = codes("select")
    # flake8 turns the opt-in XLA9 rules on with enable-extensions; the CLI selects them instead
    kwargs["extend_select"] = codes("extend-select") + codes("enable-extensions")
    kwargs["ignore"] = codes("ignore") + codes("extend-ignore")
    if "per-file-ignores" in values:
        pfi = parse_per_file_ignores(values["per-file-ignores"], f"{where}: {names['per-file-ignores']}")
        if xla_codes_only:
            pfi = tuple((g, tuple(c for c in cs if c.upper().startswith("X"))) for g, cs in pfi)
            pfi = tuple((g, cs) for g, cs in pfi if cs)
        kwargs["per_file_ignores"] = pfi
    if "exclude" in values:
        kwargs["exclude"] = _text_list(values, "exclude", where, names)
    kwargs["extend_exclude"] = _text_list(values, "extend-exclude", where, names)
    for key in ("xla-target-version", "target-version"):
        target = values.get(key)
        if target is not None and target != "":
            written = names.get(key, key)
            kwargs["target_version"] = check_target_version(target, f"{where}: {written}")
            kwargs["target_origin"] = f"{where} {written}"
            break
    for key in ("assume-torch-xla", "xla-assume-torch-xla"):
        if key in values:
            # in [flake8] (xla_codes_only) the value is flake8's boolean option: no glob patterns there
            kwargs["assume_torch_xla"] = _parse_assume_xla(values[key], where, key, booleans_only=xla_codes_only)
    for key in ("sync-functions", "xla-sync-functions"):
        if key in values:
            kwargs["sync_functions"] = parse_sync_functions(values[key], f"{where}: {names[key]}")
    for key in ("migrate-to", "xla-migrate-to"):
        if values.get(key) not in (None, ""):
            try:
                kwargs["migrate_to"] = check_migration(values[key], f"{where}: {names[key]}")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    fmt = values.get("output-format")
    if fmt is not None:
        if not isinstance(fmt, str) or fmt not in FORMATS:
            raise ConfigError(f"{where}: output-format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        kwargs["output_format"] = str(fmt)
    return Settings(**kwargs)  # type: ignore[arg-type]


def parse_sync_functions(value, where: str) -> FrozenSet[str]:
    """Qualified names of the project's functions that sync the graph (``mylib.sync``): a TOML list
    or a comma/space separated string. A name that is not a dotted identifier is a ConfigError."""
    if not _is_text_list(value):
        raise ConfigError(f"{where} must be a string or a list of strings, not {value!r}")
    names = split_list(value)
    for name in names:
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", name):
            raise ConfigError(f"{where}: {name!r} is not a qualified function name (e.g. mylib.sync)")
    return frozenset(names)


def _read_toml(path: str) -> Optional[Dict[str, object]]:
    try:
        data = tomlcache.load(path)  # tomllib.load, without importing tomllib on every run
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the TOML: {exc}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: tool must be a table ([tool]), not {tool!r}")
    section = tool.get("flake8-xla")
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.flake8-xla] must be a table")
    return section


def _read_ini(path: str) -> Tuple[Optional[Dict[str, str]], Optional[Dict[str, str]]]:
    import configparser  # only ini-style config files need it

    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot parse: {str(exc).splitlines()[0]}") from None
    own = dict(parser.items("flake8-xla")) if parser.has_section("flake8-xla") else None
    flake8 = dict(parser.items("flake8")) if parser.has_section("flake8") else None
    return own, flake8


def load_file(path: str) -> Optional[Settings]:
    """Settings from one config file, or None when it has no relevant section."""
    base = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == "pyproject.toml":
        section = _read_toml(path)
        return None if section is None else settings_from_mapping(section, f"{path} [tool.flake8-xla]", base)
    own, flake8 = _read_ini(path)
    if own is not None:
        return settings_from_mapping(own, f"{path} [flake8-xla]", base)
    if flake8 is not None and any(k.replace("_", "-") == "xla-target-version" or k.replace("_", "-") in _FLAKE8_KEYS
                                  for k in flake8):
        return settings_from_mapping(flake8, f"{path} [flake8]", base, xla_codes_only=True, known=_FLAKE8_KEYS)
    return None


CONFIG_FILES = ("pyproject.toml", "setup.cfg", "tox.ini", ".flake8")


def discover(start: str) -> Settings:
    """The settings of the first config file found from ``start`` upwards (defaults if none)."""
    directory = os.path.abspath(start)
    while True:
        for name in CONFIG_FILES:
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                found = load_file(path)
                if found is not None:
                    return found
        parent = os.path.dirname(directory)
        if parent == directory:
            return Settings(base_dir=os.path.abspath(start))
        directory = parent


def merge(base: Settings, **overrides) -> Settings:
    """Command-line values (those not None / not empty) over the file's."""
    changes = {k: v for k, v in overrides.items() if v is not None and v != ()}
    if "extend_select" in changes:
        changes["extend_select"] = base.extend_select + changes["extend_select"]
    if "ignore" in changes:
        changes["ignore"] = base.ignore + changes["ignore"]
    if "extend_exclude" in changes:
        changes["extend_exclude"] = base.extend_exclude + changes["extend_exclude"]
    if "per_file_ignores" in changes:
        changes["per_file_ignores"] = base.per_file_ignores + changes["per_file_ignores"]
    if "sync_functions" in changes:
        changes["sync_functions"] = base.sync_functions | changes["sync_functions"]
    if "target_version" in changes and "target_origin" not in changes:
        changes["target_origin"] = EXPLICIT  # the command line's value, not the file's
    return base._replace(**changes)


__all__ = ["CONFIG_FILES", "FORMATS", "AssumeXla", "ConfigError", "PerFileIgnores", "Settings", "check_target_version",
           "discover", "known_releases", "load_file", "merge", "parse_per_file_ignores", "parse_sync_functions",
           "settings_from_mapping", "split_list"]
