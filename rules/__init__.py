"""flake8-xla's rules: one unit per code. ``xla101_removed_api.py`` holds XLA101 ``removed-api``
(a Python rule); ``xla301_dynamic_shape_op.yml`` holds XLA301 ``dynamic-shape-op`` (an ast-grep
pattern rule, see flake8_xla/patterns.py). RULES lists them all in code order."""
import importlib
import pkgutil
import re

from flake8_xla.rule import Rule

_UNIT = re.compile(r"xla\d{3}_\w+")


def _discover() -> tuple:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if _UNIT.fullmatch(info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.extend(obj for obj in vars(module).values()
                         if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__
                         and getattr(obj, "code", None))
    from flake8_xla.patterns import pattern_rules

    found.extend(pattern_rules(__path__[0]))
    return tuple(sorted(found, key=lambda cls: cls.code))


RULES = _discover()
