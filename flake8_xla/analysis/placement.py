"""What is on the XLA device: which names hold a module, an optimizer's state or a tensor there at a
given statement, and since which line (what a save writes, ``torch.save(model.state_dict(), path)``);
whether an expression surely holds a device tensor; which code builds modules that end up there."""
from __future__ import annotations

import ast
import functools
import os
from typing import Dict, List, Optional, Set, Tuple

from .arguments import CallArguments
from .assignments import Assignments
from .control import FlowFacts, Position
from .device_values import DeviceValues
from .project import XLA_MODULE
from .reads import READ_METHODS
from .semantic import QualifiedNames
from .syntax import Fact, NodeIndex, Parents, argument, dotted
from .tensors import TensorFacts
from .values import DEVICE, MODULE
from .wraps import FsdpWraps


# methods that return the module they are called on (``Net().to(device).train()``)
_SELF_METHODS = frozenset({"to", "train", "eval", "float", "half", "bfloat16", "double", "requires_grad_"})
# torch factories; with ``device=<the XLA device>`` they make XLA tensors
_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "tensor", "eye",
                        "linspace", "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "full_like"})
_OPTIMIZERS_WITHOUT_STATE = frozenset({"torch.optim.SGD"})  # without momentum it keeps no tensors


class XlaPlacement(Fact):
    """Which names hold a module, optimizer or tensor on the XLA device where a save runs."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.flow: FlowFacts = ctx.get(FlowFacts)
        self.names = ctx.get(QualifiedNames)
        self.bindings: Assignments = ctx.get(Assignments)
        self.tensors: TensorFacts = ctx.get(TensorFacts)
        self.devices: DeviceValues = ctx.get(DeviceValues)

    def holds(self, expr: ast.AST, at: Position, depth: int) -> Optional[Tuple[str, str]]:
        """(how the message names the XLA data ``expr`` is or carries, where it came onto the device: a
        sentence for the help), or None."""
        kind = type(expr)
        if kind is ast.Dict:
            return self._first([v for v in expr.values if v is not None], at, depth)
        if kind in (ast.List, ast.Tuple):
            return self._first(expr.elts, at, depth)
        if kind is ast.Call:
            func = expr.func
            if type(func) is ast.Attribute and func.attr == "state_dict" and not expr.args:
                return self._state_of(dotted(func.value), at)
            if type(func) is ast.Name and func.id == "dict" and self.names.reference(func) is None:
                return self._first(list(expr.args) + [k.value for k in expr.keywords], at, depth)
            return None
        name = dotted(expr)
        if name is None or depth <= 0:
            return None
        since = self.since(name, at) if self.tensors.kind(expr) == MODULE else None
        if since is not None:
            return f"model `{name}`", f"`{name}` is on the XLA device {since}"
        binding = self.bindings.binding_of(expr)
        if binding is None:
            return None
        if self._made_on_xla(binding.value):
            return f"tensor `{name}`", f"`{name}` is on the XLA device since line {binding.at.statement.lineno}"
        return self.holds(binding.value, at, depth - 1)

    def _first(self, items: List[ast.AST], at: Position, depth: int) -> Optional[Tuple[str, str]]:
        return next(filter(None, (self.holds(i, at, depth) for i in items)), None)

    def _state_of(self, owner: Optional[str], at: Position) -> Optional[Tuple[str, str]]:
        if owner is None:
            return None
        since = self.since(owner, at)
        if since is not None:
            return f"`{owner}.state_dict()`", f"`{owner}` is on the XLA device {since}"
        build = self.ctx.get(FsdpWraps).optimizer_named(owner, at.statement)
        if build is None or build.param_groups or not self.flow.runs_before(build.at, at) or \
                self.names.qualname(build.call.func) in _OPTIMIZERS_WITHOUT_STATE and \
                not _has_momentum(build.call):
            return None
        for module in build.params_of:
            line = self.module_on_xla(module, at)
            if line is not None:
                return (f"`{owner}.state_dict()`",
                        f"`{owner}` holds the parameters of `{module}`, on the XLA device since line {line}")
        return None

    def since(self, name: str, at: Position) -> Optional[str]:
        """How the help says where the module ``name`` came onto the XLA device: ``since line 12``, or,
        for a parameter that every call from the project's XLA code fills with such a module, ``as
        train.py:163 passes it``; None when it is not surely there."""
        line = self.module_on_xla(name, at)
        if line is not None:
            return f"since line {line}"
        fn = at.scope
        if type(fn) not in (ast.FunctionDef, ast.AsyncFunctionDef) or self.bindings.bindings_before(name, at):
            return None
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if name not in params:
            return None
        sites = self.ctx.get(CallArguments).incoming_sites(fn, (params.index(name), name))
        # a model moved there (a class of another module moved with .to(device) reads as a device value)
        if not sites or any(fact not in (XLA_MODULE, DEVICE) for _, fact in sites):
            return None  # some call passes something else, or a model not surely on the device
        site = sites[0][0]
        return f"as {os.path.basename(site.path)}:{site.line} passes it"

    def module_on_xla(self, name: str, at: Position) -> Optional[int]:
        """The line since which the module ``name`` is on the XLA device where ``at`` runs: its last
        binding before ``at`` moves it there (``model = Net().to(device)``), or a ``model.to(device)``
        statement after that binding does; nothing moves it elsewhere or rebinds it in between."""
        bound = self.bindings.bindings_before(name, at)
        last = bound[-1] if bound else None
        if last is not None and not self.flow.runs_before(last.at, at):
            return None  # bound in a branch or loop: which value reaches the save is unknown
        since = last.at.order if last is not None else -1
        found: Optional[int] = None
        if last is not None and self._moved_to_xla(last.value):
            found = last.at.statement.lineno
        for move in self.bindings.moves:
            if move.name != name or move.at.scope is not at.scope or not since < move.at.order < at.order:
                continue
            call = move.at.statement.value
            if self._device(call) is not None:
                if self.flow.runs_before(move.at, at):
                    found = move.at.statement.lineno
            else:
                found = None  # moved to the CPU (or somewhere unknown) since
        if found is None:
            return None
        for node in self._away_calls(name, at.scope):
            position = self.flow.position(node)
            if position is not None and since < position.order < at.order:
                return None  # model.cpu() since
        return found

    def _moved_to_xla(self, value: ast.AST) -> bool:
        """``Net().to(device)``, also with ``.train()``/``.eval()``... around it."""
        while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in _SELF_METHODS:
            if value.func.attr == "to" and self._device(value) is not None:
                return True
            value = value.func.value
        return False

    def _device(self, call: ast.Call) -> Optional[ast.AST]:
        """The XLA device a ``.to(...)`` call moves to, or None."""
        where = argument(call, 0, "device")
        return self.devices.xla_device_value(where) if where is not None else None

    def _made_on_xla(self, value: ast.AST) -> bool:
        """A tensor made on the XLA device: ``x.to(device)`` or ``torch.zeros(n, device=device)``."""
        if type(value) is not ast.Call:
            return False
        func = value.func
        qualname = self.names.qualname(func) or ""
        if qualname.startswith("torch.") and qualname[6:] in _FACTORIES:
            device = next((k.value for k in value.keywords if k.arg == "device"), None)
            return device is not None and self.devices.xla_device_value(device) is not None
        return type(func) is ast.Attribute and func.attr == "to" and not qualname and \
            self._device(value) is not None and self.tensors.kind(func.value) != MODULE

    def _away_calls(self, name: str, scope: ast.AST) -> List[ast.Call]:
        """``name.cpu()`` / ``name.to(<not the XLA device>)`` calls in ``scope``."""
        return [c for c in self._method_calls.get(name, ()) if self.flow.position(c) is not None and
                self.flow.position(c).scope is scope and
                (c.func.attr == "cpu" or c.func.attr == "to" and self._device(c) is None)]

    @functools.cached_property
    def _method_calls(self) -> Dict[str, List[ast.Call]]:
        """``<dotted name>.cpu(...)`` / ``.to(...)`` calls of the file by receiver."""
        out: Dict[str, List[ast.Call]] = {}
        for call in self.ctx.get(NodeIndex).of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and func.attr in ("cpu", "to"):
                name = dotted(func.value)
                if name:
                    out.setdefault(name, []).append(call)
        return out


def _has_momentum(call: ast.Call) -> bool:
    value = argument(call, 2, "momentum")
    return value is not None and not (type(value) is ast.Constant and not value.value)


def surely_on_xla(devices: DeviceValues, node: ast.AST, depth: int) -> bool:
    """Whether ``node`` surely holds a tensor on the XLA device: made there (``device=`` an XLA
    device), moved there (``.to(<XLA device>)``), or computed from such a tensor, through names'
    single assignments. (The value analysis's DEVICE kind means "may be on the device".)"""
    if depth < 0:
        return False
    if type(node) is ast.Name:
        value = devices.bindings.assigned_value(node)
        return value is not None and surely_on_xla(devices, value, depth - 1)
    if type(node) is ast.BinOp:
        return surely_on_xla(devices, node.left, depth) or surely_on_xla(devices, node.right, depth)
    if type(node) is ast.Subscript:
        return surely_on_xla(devices, node.value, depth)
    if type(node) is ast.Attribute:
        return surely_on_xla(devices, node.value, depth)  # ``encoded.latent_dist``
    if type(node) is not ast.Call:
        return False
    device = next((k.value for k in node.keywords if k.arg == "device"), None)
    func = node.func
    if device is None and type(func) is ast.Attribute and func.attr == "to" and node.args:
        device = node.args[0]
    if device is not None:
        return devices.xla_device_value(device) is not None
    if type(func) is ast.Attribute and func.attr in READ_METHODS:
        return False
    if type(func) is ast.Attribute and devices.qualname(func) is None and surely_on_xla(devices, func.value, depth - 1):
        return True  # a tensor method: ``x.float()``, ``x.view(...)``, ``dist.sample()``
    # an op or a module applied to a tensor on the device: ``torch.softmax(x)``, ``vae.encode(x)``
    return any(surely_on_xla(devices, arg, depth - 1) for arg in node.args[:2])


class MovedModules(Fact):
    """Which code builds modules that end up on the XLA device."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = ctx.get(NodeIndex)
        self.devices = ctx.get(DeviceValues)
        self.parents = ctx.get(Parents).map
        calls = self.index.of(ast.Call)
        # dotted names moved to the device, by scope: ``model.to(device)`` / ``model = model.to(device)``
        self.names: Dict[int, Dict[str, int]] = {}
        for call in calls:
            func = call.func
            if type(func) is ast.Attribute and func.attr == "to" and self._to_xla(call):
                name = dotted(func.value)
                if name:
                    scope = self.index.scope_of(call)
                    self.names.setdefault(id(scope), {}).setdefault(name, call.lineno)
        classes = {c.name: c for c in self.index.of(ast.ClassDef)}
        self.classes: Set[str] = set()
        changed = True
        while changed:  # classes built and moved, or built inside a moved class
            changed = False
            for call in calls:
                if type(call.func) is ast.Name and call.func.id in classes and call.func.id not in self.classes and \
                        self._moved(call):
                    self.classes.add(call.func.id)
                    changed = True

    def _to_xla(self, call: ast.Call) -> bool:
        device = next((k.value for k in call.keywords if k.arg == "device"), None)
        if device is None and call.args:
            device = call.args[0]
        return device is not None and self.devices.xla_device_value(device) is not None

    def _moved(self, call: ast.Call) -> bool:
        """Whether the module this construction builds is moved to the XLA device."""
        node, parent = call, self.parents.get(id(call))
        while parent is not None:
            if type(parent) is ast.Attribute and parent.attr == "to":
                outer = self.parents.get(id(parent))
                if type(outer) is ast.Call and outer.func is parent and self._to_xla(outer):
                    return True
            if type(parent) is ast.Assign and parent.value is node and len(parent.targets) == 1:
                name = dotted(parent.targets[0])
                scope = self.index.scope_of(parent)
                line = self.names.get(id(scope), {}).get(name) if name else None
                if line is not None and line >= parent.lineno:
                    return True
                if name and name.startswith("self.") and self._inside_moved_class(parent):
                    return True
            if isinstance(parent, (ast.stmt, ast.Lambda)):
                break
            node, parent = parent, self.parents.get(id(parent))
        return self._inside_moved_class(call)

    def _inside_moved_class(self, node: ast.AST) -> bool:
        scope = self.index.scope_of(node)
        return any(type(s) is ast.ClassDef and s.name in self.classes for s in [scope] + self.index.enclosing(scope))

    def holds(self, node: ast.AST) -> bool:
        """Whether ``node`` sits in the construction of a module that is moved to the XLA device."""
        if self._inside_moved_class(node):
            return True
        parent = self.parents.get(id(node))
        while parent is not None and not isinstance(parent, ast.stmt):
            if type(parent) is ast.Call and self._moved(parent):
                return True
            parent = self.parents.get(id(parent))
        return False
