"""What the lifecycle rules (XLA101-XLA106, XLA903) share: the base that reports the table's uses of
some kinds in some states, and the wording of their messages and help."""
from __future__ import annotations

import re
from typing import ClassVar, Optional, Tuple

from . import fixes
from .matching import LifecycleUses
from .table import ApiRow, LifecycleUse, api_table
from ..rule import Diagnostic, FileContext, Level
from ..tables.rules import TableRule


class LifecycleRule(TableRule):
    """A rule that reports the table rows of some kinds in some states (XLA101-XLA106)."""

    kinds: ClassVar[Tuple[str, ...]]
    states: ClassVar[Tuple[str, ...]]
    uses = LifecycleUses
    build_fix = staticmethod(fixes.build_fix)  # a manual row's builder says why it has none

    def takes(self, use: LifecycleUse) -> bool:
        return use.row.kind in self.kinds and use.state in self.states and self.reports(use)

    def diagnostic_of(self, ctx: FileContext, use: LifecycleUse) -> Diagnostic:
        return self.diagnostic(ctx, use.node, self.message(use), self.level_of(use), self.help(use))

    def level_of(self, use: LifecycleUse) -> Level:
        """An error where the use fails on the target and the table names the exception it raises
        (``effect: AttributeError``); a removed environment variable is ``ignored``: the rule's level."""
        raises = use.state in ("removed", "unavailable") and (use.row.effect or "").endswith("Error")
        return "error" if raises else self.level

    def reports(self, use: LifecycleUse) -> bool:
        """A further choice among the uses of the rule's kinds and states (default: all)."""
        return True

    def message(self, use: LifecycleUse) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def help(self, use: LifecycleUse) -> Optional[str]:
        """The detail behind the message (default: what an alias stands for and the rest of the advice)."""
        return lifecycle_help(use)

    def covers(self, row: ApiRow) -> bool:
        """Whether this rule can report ``row`` on some release (for the generated docs)."""
        if row.kind not in self.kinds:
            return False
        reachable = {"planned": row.plan is not None, "removed": row.removed_in is not None,
                     "deprecated": row.deprecated_in is not None,
                     "warns": row.warns_in is not None and row.plan is None,
                     "unavailable": row.added_in is not None and row.kind in ("argument", "env_var")}
        return any(reachable.get(state, False) for state in self.states)


_PLAN_PHRASES = {
    "deprecation": "is planned for deprecation",
    "removal": "is planned for removal",
    "internalization": "is planned to become internal",
    "replacement": "is planned to be replaced",
}


def planned_message(use: LifecycleUse) -> str:
    """XLA103/XLA903: the planned change (not done yet) and what to use instead."""
    phrase = _PLAN_PHRASES.get(use.row.plan or "removal", "is planned for removal")
    return f"{use.api} {phrase}; {use.advice().first}"


def planned_help(use: LifecycleUse) -> Optional[str]:
    """XLA103/XLA903: whose plan it is and whether a use warns yet, then the rest of the advice."""
    table = api_table()
    if use.row.warns_in:
        warning = f"not deprecated, but it {indirect_phrase(use.row)}"
    elif use.row.deprecated_in:
        warning = f"it warns from torch_xla {use.row.deprecated_in}"
    else:
        warning = f"no warning as of torch_xla {table.latest}"
    issue = f" ({table.usability_plan})" if table.usability_plan else ""
    return lifecycle_help(use, f"the PyTorch/XLA usability plan{issue} slates it; {warning}")


def lifecycle_help(use: LifecycleUse, *facts: Optional[str]) -> Optional[str]:
    """A lifecycle diagnostic's help: the API an alias stands for, the facts the rule's message
    leaves out, then what the first line's advice does not say (caveats, the other replacement)."""
    sentences = [f"{use.api.removesuffix('()')} is {use.alias_of}."] if use.alias_of else []
    sentences += [_sentence(part) for part in (*facts, use.advice().rest) if part]
    return " ".join(sentences) or None


def _sentence(text: str) -> str:
    """``text`` as a sentence; a leading name from code (``torch.save() ...``) keeps its case."""
    if re.match(r"[a-z]+[\s:;,]", text):
        text = text[0].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def indirect_phrase(row: ApiRow) -> str:
    """'warns indirectly from torch_xla 2.8 through xla_device()': a row that is not deprecated but
    calls a deprecated API, whose warning (about that API) its uses then show."""
    return f"warns indirectly from torch_xla {row.warns_in} through {row.warns_through or 'a deprecated call'}"


def removal_phrase(row: ApiRow, state: str, removed_verb: str = "was removed") -> str:
    """'was removed in torch_xla 2.7' / 'is deprecated since torch_xla 2.5 (removed in 2.7)'."""
    if state == "removed":
        return f"{removed_verb} in torch_xla {row.removed_in}"
    later = f" (removed in {row.removed_in})" if row.removed_in else ""
    return f"is deprecated since torch_xla {row.deprecated_in}{later}"
