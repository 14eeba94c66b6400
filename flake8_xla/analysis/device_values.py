"""Which expressions hold the XLA device, and which a device that is not XLA's: the calls and literals
of :mod:`flake8_xla.analysis.devices`, names given one (through their assignments, or what the calls
of a function pass for its parameter), and helpers of this file or of another module of the project
that return the XLA device."""
from __future__ import annotations

import ast
from typing import Optional

from .arguments import CallArguments
from .bindings import ARGUMENT, VALUE, Bindings
from .devices import XLA_DEVICE_CALLS, device_type
from .project import OTHER_DEVICE, XLA_DEVICE
from .syntax import dotted, is_fallback_return, keyword_value


class DeviceValues:
    """The device an expression names, computed on demand."""

    @classmethod
    def from_context(cls, ctx) -> "DeviceValues":
        return cls(ctx.get(Bindings), ctx.get(CallArguments))

    def __init__(self, bindings: Bindings, arguments: CallArguments) -> None:
        self.bindings = bindings
        self.arguments = arguments
        self.qualname = bindings.qualname
        self._busy: set = set()  # what is being worked out: a cycle gives up instead of looping

    def is_xla_device(self, node: ast.expr) -> bool:
        """``xm.xla_device()`` / ``torch_xla.device()`` / ``torch.device("xla")``, or a name given one:
        by one of its assignments that reach the use (``if args.tpu: device = xm.xla_device() else:
        ...``: on a TPU the XLA branch runs), by what the calls of a function pass for its parameter,
        or, for ``self.device``, by any method of the class."""
        name = dotted(node) if type(node) in (ast.Name, ast.Attribute) else None
        if name is not None and (type(node) is ast.Name or (name.startswith("self.") and name.count(".") == 1)) \
                and self.qualname(node) is None:
            key = ("xla-device?", id(node))
            if key in self._busy:
                return False
            self._busy.add(key)
            try:
                return self._named_xla_device(node, name)
            finally:
                self._busy.discard(key)
        if type(node) is ast.IfExp:  # torch_xla.device() if IS_TPU else torch.device("cuda")
            return self.is_xla_device(node.body) or self.is_xla_device(node.orelse)
        if type(node) is not ast.Call:
            return False
        qualname = self.bindings.callee(node)
        if qualname in XLA_DEVICE_CALLS:
            return True
        if qualname == "torch.device" and bool(node.args) and type(node.args[0]) is ast.Constant:
            return str(node.args[0].value).split(":")[0] == "xla"
        return self.helper_device(node) is not None

    def helper_device(self, call: ast.Call) -> Optional[str]:
        """For a call of a helper that returns the XLA device (``device = get_device()``, in this file
        or another module of the project): "all" when every return that can run on XLA gives it, "any"
        when one does (a helper that picks the backend), else None."""
        fn = self.bindings.local_callee(call)
        if fn is not None:
            return self.returns_xla_device(fn)
        project = self.arguments.project
        if project is not None:
            summary = project.callee(call, self.bindings.assigned_value)
            if summary is not None:
                return summary.returns_xla_device or None
        return None

    def returns_xla_device(self, fn: ast.AST) -> Optional[str]:
        """"all" / "any" / None: whether the returns of ``fn`` that can run on XLA give the XLA device
        (``return None`` fallbacks and the branches of other backends left out)."""
        key = ("returns-xla-device", id(fn))
        if key in self._busy:
            return None
        self._busy.add(key)
        try:
            off_xla = self.bindings.off_xla.nodes
            values = [n.value for n in self.bindings.return_statements(fn) if
                      id(n) not in off_xla and not is_fallback_return(n.value)]
            found = [self.is_xla_device(v) for v in values]
        finally:
            self._busy.discard(key)
        if not found or not any(found):
            return None
        return "all" if all(found) else "any"

    def _named_xla_device(self, node: ast.expr, name: str) -> bool:
        bound = self.bindings.lookup(node, name)
        entries = self.bindings.in_scope(node, name)
        if entries and bound:  # every assignment before the use, not only the last: branches on a flag
            at = (node.lineno, node.col_offset)
            bound = [b for b in entries if b[0] <= at] or bound
        for binding in bound:
            how, value = binding[1], binding[2]
            if how == VALUE and self.is_xla_device(value):
                return True
            if how == ARGUMENT:
                values = self.arguments.passed(value, binding[3])
                if values and all(self.is_xla_device(v) for v in values):
                    return True
                if not values and XLA_DEVICE in self.arguments.incoming(value, binding[3]):
                    return True
        return False

    def xla_device_value(self, node: Optional[ast.expr]) -> Optional[ast.expr]:
        """The expression that makes ``node`` the XLA device for sure: ``node`` itself when it is
        ``torch_xla.device()`` / ``xm.xla_device()`` / ``torch.device("xla")`` / ``"xla:0"``, or the
        value of the one plain assignment of a name that gave it one, or, for a plain function's
        parameter, what every call of it in the file passes when that is the XLA device; else None
        (a conditional expression such as ``torch_xla.device() if tpu else "cuda"`` included)."""
        if type(node) is ast.Name:
            value = self.bindings.assigned_value(node)
            if value is None and ("xla-device", id(node)) not in self._busy:
                self._busy.add(("xla-device", id(node)))
                try:
                    found = [self.xla_device_value(v) for v in self.arguments.parameter_values(node)]
                    facts = self.arguments.parameter_facts(node) if not found else []
                finally:
                    self._busy.discard(("xla-device", id(node)))
                if facts and XLA_DEVICE in facts and OTHER_DEVICE not in facts:
                    return node  # every call from another module passes the XLA device
                return found[0] if found and all(f is not None for f in found) else None
            node = value
        if type(node) is ast.Constant:
            return node if isinstance(node.value, str) and node.value.split(":")[0] == "xla" else None
        if type(node) is not ast.Call or not self.is_xla_device(node):
            return None
        helper = self.helper_device(node)
        return node if helper in (None, "all") else None

    def on_cpu(self, node: ast.expr) -> bool:
        """``"cpu"``, ``torch.device("cuda")``, or a name given one of those and never the XLA device."""
        if type(node) is ast.Name:
            if self.is_xla_device(node):
                return False
            node = self.bindings.assigned_value(node) or node
        return _is_cpu(node)

    def moves_to_cuda(self, call: ast.Call) -> bool:
        """``x.cuda()`` or ``x.to("cuda")`` / ``x.to(torch.device("cuda:0"))``, also through a name that
        holds such a device and never the XLA one: CUDA code."""
        func = call.func
        if type(func) is not ast.Attribute or self.qualname(func) is not None:
            return False
        if func.attr == "cuda":
            return True
        where = call.args[0] if call.args else keyword_value(call, "device")
        if func.attr != "to" or where is None:
            return False
        if type(where) is ast.Name and not self.is_xla_device(where):
            where = self.bindings.assigned_value(where) or where  # ``device = torch.device("cuda")`` earlier
        return device_type(where) == "cuda"


def _is_cpu(node: Optional[ast.AST]) -> bool:
    """``"cpu"``, ``"cuda:0"``, ``"mps"`` or ``torch.device("cpu")``: a device that is not XLA's."""
    if type(node) is ast.Call and len(node.args) != 1:
        return False  # torch.device("cuda", index): as before, not taken for a host device
    return device_type(node) in ("cpu", "cuda", "mps")
