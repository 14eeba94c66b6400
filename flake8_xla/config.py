"""Configuration of the standalone CLI.

Searched from the working directory upwards; the first file with a relevant section wins:
``pyproject.toml`` ``[tool.flake8-xla]``, then ``[flake8-xla]`` in setup.cfg / tox.ini / .flake8,
then the plugin's options in their ``[flake8]`` section (so a team that configured the flake8 plugin
gets the same behaviour from the CLI). Command-line options override the file.
"""
from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, field, replace
from typing import Dict, Optional, Tuple, Union

from .versions import parse_version


class ConfigError(Exception):
    """A broken or invalid configuration: a usage error (exit status 2)."""


PerFileIgnores = Tuple[Tuple[str, Tuple[str, ...]], ...]
# assume-torch-xla: True / False for every file, or glob patterns (matched like per-file-ignores)
AssumeXla = Union[bool, Tuple[str, ...]]


@dataclass(frozen=True)
class Settings:
    select: Optional[Tuple[str, ...]] = None  # None: the default rule set
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    per_file_ignores: PerFileIgnores = ()
    exclude: Optional[Tuple[str, ...]] = None  # None: the default excludes
    extend_exclude: Tuple[str, ...] = ()
    target_version: Optional[str] = None
    assume_torch_xla: AssumeXla = False  # lint files that never mention torch_xla too (all, or these globs)
    output_format: str = "text"
    source: Optional[str] = None  # the file these settings came from
    base_dir: str = field(default=".")  # per-file-ignores and excludes are relative to it


FORMATS = ("text", "json", "sarif", "github")
_KEYS = {
    "select", "extend-select", "ignore", "extend-ignore", "per-file-ignores", "exclude", "extend-exclude",
    "target-version", "xla-target-version", "output-format", "assume-torch-xla", "xla-assume-torch-xla",
}
# what a [flake8] section may hold that the CLI takes over (codes are filtered to XLA ones)
_FLAKE8_KEYS = {"xla-target-version", "select", "extend-select", "ignore", "extend-ignore",
                "per-file-ignores", "exclude", "extend-exclude", "xla-assume-torch-xla", "enable-extensions"}
# the words configparser (and so flake8, for a store_true option) reads as booleans
_BOOLEANS = {"1": True, "yes": True, "true": True, "on": True, "0": False, "no": False, "false": False, "off": False}


def _split_list(value) -> Tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = re.split(r"[,\s]+", str(value))
    return tuple(item.strip() for item in items if item.strip())


def _parse_per_file_ignores(value) -> PerFileIgnores:
    """``{"tests/*" = ["XLA101"]}`` (TOML) or flake8's ``GLOB: CODES`` text, parsed by flake8 itself."""
    if isinstance(value, dict):
        return tuple((str(k), _split_list(v)) for k, v in value.items())
    from flake8.utils import parse_files_to_codes_mapping

    try:
        return tuple((glob, tuple(codes)) for glob, codes in parse_files_to_codes_mapping(str(value)))
    except ValueError as exc:
        raise ConfigError(f"per-file-ignores: {str(exc).splitlines()[0]}") from None


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
        return _split_list(value) or False
    raise ConfigError(f"{where}: {key} must be true, false or a list of glob patterns, not {value!r}")


def _normalize(raw: Dict[str, object], where: str, known: set) -> Dict[str, object]:
    out: Dict[str, object] = {}
    for key, value in raw.items():
        norm = key.replace("_", "-").lower()
        if norm not in known:
            if known is _KEYS:
                raise ConfigError(f"{where}: unknown option {key!r} (known: {', '.join(sorted(_KEYS))})")
            continue
        out[norm] = value
    return out


def settings_from_mapping(raw: Dict[str, object], where: str, base_dir: str, xla_codes_only: bool = False,
                          known: Optional[set] = None) -> Settings:
    values = _normalize(raw, where, known or _KEYS)

    def codes(key: str) -> Tuple[str, ...]:
        items = _split_list(values.get(key, ()))
        return tuple(c for c in items if c.upper().startswith("X")) if xla_codes_only else items

    kwargs: Dict[str, object] = {"source": where, "base_dir": base_dir}
    if "select" in values and codes("select"):
        kwargs["select"] = codes("select")
    # flake8 turns the opt-in XLA9 rules on with enable-extensions; the CLI selects them instead
    kwargs["extend_select"] = codes("extend-select") + codes("enable-extensions")
    kwargs["ignore"] = codes("ignore") + codes("extend-ignore")
    if "per-file-ignores" in values:
        pfi = _parse_per_file_ignores(values["per-file-ignores"])
        if xla_codes_only:
            pfi = tuple((g, tuple(c for c in cs if c.upper().startswith("X"))) for g, cs in pfi)
            pfi = tuple((g, cs) for g, cs in pfi if cs)
        kwargs["per_file_ignores"] = pfi
    if "exclude" in values:
        kwargs["exclude"] = _split_list(values["exclude"])
    kwargs["extend_exclude"] = _split_list(values.get("extend-exclude", ()))
    target = values.get("xla-target-version", values.get("target-version"))
    if target not in (None, ""):
        try:
            parse_version(str(target))
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        kwargs["target_version"] = str(target)
    for key in ("assume-torch-xla", "xla-assume-torch-xla"):
        if key in values:
            # in [flake8] (xla_codes_only) the value is flake8's boolean option: no glob patterns there
            kwargs["assume_torch_xla"] = _parse_assume_xla(values[key], where, key, booleans_only=xla_codes_only)
    fmt = values.get("output-format")
    if fmt is not None:
        if fmt not in FORMATS:
            raise ConfigError(f"{where}: output-format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        kwargs["output_format"] = str(fmt)
    return Settings(**kwargs)  # type: ignore[arg-type]


def _read_toml(path: str) -> Optional[Dict[str, object]]:
    try:
        import tomllib  # type: ignore[import-not-found]
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the TOML: {exc}") from None
    section = data.get("tool", {}).get("flake8-xla")
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.flake8-xla] must be a table")
    return section


def _read_ini(path: str) -> Tuple[Optional[Dict[str, str]], Optional[Dict[str, str]]]:
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


_CANDIDATES = ("pyproject.toml", "setup.cfg", "tox.ini", ".flake8")


def discover(start: str) -> Settings:
    """The settings of the first config file found from ``start`` upwards (defaults if none)."""
    directory = os.path.abspath(start)
    while True:
        for name in _CANDIDATES:
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
    return replace(base, **changes)


__all__ = ["FORMATS", "AssumeXla", "ConfigError", "Settings", "discover", "load_file", "merge", "settings_from_mapping"]
