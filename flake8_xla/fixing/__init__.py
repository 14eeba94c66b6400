"""The fix layer every fix uses: range edits, import placement that keeps guards and scopes, and
the fixpoint loop. Positions follow :mod:`flake8_xla.fixing.lines`."""
from .edits import Edit, Fix, NoFix, apply_edits, choose, removal_edits
from .fixpoint import FixBuilder, FixOutcome, FixSite, MAX_PASSES, fix_to_fixpoint, remove_newly_unused
from .imports import Importer, PlannedImport

__all__ = ["Edit", "Fix", "FixBuilder", "FixOutcome", "FixSite", "Importer", "MAX_PASSES", "NoFix", "PlannedImport",
           "apply_edits", "choose", "fix_to_fixpoint", "removal_edits", "remove_newly_unused"]
