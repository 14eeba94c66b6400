"""The names analysis/tensors.py imports from here while it is split into modules (issue 38): control
flow is analysis/control.py's, dotted names analysis/syntax.py's, the FSDP wrappers analysis/wraps.py's."""
from .control import FlowFacts
from .syntax import dotted
from .wraps import FSDP_ANY

__all__ = ["FSDP_ANY", "FlowFacts", "dotted"]
