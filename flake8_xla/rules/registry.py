"""Every rule, gathered from the rule units that rules/__init__.py indexes: importing this module is
what loads the rule modules (and ast-grep), so the engine imports it on the first file it lints."""
import importlib
from typing import Tuple

from flake8_xla.rule import Rule
from flake8_xla.rules import python_units
from flake8_xla.rules.patterns import pattern_rules


def _gather() -> Tuple[type, ...]:
    found = []
    for family, stem in python_units():
        module = importlib.import_module(f"flake8_xla.rules.{family}.{stem}")
        found.extend(obj for obj in vars(module).values()
                     if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__
                     and getattr(obj, "code", None))
    found.extend(pattern_rules())
    return tuple(sorted(found, key=lambda cls: cls.code))


RULES = _gather()  # in code order
