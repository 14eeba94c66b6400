"""flake8-xla's rules: one unit per code, in the folder of its family (the code's hundreds).
``api/xla101_removed_api.py`` holds XLA101 ``removed-api`` (a Python rule); the ast-grep pattern
rules are data, so ``xla301_dynamic_shape_op.yml`` (XLA301 ``dynamic-shape-op``) sits in the
top-level ``rules/`` with the tables (see flake8_xla/ruledata.py and patterns.py here).

The naming is mechanical, so ``rule_index()`` knows every code, name and whether it is opt-in
(the XLA9xx family, and XLA001 as ruff's RUF100) from the file names alone: a run whose files all
fail the pre-filter or hit the result cache never imports a rule. The rules themselves are gathered by
registry.py, which the engine imports on first use."""
import functools
import os
import re
from typing import List, Tuple

from flake8_xla import ruledata

_UNIT = re.compile(r"(xla(\d{3}))_(\w+)")
_OPT_IN = ("XLA001", "XLA9")  # codes and prefixes
# a code's family folder, by its hundreds digit
FAMILIES = {"0": "meta", "1": "api", "2": "fsdp", "3": "graph", "4": "checkpointing", "5": "torchtpu",
            "6": "pitfalls", "9": "heuristics"}


def family_of(code: str) -> str:
    """The folder of ``code``'s family: XLA303 -> "graph"."""
    return FAMILIES[code[3]]


def python_units() -> List[Tuple[str, str]]:
    """(family, stem) of every Python rule unit, in code order."""
    here = os.path.dirname(__file__)
    found = []
    for family in FAMILIES.values():  # a listing, not pkgutil: that imports inspect (~10 ms a start)
        stems = (os.path.splitext(entry) for entry in os.listdir(os.path.join(here, family)))
        found.extend((family, stem) for stem, suffix in stems if suffix == ".py" and _UNIT.fullmatch(stem))
    return sorted(found, key=lambda unit: unit[1])


def pattern_units() -> List[str]:
    """The stems of the ast-grep rule units (``xlaNNN_name.yml`` in the rule data), in code order."""
    stems = (os.path.splitext(name)[0] for name in ruledata.data_names(".yml"))
    return [stem for stem in stems if _UNIT.fullmatch(stem)]


@functools.lru_cache(maxsize=None)  # asked for every file (its noqa codes); the units do not change in a run
def rule_index() -> Tuple[Tuple[str, str, bool], ...]:
    """(code, kebab name, off by default) of every rule unit, in code order, from the file names."""
    found = []
    for stem in [stem for _, stem in python_units()] + pattern_units():
        _, number, words = _UNIT.fullmatch(stem).groups()
        code = f"XLA{number}"
        found.append((code, words.replace("_", "-"), code.startswith(_OPT_IN)))
    return tuple(sorted(found))
