"""flake8-xla's rules: one unit per code. ``xla101_removed_api.py`` holds XLA101 ``removed-api``
(a Python rule); ``xla301_dynamic_shape_op.yml`` holds XLA301 ``dynamic-shape-op`` (an ast-grep
pattern rule, see flake8_xla/patterns.py). RULES lists them all in code order.

The naming is mechanical, so ``rule_index()`` knows every code, name and whether it is opt-in
(the XLA9xx family, and XLA001 as ruff's RUF100) from the file names alone: a run whose files all
fail the pre-filter or hit the result cache never imports a rule. RULES is built on first use."""
import importlib
import marshal
import os
import re
import sys
from typing import List, Tuple

from flake8_xla import stash

_UNIT = re.compile(r"(xla(\d{3}))_(\w+)")
_OPT_IN = ("XLA001", "XLA9")  # codes and prefixes


def unit_files(ext: str) -> List[str]:
    """The stems of the rule units written as ``ext`` files (".py" or ".yml"), in code order."""
    stems = (os.path.splitext(entry) for entry in os.listdir(__path__[0]))
    return sorted(stem for stem, suffix in stems if suffix == ext and _UNIT.fullmatch(stem))


def rule_index() -> Tuple[Tuple[str, str, bool], ...]:
    """(code, kebab name, off by default) of every rule unit, in code order, from the file names."""
    found = []
    for stem in unit_files(".py") + unit_files(".yml"):
        _, number, words = _UNIT.fullmatch(stem).groups()
        code = f"XLA{number}"
        found.append((code, words.replace("_", "-"), code.startswith(_OPT_IN)))
    return tuple(sorted(found))


def read_data(path: str) -> object:
    """A YAML (or JSON) rule data file as Python data. A marshal copy named by a hash of the text spares
    the YAML parser (and importing it) on later runs, the way .pyc files spare the compiler: kept in
    ``__pycache__`` beside the file, or in the user's cache where that cannot be written. A copy is
    used only when its checksum holds and it was made from this very text (see flake8_xla.stash)."""
    with open(path, "rb") as handle:
        raw = handle.read()
    folder, name = os.path.split(path)
    stem = f"{name}.{sys.implementation.cache_tag}."
    copy_name = f"{stem}{stash.digest(raw + _COPY_FORMAT, 12)}.marshal"
    # in the user's cache, named by the install too, so two installs do not prune each other's copies
    here = stash.digest(os.path.realpath(folder).encode("utf-8", "surrogateescape"), 6)
    places = ((os.path.join(folder, "__pycache__"), ""), (stash.user_stash_dir(), f"{here}-"))
    for directory, prefix in places:
        payload = stash.read(os.path.join(directory, prefix + copy_name))
        if payload is not None:
            try:
                return marshal.loads(payload)
            except (EOFError, ValueError, TypeError):
                pass  # intact but not this Python's marshal data: parse the YAML
    data = _parse_yaml(raw.decode("utf-8"))
    try:
        payload = marshal.dumps(data)
    except ValueError:  # a YAML type marshal cannot hold: parse every time
        return data
    for directory, prefix in places:  # read-only install: the user's cache
        if stash.write(os.path.join(directory, prefix + copy_name), payload, stale_prefix=prefix + stem):
            break
    return data


_COPY_FORMAT = b"\0marshal copy 2"  # part of a copy's name: a new layout never reads an old one


def _parse_yaml(text: str) -> object:
    import yaml  # only when no marshal copy can be used

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 10x faster


def _discover() -> tuple:
    from flake8_xla.patterns import pattern_rules
    from flake8_xla.rule import Rule

    found = []
    for stem in unit_files(".py"):  # a listing, not pkgutil: that imports inspect (~10 ms a start)
        module = importlib.import_module(f"{__name__}.{stem}")
        found.extend(obj for obj in vars(module).values()
                     if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__
                     and getattr(obj, "code", None))
    found.extend(pattern_rules())
    return tuple(sorted(found, key=lambda cls: cls.code))


def __getattr__(name: str):
    if name == "RULES":
        rules = globals()["RULES"] = _discover()
        return rules
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
