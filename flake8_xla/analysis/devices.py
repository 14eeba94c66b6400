"""Which calls and literals name the XLA device: the one list every rule and the value analysis
read (taking the device, naming it by text, starting the runtime)."""
from __future__ import annotations

import ast
import re
from typing import Callable, Iterator, Optional, Tuple

from .syntax import NodeIndex

# calls that hand out the XLA device of the calling process
XLA_DEVICE_CALLS = frozenset({
    "torch_xla.device", "torch_xla.torch_xla.device", "torch_xla.core.xla_model.xla_device",
    "xla_compat.device", "xla_compat.runtime.device",
})
# calls that list the devices: they start the runtime as surely as taking one
DEVICE_LIST_CALLS = frozenset({
    "torch_xla.devices", "torch_xla.torch_xla.devices", "torch_xla.core.xla_model.get_xla_supported_devices",
    "xla_compat.devices", "xla_compat.runtime.devices",
})
RUNTIME_STARTS = XLA_DEVICE_CALLS | DEVICE_LIST_CALLS
_XLA_DEVICE_TEXT = re.compile(r"xla(:\d+)?")


def device_type(node: Optional[ast.AST]) -> Optional[str]:
    """``"cuda"`` for ``"cuda:0"`` or ``torch.device("cuda")``: the type a device literal names."""
    if type(node) is ast.Constant:
        return node.value.split(":")[0] if isinstance(node.value, str) else None
    if type(node) is ast.Call and node.args and type(node.func) is ast.Attribute and node.func.attr == "device":
        return device_type(node.args[0])
    return None


def xla_literal(node: ast.AST, qualname: Callable[[ast.AST], Optional[str]]) -> bool:
    """``'xla'``, ``'xla:0'`` or ``torch.device('xla', 0)``: the XLA device written out by name."""
    if type(node) is ast.Call and node.args and qualname(node.func) == "torch.device":
        node = node.args[0]
    return type(node) is ast.Constant and type(node.value) is str and bool(_XLA_DEVICE_TEXT.fullmatch(node.value))


def placements(index: NodeIndex, qualname: Callable[[ast.AST], Optional[str]]) -> Iterator[Tuple[ast.AST, str]]:
    """``.to('xla')`` calls and ``device='xla:0'`` keywords of a file, with how the device reads."""
    for node in index.of(ast.Call):
        func = node.func
        if type(func) is ast.Attribute and func.attr == "to" and node.args and xla_literal(node.args[0], qualname):
            yield node, f".to({ast.unparse(node.args[0])})"
            continue
        for keyword in node.keywords:
            if keyword.arg == "device" and xla_literal(keyword.value, qualname):
                yield keyword.value, f"device={ast.unparse(keyword.value)}"
                break
