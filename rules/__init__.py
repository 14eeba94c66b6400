"""flake8-xla's rules: one unit per code. ``xla101_removed_api.py`` holds XLA101 ``removed-api``
(a Python rule); ``xla301_dynamic_shape_op.yml`` holds XLA301 ``dynamic-shape-op`` (an ast-grep
pattern rule, see flake8_xla/patterns.py). RULES lists them all in code order.

The naming is mechanical, so ``rule_index()`` knows every code, name and whether it is opt-in
(the XLA9xx family) from the file names alone: a run whose files all fail the pre-filter or hit the
result cache never imports a rule. RULES is built on first use."""
import importlib
import marshal
import os
import re
import sys
import zlib
from typing import List, Tuple

_UNIT = re.compile(r"(xla(\d{3}))_(\w+)")
_OPT_IN_FAMILY = "XLA9"


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
        found.append((code, words.replace("_", "-"), code.startswith(_OPT_IN_FAMILY)))
    return tuple(sorted(found))


def read_data(path: str) -> object:
    """A YAML rule data file as Python data. A marshal copy kept in ``__pycache__`` beside it, named
    by the text's size and CRC, spares the YAML parser (and importing it) on later runs, the way
    .pyc files spare the compiler; where it cannot be written, every run parses the YAML."""
    with open(path, "rb") as handle:
        raw = handle.read()
    folder, name = os.path.split(path)
    stem = f"{name}.{sys.implementation.cache_tag}."
    copy = os.path.join(folder, "__pycache__", f"{stem}{len(raw):x}-{zlib.crc32(raw):08x}.marshal")
    try:
        with open(copy, "rb") as handle:
            return marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):
        pass  # none yet, or unreadable: parse the YAML
    data = _parse_yaml(raw.decode("utf-8"))
    _keep_copy(copy, stem, data)
    return data


def _parse_yaml(text: str) -> object:
    import yaml  # only when no marshal copy can be used

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 10x faster


def _keep_copy(copy: str, stem: str, data: object) -> None:
    folder = os.path.dirname(copy)
    temporary = f"{copy}.{os.getpid()}.tmp"
    try:
        encoded = marshal.dumps(data)
        os.makedirs(folder, exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(encoded)
        os.replace(temporary, copy)  # atomic: a concurrent reader sees the old file or the whole new one
        for other in os.listdir(folder):  # copies of earlier versions of the file
            if other.startswith(stem) and other.endswith(".marshal") and other != os.path.basename(copy):
                os.remove(os.path.join(folder, other))
    except (OSError, ValueError):  # read-only install, odd YAML types: parse every time
        try:
            os.remove(temporary)
        except OSError:
            pass


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
