"""Function summaries (:mod:`flake8_xla.analysis.project`) made from one module's tree, with the
same facts the rules use."""
from __future__ import annotations

import ast
from typing import Callable, Dict, List, Optional, Set, Tuple

from .control import FlowFacts
from .fsdp import master_only_saves
from .backends import BranchesOffXla
from .device_values import DeviceValues
from .project import (DEVICE_LOADER, OTHER_DEVICE, XLA_DEVICE, XLA_MODULE, FunctionSummary, HostRead, ModuleSummary,
                      OutgoingCall, not_project)
from .reads import READ_BUILTINS, READ_METHODS
from .semantic import QualifiedNames
from .syntax import NodeIndex, dotted, is_constant, is_fallback_return, positional_parameters, to_cpu, walk
from .loops import StepRegions
from .placement import XlaPlacement
from .tensors import TensorFacts
from .values import DEVICE, MODULE
from .wraps import reduced_parameters, returned_wrapper

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_READ_FUNCTIONS = frozenset({"numpy.asarray", "numpy.array"})
_COPIES = frozenset({".cpu()", ".numpy()", ".to()", "np.asarray()", "np.array()", "numpy.asarray()", "numpy.array()"})
# results that no longer carry a device tensor: a parameter's shape or dtype is not its value
_HOST_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "size", "dim", "numel", "requires_grad"})
SYNCS = frozenset({"torch_xla.sync", "torch_xla.core.xla_model.mark_step", "xla_compat.sync"})
_BARRIER_STEPS = frozenset({"torch_xla.core.xla_model.optimizer_step", "xla_compat.optimizer_step"})


def summarize(ctx) -> ModuleSummary:
    """The summaries of a module's top-level functions and of the methods of its top-level classes."""
    tree = ctx.tree
    out: Dict[str, FunctionSummary] = {}
    defs: List[Tuple[str, ast.AST, bool]] = []
    for stmt in tree.body:
        if type(stmt) in _DEFS:
            defs.append((stmt.name, stmt, False))
        elif type(stmt) is ast.ClassDef:
            defs.extend((f"{stmt.name}.{m.name}", m, True) for m in stmt.body if type(m) in _DEFS)
    qualname = ctx.get(QualifiedNames).qualname
    tensors, devices = ctx.get(TensorFacts), ctx.get(DeviceValues)
    kind = tensors.kind
    direct_syncs: Dict[str, bool] = {}
    calls: Dict[str, Set[str]] = {}
    for name, fn, is_method in defs:
        own = walk(fn.body, _SCOPES)
        direct_syncs[name] = any(type(n) is ast.Call and _syncs(n, qualname) for n in own)
        calls[name] = {n.func.id for n in own if type(n) is ast.Call and type(n.func) is ast.Name}
    syncing = {n for n, s in direct_syncs.items() if s}
    changed = True
    while changed:  # a function that calls a syncing function of the module syncs too
        changed = False
        for name in calls:
            if name not in syncing and calls[name] & syncing:
                syncing.add(name)
                changed = True
    for name, fn, is_method in defs:
        returns = [n.value for n in walk(fn.body, _SCOPES) if type(n) is ast.Return and n.value is not None]
        out[name] = FunctionSummary(
            name, ctx.filename, fn.lineno, _host_reads(fn, is_method, qualname), name in syncing,
            any(kind(r) == DEVICE for r in returns), _returned_modules(returns, qualname),
            devices.returns_xla_device(fn) or "", returned_wrapper(fn, qualname, tensors.assigned_value),
            reduced_parameters(fn, qualname, is_method), master_only_saves(fn, is_method, qualname))
    imports: Dict[str, Tuple[int, str, str]] = {}
    for stmt in tree.body:
        if type(stmt) is ast.ImportFrom:
            for alias in stmt.names:
                if alias.name != "*":
                    imports[alias.asname or alias.name] = (stmt.level, stmt.module or "", alias.name)
    return ModuleSummary(ctx.filename, out, imports)


def outgoing_calls(ctx, of_project: Callable[[int, str], bool]) -> Tuple[OutgoingCall, ...]:
    """The calls to functions the module imports from the project (``of_project(level, dotted)``
    says which names are the project's), with the arguments that hold the XLA device, a device
    loader, a device tensor or a module."""
    index, chosen = ctx.get(NodeIndex), []
    imported: Dict[str, Tuple[int, str]] = {}  # bound name -> (level, dotted name); no scopes: a first cut
    for node in index.of(ast.Import, ast.ImportFrom):
        for alias in node.names:
            if type(node) is ast.Import:
                bound = alias.asname or alias.name.split(".")[0]
                imported.setdefault(bound, (0, alias.name if alias.asname else bound))
            elif alias.name != "*":
                imported.setdefault(alias.asname or alias.name,
                                    (node.level, ".".join(x for x in (node.module, alias.name) if x)))
    if not imported:
        return ()
    for call in index.of(ast.Call):
        if call.args or call.keywords:
            name = dotted(call.func)
            head, _, rest = (name or "").partition(".")
            named = imported.get(head)
            if named is not None and rest:
                named = (named[0], f"{named[1]}.{rest}")
            if named is not None and not (named[0] == 0 and not_project(named[1])) and of_project(*named):
                chosen.append((call, named))
    if not chosen:
        return ()  # most callers: the value analysis is never built
    off_xla = ctx.get(BranchesOffXla).nodes
    out, speaking = [], {}
    for call, named in chosen:
        if id(call) in off_xla:
            continue
        arguments = []
        for position, arg in enumerate(call.args):
            if type(arg) is ast.Starred:
                break
            fact = _argument_fact(ctx, arg, call)
            if fact is not None:
                arguments.append((position, fact))
        for keyword in call.keywords:
            if keyword.arg is not None:
                fact = _argument_fact(ctx, keyword.value, call)
                if fact is not None:
                    arguments.append((keyword.arg, fact))
        # a model or a tensor is taken for one on XLA only where the calling code shows XLA: the same
        # call passes the XLA device or a device loader, or its function names torch_xla (a device
        # that is not XLA's is kept wherever it is passed: it says the callee also runs elsewhere)
        strong = any(fact in (XLA_DEVICE, DEVICE_LOADER, OTHER_DEVICE, XLA_MODULE) for _, fact in arguments)
        if arguments and (strong or _speaks_xla(index.scope_of(call), ctx.get(DeviceValues), speaking)):
            per_step = ctx.get(StepRegions).region_of(call) is not None
            out.append(OutgoingCall(named[0], named[1], call.lineno, tuple(arguments), per_step))
    return tuple(out)


def _argument_fact(ctx, arg: ast.expr, call: ast.Call) -> Optional[str]:
    """What a call passes for one argument, for the callee in another module: the XLA device, a device
    that is not XLA's, a device loader, a device tensor or a module (a kind's text), a model as
    XLA_MODULE where it is on the XLA device then; None for anything else."""
    devices, tensors = ctx.get(DeviceValues), ctx.get(TensorFacts)
    if devices.is_xla_device(arg):
        return XLA_DEVICE
    if devices.on_cpu(arg):
        return OTHER_DEVICE
    if tensors.loader(arg) == DEVICE:
        return DEVICE_LOADER
    kind = tensors.kind(arg)
    if kind == MODULE and dotted(arg) is not None:
        at = ctx.get(FlowFacts).position(call)
        if at is not None and ctx.get(XlaPlacement).module_on_xla(dotted(arg), at) is not None:
            return XLA_MODULE
    return kind.value if kind in (DEVICE, MODULE) else None


def _speaks_xla(scope: ast.AST, devices: DeviceValues, known: Dict[int, bool]) -> bool:
    """Whether a function (or the module's top level) names torch_xla or moves something to the XLA device."""
    if id(scope) not in known:
        nodes = walk(scope.body, _SCOPES) if type(scope) is not ast.Module else \
            walk([s for s in scope.body if type(s) not in _SCOPES], _SCOPES)
        known[id(scope)] = any(
            type(n) in (ast.Name, ast.Attribute) and (devices.qualname(n) or "").startswith(("torch_xla", "xla_compat"))
            or type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "to" and bool(n.args) and
            devices.is_xla_device(n.args[0]) for n in nodes)
    return known[id(scope)]


def _syncs(call: ast.Call, qualname) -> bool:
    name = qualname(call.func)
    if name in SYNCS:
        return True
    return name in _BARRIER_STEPS and any(k.arg == "barrier" and not is_constant(k.value, False) for k in call.keywords)


def _returned_modules(returns: List[ast.expr], qualname) -> Tuple[Optional[str], ...]:
    """``return xm`` / ``return xm, pl, xmp`` of imported torch_xla modules (every return alike)."""
    found: Optional[Tuple[Optional[str], ...]] = None
    for value in returns:
        if is_fallback_return(value):
            continue  # ``except ImportError: return None, None``: says nothing of the modules
        elements = value.elts if type(value) is ast.Tuple else [value]
        names = tuple(_module_name(e, qualname) for e in elements)
        if not any(names) or (found is not None and found != names):
            return ()
        found = names
    return found or ()


def _module_name(node: ast.AST, qualname) -> Optional[str]:
    name = qualname(node) if type(node) in (ast.Name, ast.Attribute) else None
    return name if name is not None and name.startswith("torch_xla") else None


def _host_reads(fn: ast.AST, is_method: bool, qualname) -> Tuple[HostRead, ...]:
    """The parameters ``fn`` reads to the host, itself or through values computed from them."""
    positional = positional_parameters(fn, is_method)
    origin: Dict[str, int] = {name: i for i, name in enumerate(positional)}
    if not origin:
        return ()
    own = walk(fn.body, _SCOPES)
    assigns = sorted((n for n in own if type(n) in (ast.Assign, ast.AnnAssign) and n.value is not None),
                     key=lambda n: (n.lineno, n.col_offset))
    rebound: Dict[str, int] = {}  # parameter -> the line it is first given something else
    for _ in range(3):  # values computed from values computed from a parameter
        for node in assigns:
            source = _derived(node.value, origin)
            targets = node.targets if type(node) is ast.Assign else [node.target]
            for target in targets:
                for name in (t.id for t in walk([target]) if type(t) is ast.Name):
                    if source is None:
                        if name in positional:
                            rebound[name] = min(rebound.get(name, node.lineno), node.lineno)
                    elif name not in positional:
                        origin.setdefault(name, source)
    reads: Dict[int, HostRead] = {}
    for node in own:
        if type(node) is not ast.Call:
            continue
        func, value, how = node.func, None, ""
        if type(func) is ast.Attribute and (func.attr in READ_METHODS and not node.args or
                                            func.attr == "to" and to_cpu(node)):
            value, how = func.value, f".{func.attr}()"
        elif type(func) is ast.Name and func.id in READ_BUILTINS and len(node.args) == 1 and qualname(func) is None:
            value, how = node.args[0], f"{func.id}()"
        elif node.args and qualname(func) in _READ_FUNCTIONS:
            value, how = node.args[0], f"{dotted(func)}()"
        position = _derived(value, origin) if value is not None else None
        if position is None or node.lineno > rebound.get(positional[position], node.lineno):
            continue  # after the parameter was given something else
        copies = how in _COPIES
        if position not in reads or (reads[position].copies and not copies):  # a value read says more
            reads[position] = HostRead(position, positional[position], how, node.lineno, copies)
    return tuple(reads[p] for p in sorted(reads))


def _derived(node: Optional[ast.AST], origin: Dict[str, int]) -> Optional[int]:
    """The parameter (position) whose value ``node`` is computed from: the parameter itself, a
    method chain, index or arithmetic on it (``p.argmax(-1)``, ``p[0] > 0.5``, ``torch.sigmoid(p)``),
    not its shape, dtype or length."""
    kind = type(node)
    if kind is ast.Name:
        return origin.get(node.id)
    if kind is ast.Attribute:
        return None if node.attr in _HOST_ATTRIBUTES else _derived(node.value, origin)
    if kind is ast.Subscript:
        return _derived(node.value, origin)
    if kind is ast.Call:
        func = node.func
        if type(func) is ast.Attribute:
            if func.attr in _HOST_ATTRIBUTES or func.attr in READ_METHODS:
                return None
            mine = _derived(func.value, origin)
            if mine is not None:
                return mine
            root = dotted(func.value) or ""
            if root.split(".")[0] in ("torch", "F"):  # torch.argmax(p, 1), F.softmax(p)
                return next((d for d in (_derived(a, origin) for a in node.args) if d is not None), None)
        return None
    if kind is ast.BinOp:
        left = _derived(node.left, origin)
        return left if left is not None else _derived(node.right, origin)
    if kind is ast.Compare:
        return next((d for d in (_derived(x, origin) for x in [node.left] + node.comparators) if d is not None), None)
    if kind is ast.UnaryOp:
        return _derived(node.operand, origin)
    return None


__all__ = ["outgoing_calls", "summarize"]
