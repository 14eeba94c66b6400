"""The fix layer every fix uses: range edits, import placement that keeps guards and scopes, and
the fixpoint loop. Positions follow :mod:`flake8_xla.fixing.lines`.

The names below load on first use: a front-end that only splits lines (``fixing.lines``) does not
load the fixpoint loop and, through it, the semantic model (a run over cached files needs neither)."""
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .edits import Edit, Fix, NoFix, apply_edits, choose, removal_edits
    from .fixpoint import FixBuilder, FixOutcome, FixSite, MAX_PASSES, fix_to_fixpoint, remove_newly_unused
    from .imports import Importer, PlannedImport

__all__ = ["Edit", "Fix", "FixBuilder", "FixOutcome", "FixSite", "Importer", "MAX_PASSES", "NoFix", "PlannedImport",
           "apply_edits", "choose", "fix_to_fixpoint", "removal_edits", "remove_newly_unused"]
_EDITS = {"Edit", "Fix", "NoFix", "apply_edits", "choose", "removal_edits"}
_IMPORTS = {"Importer", "PlannedImport"}


def __getattr__(name: str):
    if name in _EDITS:
        from . import edits as module
    elif name in _IMPORTS:
        from . import imports as module
    elif name in __all__:
        from . import fixpoint as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)
    return value
