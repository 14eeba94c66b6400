"""What one traced call did to the lazy graph, read from torch_xla's counters around it.

A handful of counters move whenever a call leaves the lazy graph: ``ExecuteComputation`` (a graph
ran), ``UncachedCompile`` (a graph was compiled), ``xla::_to_cpu`` (a value read to the host, and
the inputs of every CPU fallback), ``xla::_to_copy`` (a copy across devices, either direction).
``ExecuteComputation`` also moves when a graph the step marker launched runs, asynchronously, so it
only says that a read may have cut the graph. Measured on torch_xla 2.9 with ``PJRT_DEVICE=CPU``: ``t.item()`` moves ``_to_cpu`` (and
``ExecuteComputation`` when the value was pending), ``t.cpu()`` and printing move ``_to_copy``,
``torch.nonzero(t)`` moves ``_to_cpu`` and the ``aten::nonzero`` fallback counter, ``t + 1`` moves
none. Reading one counter costs ~0.5 us; the full counter list is read only when one moved.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

EXECUTE, COMPILE, TO_CPU, TO_COPY = "ExecuteComputation", "UncachedCompile", "xla::_to_cpu", "xla::_to_copy"
WATCHED = (EXECUTE, COMPILE, TO_CPU, TO_COPY)
FALLBACK_PREFIX = "aten::"
SCALAR_READ = "aten::_local_scalar_dense"  # .item(), float(t), if t: (a read, not an op without a lowering)

# what a Tensor method or torch function that moved the counters did, by its __name__
READ, BRANCH, COPY, FALLBACK, COMPILED, WAIT = "read", "branch", "copy", "fallback", "compile", "wait"
KINDS: Dict[str, str] = {
    "item": READ, "tolist": READ, "__float__": READ, "__int__": READ, "__index__": READ, "__complex__": READ,
    "__format__": READ, "__repr__": READ, "__str__": READ, "equal": READ, "allclose": READ,
    "__bool__": BRANCH,
    "cpu": COPY, "numpy": COPY, "__array__": COPY, "to": COPY, "__reduce_ex__": COPY, "__deepcopy__": COPY,
}
# how a message names the call
SPELLING: Dict[str, str] = {
    "item": ".item()", "tolist": ".tolist()", "__float__": "float()", "__int__": "int()", "__index__": "an index",
    "__complex__": "complex()", "__format__": "an f-string", "__repr__": "printing", "__str__": "str()",
    "__bool__": "a truth test", "cpu": ".cpu()", "numpy": ".numpy()", "__array__": "a numpy conversion",
    "to": ".to()", "__reduce_ex__": "pickling", "__deepcopy__": "copy.deepcopy()",
}


def spelling(name: str) -> str:
    return SPELLING.get(name) or f"torch.{name}()"


class Reading(NamedTuple):
    executed: int
    compiled: int
    to_cpu: int
    to_copy: int


class Counters:
    """The watched counters and the ``aten::`` fallback counters of the installed torch_xla."""

    def __init__(self, xla_c: Any) -> None:
        self._value: Callable[[str], Optional[int]] = xla_c._xla_counter_value
        self._names: Callable[[], Any] = xla_c._xla_counter_names
        self._fallbacks = self.fallback_calls()

    def read(self) -> Reading:
        value = self._value
        return Reading(value(EXECUTE) or 0, value(COMPILE) or 0, value(TO_CPU) or 0, value(TO_COPY) or 0)

    def fallback_calls(self) -> Dict[str, int]:
        value = self._value
        return {name: value(name) or 0 for name in self._names()
                if name.startswith(FALLBACK_PREFIX) and name != SCALAR_READ}

    def new_fallbacks(self) -> Tuple[Tuple[str, int], ...]:
        """The ``aten::`` ops that ran on the CPU since the previous call, with their calls."""
        now = self.fallback_calls()
        before, self._fallbacks = self._fallbacks, now
        return tuple((name, count - before.get(name, 0)) for name, count in sorted(now.items())
                     if count > before.get(name, 0))


def kind_of(name: str, before: Reading, after: Reading, self_on_xla: bool, result_on_xla: bool) -> Optional[str]:
    """What a call named ``name`` did; None: it stayed in the graph (or only copied data to the
    device, which every input pipeline does). A named read of a device tensor always transfers;
    any other call counts when ``_to_cpu`` moved: ``ExecuteComputation`` and ``_to_copy`` also
    move when the previous step's graph runs or a loader thread uploads a batch, meanwhile."""
    kind = KINDS.get(name)
    if kind == COPY:
        return COPY if self_on_xla and not result_on_xla else None
    if kind is not None:
        return kind if self_on_xla else None
    return READ if after.to_cpu != before.to_cpu else None
