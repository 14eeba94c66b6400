"""flake8-xla's rules: one module per code (``xla101_removed_api.py`` holds XLA101
``removed-api``), plus the declarative rule data (YAML) beside them. Every module named
``xla<NNN>_<name>.py`` is a rule unit; RULES lists their Rule classes in code order."""
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
    return tuple(sorted(found, key=lambda cls: cls.code))


RULES = _discover()
