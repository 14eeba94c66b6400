"""What an expression holds, as far as the graph rules (XLA3xx) need to know: a tensor that may
live on the XLA device, a tensor on the host, a host value (number, string, numpy array, dtype,
shape), or a module. Part of the shared semantic layer; rules ask :meth:`TensorFacts.kind`.

Kinds come from what produced a value: torch factories and ops, module calls, losses, device
loaders, ``.to(device)``, ``.cpu()``, ``.item()``, Python literals and builtins. A name takes the
kind of its last assignment before the use in the same scope (assignments ordered by where they
end, scopes from :mod:`flake8_xla.analysis.syntax`), or, for a use before any assignment (a loop body reading last
iteration's value), the common kind of all of them. Anything else is unknown (None): the rules
that need a tensor stay silent on unknowns, the ones that need a host value to rule a report
out flag them.
"""
from __future__ import annotations

import ast
import functools
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .flow import FSDP_ANY, FlowFacts, dotted
from .hooks import FrameworkHooks
from .backends import BranchesOffXla
from .calls import ProjectCalls
from .devices import XLA_DEVICE_CALLS, device_type
from .project import DEVICE_LOADER, NO_PROJECT, OTHER_DEVICE, XLA_DEVICE, XLA_MODULE, CallSite
from .syntax import NodeIndex, is_fallback_return, walk

DEVICE = "device"  # a tensor that may be on the XLA device
HOST_TENSOR = "host-tensor"  # a tensor known not to be on the XLA device (the CPU's, or CUDA's)
HOST = "host"  # not a tensor: number, string, numpy array, dtype, shape, torch.device ...
MODULE = "module"  # an nn.Module (calling it gives device tensors)
TENSORS = (DEVICE, HOST_TENSOR)

# tensor methods and attributes whose result is a host value
HOST_METHODS = frozenset({
    "item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr",
    "is_contiguous", "is_floating_point", "is_complex", "get_device", "stride", "storage_offset", "dim_order",
    "__len__", "type", "untyped_storage", "is_pinned", "is_shared",
})
HOST_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf", "grad_fn", "layout", "names",
    "is_sparse", "itemsize", "nbytes", "is_quantized", "is_meta",
})
_MODULE_SELF_METHODS = frozenset({"to", "train", "eval", "cpu", "cuda", "half", "float", "double", "bfloat16",
                                  "requires_grad_", "apply", "share_memory", "to_empty"})
_BOOL_METHODS = frozenset({"eq", "ne", "gt", "lt", "ge", "le", "greater", "less", "logical_and", "logical_or",
                           "logical_xor", "logical_not", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
                           "isclose", "isin", "signbit", "bool"})
_HOST_BUILTINS = frozenset({"float", "int", "bool", "len", "str", "repr", "round", "isinstance", "hash", "id",
                            "type", "format", "range", "callable", "hasattr", "ord", "chr"})
# torch.<name>(...) calls whose result is not a tensor
_TORCH_NOT_TENSORS = frozenset({
    "device", "manual_seed", "seed", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_tensor",
    "is_floating_point", "is_complex", "numel", "save", "load", "compile", "get_default_dtype", "set_default_dtype",
    "set_printoptions", "is_grad_enabled", "get_rng_state", "set_rng_state", "use_deterministic_algorithms",
    "autocast", "typename", "is_storage", "set_num_threads", "get_num_threads", "initial_seed", "result_type",
    "can_cast", "promote_types", "finfo", "iinfo", "broadcast_shapes", "set_float32_matmul_precision",
})
_FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "logspace",
    "eye", "tensor", "as_tensor", "empty_strided", "scalar_tensor", "normal",
})
_HOST_MODULES = ("numpy.", "math.", "time.", "random.", "os.", "sys.", "json.", "re.", "datetime.", "statistics.")
_DEVICE_LOADERS = frozenset({"torch_xla.distributed.parallel_loader.MpDeviceLoader"})
_CPU_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_PASS_THROUGH_ITERATORS = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "builtins.iter"})
_COLLECTIVES = frozenset("torch_xla.core.xla_model." + n for n in (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute"))

Kind = Optional[str]
# an iterable's elements: one kind, or a tuple of kinds for enumerate()/zip()
Element = object


def join(kinds: Iterable[Kind]) -> Kind:
    """The kind of an op over operands of these kinds: a device tensor wins, then a host tensor;
    all host values stay a host value; anything unknown otherwise."""
    kinds = list(kinds)
    if DEVICE in kinds:
        return DEVICE
    if HOST_TENSOR in kinds and all(k in (HOST_TENSOR, HOST) for k in kinds):
        return HOST_TENSOR
    if kinds and all(k == HOST for k in kinds):
        return HOST
    return None


def _same(kinds: Sequence[Kind]) -> Kind:
    return kinds[0] if kinds and all(k == kinds[0] for k in kinds) else None


def _is_cpu(node: Optional[ast.AST]) -> bool:
    """``"cpu"``, ``"cuda:0"``, ``"mps"`` or ``torch.device("cpu")``: a device that is not XLA's."""
    if type(node) is ast.Call and len(node.args) != 1:
        return False  # torch.device("cuda", index): as before, not taken for a host device
    return device_type(node) in ("cpu", "cuda", "mps")


def _is_cuda(node: ast.AST) -> bool:
    return device_type(node) == "cuda"


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    return next((k.value for k in call.keywords if k.arg == name), None)


# A binding is a plain tuple (order, how, a, b), cheap to make by the thousand: ``order`` is
# where it takes effect; ``how`` says what ``a`` and ``b`` are.
_VALUE, _AUGMENTED, _FIXED, _ITERATED, _UNPACKED, _PARAMETER, _ARGUMENT = range(7)
# _VALUE: a = the assigned expression; _AUGMENTED: a = the AugAssign; _FIXED: a = the kind;
# _ITERATED / _UNPACKED: a = the iterable / the unpacked value, b = the target's index path;
# _PARAMETER: a = the forward() def, b = the parameter's name (a tensor if the body uses it as one);
# _ARGUMENT: a = a plain function's def, b = (position, name[, constant default]): what every call of it in the
# file passes, or what calls from other modules pass
Binding = Tuple[Tuple[int, int], int, object, tuple]


class TensorFacts:
    """Kinds of expressions in one file, computed on demand and memoized."""

    @classmethod
    def from_context(cls, ctx) -> "TensorFacts":
        calls = ctx.get(ProjectCalls)
        return cls(ctx.get(NodeIndex), ctx.get(FlowFacts).qualname, ctx.get(FrameworkHooks),
                   calls if calls.project is not NO_PROJECT else None, ctx.get(BranchesOffXla))

    def __init__(self, index: NodeIndex, qualname: Callable[[ast.AST], Optional[str]],
                 hooks: Optional[FrameworkHooks] = None, project: Optional[ProjectCalls] = None,
                 off_xla: Optional[BranchesOffXla] = None) -> None:
        self.index = index
        self.qualname = qualname  # the resolved name of an imported name's use, else None
        self.hooks = hooks  # framework hooks: their batch parameter is device data
        self.project = project  # functions of the project's other modules: what they return
        self.off_xla = off_xla if off_xla is not None else BranchesOffXla(index)
        self._kinds: Dict[int, Kind] = {}
        self._masks: Dict[int, bool] = {}
        self._busy: set = set()
        self._bindings: Dict[Tuple[int, str], List[Binding]] = {}
        self._class_attributes: Dict[Tuple[int, str], List[Binding]] = {}  # (class, "self.x")
        self._method_class: Dict[int, ast.ClassDef] = {}
        self.module_classes: Dict[str, ast.ClassDef] = {}  # local nn.Module subclasses by name
        # binding statements (and defs, for their parameters) by scope, bound on the first lookup there
        self._pending: Dict[int, List[ast.AST]] = {}
        self._evidence: Dict[int, set] = {}  # id(forward) -> its parameters used as tensors
        self._returns_of: Dict[int, List[ast.Return]] = {}  # id(def) -> its own return statements
        self._collect()

    # -- public queries ---------------------------------------------------------------------------
    def kind(self, node: Optional[ast.AST]) -> Kind:
        if node is None:
            return None
        key = id(node)
        if key in self._kinds:
            return self._kinds[key]
        if key in self._busy:
            return None
        self._busy.add(key)
        try:
            value = self._kind(node)
        finally:
            self._busy.discard(key)
        self._kinds[key] = value
        return value

    def is_device(self, node: Optional[ast.AST]) -> bool:
        return self.kind(node) == DEVICE

    def may_be_on_device(self, node: Optional[ast.AST]) -> bool:
        """Not known to live on the host (a CPU tensor or a host value): a device tensor or unknown."""
        return self.kind(node) not in (HOST, HOST_TENSOR)

    def is_mask(self, node: Optional[ast.AST]) -> bool:
        """A boolean tensor that may be on the device: a comparison, ``~m``, ``m & n``, ``.isnan()``..."""
        if node is None or not self.is_device(node):
            return False
        key = id(node)
        if key not in self._masks:
            self._masks[key] = False  # cycles: not a mask
            self._masks[key] = self._mask(node)
        return self._masks[key]

    def _arguments(self, fn: ast.AST, where: Tuple[int, str]) -> List[ast.expr]:
        """What the calls of a function pass for one parameter, when the file shows every call and
        each passes it, else []: a plain function never used other than called by name, or a method
        (the only one of that name in the file) called only as ``self.name(...)``."""
        position, name = where[0], where[1]
        if id(fn) in self._method_class:
            sites = self._self_calls.get(fn.name)
            if not sites or len(self._methods.get(fn.name, ())) != 1 or \
                    self._attribute_loads.get(fn.name) != len(sites):
                return []
            position -= 1  # self
        else:
            sites = self._call_sites.get(fn.name)
            if not sites or self._functions.get(fn.name) != [fn] or fn.name in self._rebound_functions or \
                    self._name_loads.get(fn.name, 0) != len(sites):
                return []
        out = []
        for call in sites:
            value = next((k.value for k in call.keywords if k.arg == name), None)
            if value is None and 0 <= position < len(call.args) and \
                    not any(type(a) is ast.Starred for a in call.args[:position + 1]):
                value = call.args[position]
            if value is None:
                return []
            out.append(value)
        return out

    def _incoming(self, fn: ast.AST, where: Tuple[int, str]) -> List[str]:
        """What the calls from other modules of the project that run on XLA pass for one
        parameter of ``fn`` (a top-level function, or a method of a top-level class)."""
        return [fact for _, fact in self.incoming_sites(fn, where)]

    def incoming_sites(self, fn: ast.AST, where: Tuple[int, str]) -> List[Tuple[CallSite, str]]:
        """(call site, what it passes) for one parameter (position, name) of ``fn``, over the calls from
        other modules of the project that run on XLA."""
        if self.project is None:
            return []
        owner = self._method_class.get(id(fn))
        position, name = where[0], where[1]
        if owner is not None:
            key, position = f"{owner.name}.{fn.name}", position - 1  # self
        else:
            key = fn.name
        sites = self.project.incoming(key)
        if not sites and owner is not None and fn.name == "__init__":
            sites = self.project.incoming(owner.name)  # Trainer(model, device): the constructor's call
        out = []
        for site in sites:
            for given, fact in site.arguments:
                if given == name or (given == position and position >= 0):
                    out.append((site, fact))
        return out

    def _parameter_facts(self, name: ast.expr) -> List[str]:
        """For a name that is a plain function's parameter with no call in this file: what the
        calls from other modules pass for it."""
        bound = self._lookup(name, name.id)
        if len(bound) == 1 and bound[0][1] == _ARGUMENT and not self._arguments(bound[0][2], bound[0][3]):
            return self._incoming(bound[0][2], bound[0][3])
        return []

    def read_before(self, node: ast.expr) -> bool:
        """Whether the value a name holds at ``node`` was already read to the host earlier in its
        scope (``loss.item()`` ... ``f"{loss:.4f}"``) with no assignment between: the tensor holds its
        data then, and reading it again cuts no graph."""
        if type(node) is not ast.Name:
            return False
        bound = self._lookup(node, node.id)
        if not bound:
            return False
        at = (node.lineno, node.col_offset)
        scope = self.index.scope_of(node)
        for earlier in self._value_reads.get(node.id, ()):
            if (earlier.lineno, earlier.col_offset) < at and self.index.scope_of(earlier) is scope and \
                    self._lookup(earlier, node.id) == bound and not self._may_skip(earlier, node):
                return True
        return False

    def _may_skip(self, earlier: ast.AST, later: ast.AST) -> bool:
        """Whether ``earlier`` sits in a branch, loop, handler or ``with`` block that ``later`` is not in
        (so it may not have run when ``later`` does)."""
        def inside(node: ast.AST, block: list) -> bool:
            start, end = (block[0].lineno, block[0].col_offset), (block[-1].end_lineno, block[-1].end_col_offset)
            return start <= (node.lineno, node.col_offset) <= end

        for compound in self.index.of(ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith):
            blocks = [compound.body, getattr(compound, "orelse", []), getattr(compound, "finalbody", [])]
            blocks += [h.body for h in getattr(compound, "handlers", [])]
            if any(b and inside(earlier, b) and not inside(later, b) for b in blocks):
                return True
        for node in self.index.of(ast.IfExp, ast.BoolOp):
            if inside(earlier, [node]) and not inside(later, [node]) and \
                    not (type(node) is ast.IfExp and inside(earlier, [node.test])):
                return True
        return False

    @functools.cached_property
    def _value_reads(self) -> Dict[str, List[ast.Name]]:
        """Names whose value is read to the host: ``x.item()`` / ``x.tolist()``, ``float(x)`` / ``int(x)``."""
        out: Dict[str, List[ast.Name]] = {}
        for call in self.index.of(ast.Call):
            func, subject = call.func, None
            if type(func) is ast.Attribute and func.attr in ("item", "tolist") and not call.args:
                subject = func.value
            elif type(func) is ast.Name and func.id in ("float", "int") and len(call.args) == 1 and \
                    not self._bound_anywhere(func.id):
                subject = call.args[0]
            if type(subject) is ast.Name:
                out.setdefault(subject.id, []).append(subject)
        return out

    def fed_by_caller(self, loop: ast.AST) -> bool:
        """Whether a loop works on data its function (or a function around it) was given: a body that
        reads a parameter which may be a tensor as data (``D(x[counter], y)`` in a GAN's D-step loop),
        not only calls it (``model(...)``). The function is then a step its caller runs once per batch."""
        scope = self.index.scope_of(loop)
        defs = [s for s in [scope] + self.index.enclosing(scope) if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef)]
        names = {a.arg for fn in defs for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        names -= {"self", "cls"}
        if not names:
            return False
        nodes = walk(loop.body)
        called = set()  # model(...), D.optim.step(): parameters used as code, not as data
        for node in nodes:
            if type(node) is ast.Call:
                root = node.func
                while type(root) is ast.Attribute:
                    root = root.value
                called.add(id(root))
        return any(type(node) is ast.Name and node.id in names and type(node.ctx) is ast.Load and
                   id(node) not in called and self.kind(node) not in (HOST, MODULE) for node in nodes)

    def argument_fact(self, node: ast.expr) -> Optional[str]:
        """What a call passes, for the callee in another module: the XLA device, a device loader,
        a device tensor or a module; None for anything else."""
        if self.is_xla_device(node):
            return XLA_DEVICE
        if self._on_cpu(node):
            return OTHER_DEVICE
        if self.loader(node) == DEVICE:
            return DEVICE_LOADER
        kind = self.kind(node)
        return kind if kind in (DEVICE, MODULE) else None

    @functools.cached_property
    def _call_sites(self) -> Dict[str, List[ast.Call]]:
        out: Dict[str, List[ast.Call]] = {}
        for call in self.index.of(ast.Call):
            if type(call.func) is ast.Name:
                out.setdefault(call.func.id, []).append(call)
        return out

    @functools.cached_property
    def _methods(self) -> Dict[str, List[ast.AST]]:
        out: Dict[str, List[ast.AST]] = {}
        for fn in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            if id(fn) in self._method_class:
                out.setdefault(fn.name, []).append(fn)
        return out

    @functools.cached_property
    def _self_calls(self) -> Dict[str, List[ast.Call]]:
        """``self.name(...)`` calls by name."""
        out: Dict[str, List[ast.Call]] = {}
        for call in self.index.of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
                out.setdefault(func.attr, []).append(call)
        return out

    @functools.cached_property
    def _attribute_loads(self) -> Dict[str, int]:
        """How often each method name of the file is read as an attribute (called or passed on)."""
        methods, out = self._methods, {}
        for node in self.index.of(ast.Attribute):
            if node.attr in methods:
                out[node.attr] = out.get(node.attr, 0) + 1
        return out

    @functools.cached_property
    def _name_loads(self) -> Dict[str, int]:
        """How often each of the file's function names is read (called or passed on)."""
        functions, out = self._functions, {}
        for node in self.index.of(ast.Name):
            if node.id in functions and type(node.ctx) is ast.Load:
                out[node.id] = out.get(node.id, 0) + 1
        return out

    def _parameter_values(self, name: ast.Name) -> List[ast.expr]:
        """For a name that is a plain function's parameter: what every call passes for it, else []."""
        bound = self._lookup(name, name.id)
        if len(bound) == 1 and bound[0][1] == _ARGUMENT:
            return self._arguments(bound[0][2], bound[0][3])
        return []

    def assigned_value(self, name: ast.Name) -> Optional[ast.expr]:
        """The expression a name was given by the one plain assignment that reaches it, if any."""
        bound = self._lookup(name, name.id)
        return bound[0][2] if len(bound) == 1 and bound[0][1] == _VALUE else None

    def is_module_class(self, node: ast.AST) -> bool:
        return type(node) is ast.ClassDef and self.module_classes.get(node.name) is node

    # -- collection -------------------------------------------------------------------------------
    def _collect(self) -> None:
        nodes_of = self.index.of
        classes = nodes_of(ast.ClassDef)
        for node in classes:
            if any(self._is_module_base(b) for b in node.bases):
                self.module_classes[node.name] = node
            for stmt in node.body:
                if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef):
                    self._method_class[id(stmt)] = node
        changed = True
        while changed:  # a subclass may come before its base in the file
            changed = False
            for node in classes:
                if node.name not in self.module_classes and \
                        any(type(b) is ast.Name and b.id in self.module_classes for b in node.bases):
                    self.module_classes[node.name] = node
                    changed = True
        scope_of, pending = self.index.scope_of, self._pending
        for node in nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):
            pending.setdefault(id(node), []).append(node)
        for node in nodes_of(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr):
            pending.setdefault(id(scope_of(node)), []).append(node)

    def _bind_scope(self, scope: ast.AST) -> None:
        """Bind the assignments (and parameters) of one scope, the first time it is asked about."""
        statements = self._pending.pop(id(scope), None)
        if statements is None:
            return
        owner = self._method_class.get(id(scope))
        touched = [id(scope)] + ([id(owner)] if owner is not None else [])
        for node in statements:
            if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef):
                self._bind_parameters(node)
            else:
                self._bind_statement(node)
        for table in (self._bindings, self._class_attributes):
            for key, entries in table.items():
                if key[0] in touched:
                    entries.sort(key=_order)

    @functools.cached_property
    def may_have_modules(self) -> bool:
        """Whether anything in the file can be a module (a local nn.Module subclass, a torch.nn
        layer, an FSDP/DDP wrapper, torch.compile): without one, no call runs a model."""
        if self.module_classes:
            return True
        for node in self.index.of(ast.Attribute, ast.Name):
            if type(node) is ast.Attribute and node.attr == "from_pretrained":
                return True
            name = self.qualname(node)
            if name and (name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper() or
                         name in FSDP_ANY or name in ("torch.compile", "torch.nn.parallel.DistributedDataParallel") or
                         _model_factory(name)):
                return True
        return False

    @functools.cached_property
    def may_have_masks(self) -> bool:
        """Whether some subscript could index with a boolean mask, judged from syntax alone: its
        index is a comparison, ``~x``, ``a & b``, a bool-valued call, or a name assigned one."""
        def mask_like(node: ast.AST) -> bool:
            kind = type(node)
            if kind is ast.Compare:
                return not all(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops)
            if kind is ast.UnaryOp:
                return type(node.op) is ast.Invert
            if kind is ast.BinOp:
                return type(node.op) in (ast.BitAnd, ast.BitOr, ast.BitXor)
            if kind is ast.Call:
                func = node.func
                return (type(func) is ast.Attribute and func.attr in _BOOL_METHODS) or \
                    any(k.arg == "dtype" for k in node.keywords)
            return False

        named = {t.id for node in self.index.of(ast.Assign) if mask_like(node.value)
                 for t in node.targets if type(t) is ast.Name}
        return any(type(node.ctx) is ast.Load and (
            mask_like(node.slice) or (type(node.slice) is ast.Name and node.slice.id in named))
            for node in self.index.of(ast.Subscript))

    @functools.cached_property
    def _stored_names(self) -> set:
        """Every simple name the file assigns, defines or imports (a builtin's name may be rebound)."""
        names = {n.id for n in self.index.of(ast.Name) if type(n.ctx) is ast.Store}
        names.update(n.name for n in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        names.update((a.asname or a.name).split(".")[0] for a in self.index.of(ast.alias))
        return names

    @functools.cached_property
    def _opaque(self) -> set:
        """id() of the names a comprehension or lambda binds for itself, where the enclosing code
        uses the same name (only then could a lookup be misled)."""
        stored, out = self._stored_names, set()
        for node in self.index.of(ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.Lambda):
            if type(node) is ast.Lambda:
                names, inner = {a.arg for a in node.args.args + node.args.kwonlyargs} & stored, [node.body]
            else:
                names = {n.id for g in node.generators for n in walk([g.target]) if type(n) is ast.Name} & stored
                inner = [node]
            if names:
                out.update(id(n) for n in walk(inner) if type(n) is ast.Name and n.id in names)
        return out

    @functools.cached_property
    def _backward(self) -> set:
        """(id(scope), name) of every ``name.backward()``: whatever it holds is a device tensor.
        Only autograd's form counts: ``accelerator.backward(loss)`` takes the tensor as an argument,
        and an object with a ``backward`` method is not thereby a tensor."""
        out = set()
        for node in self.index.of(ast.Call):
            if type(node.func) is ast.Attribute and node.func.attr == "backward" and not node.args and \
                    all(k.arg in _BACKWARD_KEYWORDS for k in node.keywords):
                name = dotted(node.func.value)
                if name:
                    out.add((id(self.index.scope_of(node)), name))
        return out

    def _is_module_base(self, base: ast.expr) -> bool:
        qualname = self.qualname(base) or ""
        return qualname.startswith("torch.nn.") or qualname in FSDP_ANY or \
            qualname.endswith(("PreTrainedModel", "LightningModule"))

    def _add(self, scope: ast.AST, name: str, binding: Binding) -> None:
        if name.startswith("self.") and name.count(".") == 1:
            owner = self._method_class.get(id(scope))
            if owner is not None:
                self._class_attributes.setdefault((id(owner), name), []).append(binding)
                return
        self._bindings.setdefault((id(scope), name), []).append(binding)

    def _bind_parameters(self, fn: ast.AST) -> None:
        args = fn.args
        positional = args.posonlyargs + args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        owner = self._method_class.get(id(fn))
        hook = self.hooks.of(fn) if self.hooks is not None else None
        if hook is not None:  # the framework passes the batch (on the device), the model, an index
            for arg in positional + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]:
                given = hook.parameters.get(arg.arg)
                kind = DEVICE if given == "device" else MODULE if given == "module" else HOST if given else None
                if not (owner is not None and arg is positional[0]):
                    self._add(fn, arg.arg, ((0, 0), _FIXED, kind, ()))
            return
        forward = owner is not None and fn.name == "forward" and self.is_module_class(owner)
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        for index, (arg, default) in enumerate(pairs):
            if owner is not None and index == 0 and arg in positional:
                continue  # self / cls
            annotated = self._annotation(arg.annotation)
            if annotated == HOST or (annotated == DEVICE and forward):
                kind: Kind = annotated
            elif type(default) is ast.Constant and default.value is not None and \
                    not (owner is not None and fn.decorator_list):
                # device="cpu": what the calls pass, and the default where they pass nothing
                self._add(fn, arg.arg, ((0, 0), _ARGUMENT, fn, (index if arg in positional else -1, arg.arg, default)))
                continue
            elif type(default) is ast.Constant and default.value is not None:
                kind = HOST
            elif forward and default is None and index == 1 and arg in positional and annotated is None:
                kind = DEVICE  # forward(self, x): the module's input
            elif forward and default is None:
                # forward(self, x, seq_len, train): the others are tensors only where the body uses them as one
                self._add(fn, arg.arg, ((0, 0), _PARAMETER, fn, arg.arg))
                continue
            elif default is None and annotated is None and (owner is None or not fn.decorator_list):
                self._add(fn, arg.arg, ((0, 0), _ARGUMENT, fn, (index if arg in positional else -1, arg.arg)))
                continue
            else:
                kind = None
            # bound even when unknown: the name must not resolve to an outer variable of that name
            self._add(fn, arg.arg, ((0, 0), _FIXED, kind, ()))
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                self._add(fn, arg.arg, ((0, 0), _FIXED, None, ()))

    def _annotation(self, node: Optional[ast.expr]) -> Kind:
        """HOST for ``int``/``float``/``bool``/``str``, DEVICE for ``torch.Tensor``, else None."""
        if node is None:
            return None
        if type(node) is ast.Name and node.id in ("int", "float", "bool", "str") and not self._bound_anywhere(node.id):
            return HOST
        return DEVICE if self.qualname(node) in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor") else None

    def _used_as_tensors(self, fn: ast.AST) -> set:
        """Parameters of ``fn`` that its own body uses as tensors: the receiver of a method only
        tensors have (``x.masked_fill(...)``), or the input (first argument) of a torch op or a
        module call (``torch.relu(x)``, ``self.proj(x)``); a size passed to a factory does not count."""
        key = id(fn)
        found = self._evidence.get(key)
        if found is not None:
            return found
        found = self._evidence[key] = set()
        args = fn.args
        names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        for node in walk(fn.body, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            if type(node) is not ast.Call:
                continue
            func = node.func
            if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id in names and \
                    func.attr in _TENSOR_ONLY_METHODS:
                found.add(func.value.id)
            if node.args:
                first = node.args[0]
                items = first.elts if type(first) in (ast.List, ast.Tuple) else [first]
                inputs = {i.id for i in items if type(i) is ast.Name and i.id in names} - found
                if inputs and self._takes_tensors(node):
                    found.update(inputs)
        return found

    def _takes_tensors(self, call: ast.Call) -> bool:
        """A torch op (not a factory, not an API returning Python values) or a module call."""
        qualname = self._callee(call)
        if qualname is None:
            return self.kind(call.func) == MODULE
        parts = qualname.split(".")
        if parts[0] != "torch" or len(parts) < 2:
            return False
        if parts[1] == "nn":
            return len(parts) == 4 and parts[2] == "functional"
        leaf = parts[-1]
        return leaf[:1].islower() and leaf not in _FACTORIES and leaf not in _TORCH_NOT_TENSORS and \
            not _returns_python_value(leaf) and (len(parts) == 2 or parts[1] in ("linalg", "fft", "special"))

    def _bind_statement(self, stmt: ast.AST) -> None:
        if id(stmt) in self.off_xla.nodes:
            return  # what a branch that never runs on XLA assigns is not what the name holds there
        scope = self.index.scope_of(stmt)
        kind = type(stmt)
        # a binding takes effect where its statement (a loop: its target) ends
        order = _end(stmt.target) if kind in (ast.For, ast.AsyncFor) else _end(stmt)
        if kind is ast.Assign:
            for target in stmt.targets:
                self._bind_target(scope, order, target, stmt.value)
        elif kind is ast.AnnAssign:
            if stmt.value is not None:
                self._bind_target(scope, order, stmt.target, stmt.value)
        elif kind is ast.NamedExpr:
            self._bind_target(scope, order, stmt.target, stmt.value)
        elif kind is ast.AugAssign:
            name = dotted(stmt.target)
            if name:
                self._add(scope, name, (order, _AUGMENTED, stmt, ()))
        else:  # for loops
            self._bind_element(scope, order, stmt.target, _ITERATED, stmt.iter, ())

    def _bind_target(self, scope: ast.AST, order: Tuple[int, int], target: ast.expr, value: ast.expr) -> None:
        if type(target) in (ast.Tuple, ast.List):
            if type(value) in (ast.Tuple, ast.List) and len(value.elts) == len(target.elts) and \
                    not any(type(e) is ast.Starred for e in target.elts + value.elts):
                for sub, sub_value in zip(target.elts, value.elts):
                    self._bind_target(scope, order, sub, sub_value)
            else:
                self._bind_element(scope, order, target, _UNPACKED, value, ())
            return
        name = dotted(target)
        if name:
            self._add(scope, name, (order, _VALUE, value, ()))

    def _bind_element(self, scope: ast.AST, order: Tuple[int, int], target: ast.expr, how: int,
                      source: ast.expr, path: tuple) -> None:
        """Bind a loop or unpacking target (``path``: where it sits in a nested target tuple)."""
        if type(target) in (ast.Tuple, ast.List):
            for index, sub in enumerate(target.elts):
                self._bind_element(scope, order, sub, how, source, path + (-1 if type(sub) is ast.Starred else index,))
            return
        name = dotted(target)
        if name:
            self._add(scope, name, (order, how, source, path))

    def _binding_kind(self, binding: Binding) -> Kind:
        _, how, a, path = binding
        if how == _VALUE:
            return self.kind(a)
        if how == _FIXED:
            return a
        if how == _PARAMETER:
            return DEVICE if path in self._used_as_tensors(a) else None
        if how == _ARGUMENT:
            values = self._arguments(a, path)
            if values:
                return _same([self.kind(v) for v in values])
            facts = self._incoming(a, path)
            # what the XLA code of other modules passes: on a TPU that is what the parameter holds
            found = DEVICE if DEVICE in facts else MODULE if MODULE in facts or XLA_MODULE in facts else None
            return found if found is not None or len(path) < 3 else HOST  # the constant default
        if how == _AUGMENTED:
            return join([self.kind(a.target), self.kind(a.value)])
        whole = self._element(a) if how == _ITERATED else self._unpacked(a)
        for index in path:
            if type(whole) is tuple:
                whole = whole[index] if 0 <= index < len(whole) else None
            else:
                whole = whole if whole in TENSORS else None
        return _flat(whole)

    def _binding_mask(self, binding: Binding) -> bool:
        _, how, a, _ = binding
        if how == _VALUE:
            return self.is_mask(a)
        return how == _AUGMENTED and type(a.op) in (ast.BitAnd, ast.BitOr) and self.is_mask(a.target)

    def _unpacked(self, value: ast.expr) -> Element:
        kind = self.kind(value)
        return kind if kind in TENSORS else None

    def _element(self, iterable: ast.expr) -> Element:
        """What iterating ``iterable`` yields."""
        if type(iterable) is ast.Name:
            value = self.assigned_value(iterable)  # it = iter(loader)
            if type(value) is ast.Call and self._callee(value) == "builtins.iter":
                iterable = value
        if type(iterable) is ast.Call:
            qualname = self._callee(iterable)
            args = iterable.args
            if qualname == "builtins.enumerate" and args:
                return (HOST, self._element(args[0]))
            if qualname == "builtins.zip":
                return tuple(self._element(a) for a in args)
            if qualname == "builtins.range":
                return HOST
            if qualname in _PASS_THROUGH_ITERATORS and args:
                return self._element(args[0])
            if type(iterable.func) is ast.Attribute and iterable.func.attr == "per_device_loader":
                return DEVICE
            if type(iterable.func) is ast.Attribute and iterable.func.attr in ("items", "values") and not args:
                # for name, logit in {"a": x.cpu(), ...}.items(): the dict's values
                owner = iterable.func.value
                literal = self.assigned_value(owner) if type(owner) is ast.Name else owner
                if type(literal) is ast.Dict and literal.values:
                    values = _same([self.kind(v) for v in literal.values])
                    return (HOST, values) if iterable.func.attr == "items" else values
        source = self.loader(iterable)
        if source is not None:
            return source
        kind = self.kind(iterable)
        return kind if kind in TENSORS else (HOST if kind == HOST else None)

    def yields_device(self, iterable: ast.expr) -> bool:
        """Whether a loop over ``iterable`` draws device batches from a device loader
        (MpDeviceLoader, per_device_loader), also under enumerate()/zip()/tqdm()."""
        while type(iterable) is ast.Call and iterable.args:
            qualname = self._callee(iterable)
            if qualname == "builtins.zip":
                return any(self.yields_device(a) for a in iterable.args)
            if qualname != "builtins.enumerate" and qualname not in _PASS_THROUGH_ITERATORS:
                break
            iterable = iterable.args[0]
        return self.loader(iterable) == DEVICE

    def loader(self, expr: ast.expr) -> Kind:
        """DEVICE for an MpDeviceLoader / per_device_loader, HOST_TENSOR for a plain DataLoader
        (its batches are on the CPU), else None; follows one plain assignment, or a parameter to what
        every call passes (``test_loop_fn(para_loader.per_device_loader(device))``)."""
        if type(expr) is ast.Name:
            if ("loader", id(expr)) in self._busy:
                return None  # a recursive function passing its parameter on
            self._busy.add(("loader", id(expr)))
            try:
                values = self._parameter_values(expr)
                if values:
                    return _same([self.loader(v) for v in values])
                if DEVICE_LOADER in self._parameter_facts(expr):
                    return DEVICE
            finally:
                self._busy.discard(("loader", id(expr)))
        if type(expr) is ast.Name:
            # `tk0 = para_loader.per_device_loader(d)` under `if use_tpu:`, `tk0 = tqdm(loader)` else:
            # on XLA the loop draws from the device loader
            self._lookup(expr, expr.id)  # binds the scope
            values = [b[2] for b in self._bindings.get((id(self.index.scope_of(expr)), expr.id), ()) if b[1] == _VALUE]
            if len(values) > 1 and any(type(v) is ast.Call and self.loader(v) == DEVICE for v in values):
                return DEVICE
        value = (self.assigned_value(expr) or expr) if type(expr) is ast.Name else expr
        if type(value) is not ast.Call:
            return None
        qualname = self._callee(value)
        if qualname in _DEVICE_LOADERS or \
                (type(value.func) is ast.Attribute and value.func.attr == "per_device_loader"):
            return DEVICE
        if qualname in _CPU_LOADERS:
            return HOST_TENSOR
        fn = self.local_callee(value)
        if fn is not None and id(fn) not in self._busy:
            # a helper of this file that builds the loader: ``loader = self._get_train_dataloader()``
            self._busy.add(id(fn))
            try:
                values = [n.value for n in self._return_statements(fn)]
                return _same([self.loader(v) if v is not None else None for v in values]) if values else None
            finally:
                self._busy.discard(id(fn))
        return None

    def local_callee(self, call: ast.Call) -> Optional[ast.AST]:
        """The file's one function (``f(...)``) or method (``self.m(...)``) a call runs, if unique."""
        func = call.func
        if type(func) is ast.Name and self.qualname(func) is None:
            defs = self._functions.get(func.id, ())
            return defs[0] if len(defs) == 1 and func.id not in self._rebound_functions else None
        if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
            defs = self._methods.get(func.attr, ())
            return defs[0] if len(defs) == 1 else None
        return None

    # -- names ------------------------------------------------------------------------------------
    def _callee(self, call: ast.Call) -> Optional[str]:
        qualname = self.qualname(call.func)
        if qualname is None and type(call.func) is ast.Name and call.func.id in _BUILTIN_NAMES and \
                not self._bound_anywhere(call.func.id):
            return "builtins." + call.func.id
        return qualname

    def _bound_anywhere(self, name: str) -> bool:
        return name in self._stored_names

    def _lookup(self, node: ast.expr, name: str) -> List[Binding]:
        """The assignments of a (dotted) name that may reach ``node``: the last one before it in
        its scope, else all of them (a loop body reading the previous iteration's value), else the
        enclosing scopes' (a closure), else a ``self.x`` set in any method of the class."""
        if id(node) in self._opaque:
            return []
        scope = self.index.scope_of(node)
        self._bind_scope(scope)
        entries = self._bindings.get((id(scope), name))
        if entries:
            at = (node.lineno, node.col_offset)
            before = [b for b in entries if b[0] <= at]
            return before[-1:] or entries
        if name.startswith("self."):
            owner = self._method_class.get(id(scope))
            if owner is None:
                return []
            for method in owner.body:
                self._bind_scope(method)
            return self._class_attributes.get((id(owner), name), [])
        for outer in self.index.enclosing(scope):
            self._bind_scope(outer)
            entries = self._bindings.get((id(outer), name))
            if entries:
                return entries
        return []

    def _name(self, node: ast.expr, name: str) -> Tuple[Kind, bool]:
        """Kind and mask-ness of a (dotted) name where ``node`` uses it."""
        bound = self._lookup(node, name)
        kind = _same([self._binding_kind(b) for b in bound]) if bound else None
        if kind is None and self._backward and \
                (id(self.index.scope_of(node)), name) in self._backward:
            return DEVICE, False
        return kind, bool(bound) and all(self._binding_mask(b) for b in bound)

    # -- kinds ------------------------------------------------------------------------------------
    def _kind(self, node: ast.AST) -> Kind:
        kind = type(node)
        if kind is ast.Name:
            if self.qualname(node) is not None:
                return HOST  # an imported module, function or constant
            return self._name(node, node.id)[0]
        if kind is ast.Attribute:
            return self._attribute(node)
        if kind is ast.Call:
            return self._call(node)
        if kind is ast.BinOp:
            return join([self.kind(node.left), self.kind(node.right)])
        if kind is ast.Compare:
            if all(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops):
                return HOST
            return join([self.kind(node.left)] + [self.kind(c) for c in node.comparators])
        if kind is ast.UnaryOp:
            return HOST if type(node.op) is ast.Not else self.kind(node.operand)
        if kind is ast.Subscript:
            base = self.kind(node.value)
            return base if base in (DEVICE, HOST_TENSOR, HOST) else None
        if kind in (ast.Constant, ast.JoinedStr):
            return HOST
        if kind is ast.IfExp:
            return _same([self.kind(node.body), self.kind(node.orelse)])
        if kind is ast.BoolOp:
            return _same([self.kind(v) for v in node.values])
        if kind is ast.NamedExpr:
            return self.kind(node.value)
        return None

    def _attribute(self, node: ast.Attribute) -> Kind:
        if self.qualname(node) is not None:
            return HOST  # torch.float32, xm.REDUCE_SUM ...
        name = dotted(node)
        if name and name.startswith("self.") and name.count(".") == 1:
            found = self._name(node, name)[0]
            if found is not None:
                return found
        base = self.kind(node.value)
        if node.attr in HOST_ATTRIBUTES and base != MODULE:
            return HOST
        if base in (DEVICE, HOST_TENSOR):
            return base  # .T, .grad, .data, or a field of a model's output (outputs.loss)
        return HOST if base == HOST else None

    def _call(self, call: ast.Call) -> Kind:
        qualname = self._callee(call)
        func = call.func
        if type(func) is ast.Attribute and func.attr == "from_pretrained" and \
                (dotted(func.value) or "").rsplit(".", 1)[-1][:1].isupper():
            return MODULE  # AutoModelForCausalLM.from_pretrained(...): a Hugging Face model
        if qualname is not None:
            return self._api_call(call, qualname) or self._foreign(call)
        if type(func) is ast.Name:
            if func.id in self.module_classes:
                return MODULE
            if func.id == "self" and self.is_module_class(self._method_class.get(id(self.index.scope_of(call)))):
                return DEVICE  # self(x) in a method of a module: its forward()
            if self.kind(func) == MODULE:
                return DEVICE
            return self._returns(func.id) or self._foreign(call)
        if type(func) is not ast.Attribute:
            return None
        if type(func.value) is ast.Name and func.value.id == "self" and self.kind(func) == MODULE:
            return DEVICE  # self.model(x)
        receiver, method = self.kind(func.value), func.attr
        if receiver == MODULE:
            if method in _MODULE_SELF_METHODS:
                return MODULE
            return DEVICE if method == "forward" else None
        if method in HOST_METHODS:
            return HOST
        if method in ("cpu", "cuda") or (method == "to" and call.args and self._on_cpu(call.args[0])):
            return HOST_TENSOR  # whatever it was (a tensor, or a module moved away), not on the XLA device
        if receiver == HOST:
            return HOST
        if receiver is None and method == "to" and call.args and self.is_xla_device(call.args[0]):
            return DEVICE  # batch["ids"].to(xm.xla_device()): whatever it was, now on the device
        if receiver not in TENSORS:
            return None
        if method == "to":
            where = call.args[0] if call.args else _keyword(call, "device")
            if where is None or self._is_dtype(where):
                return receiver
            return HOST_TENSOR if self._on_cpu(where) else DEVICE
        if method == "backward":
            return None
        return receiver

    def _foreign(self, call: ast.Call) -> Kind:
        """A device tensor from a function of another module of the project that returns one."""
        if self.project is None:
            return None
        summary = self.project.callee(call, self.assigned_value)
        return DEVICE if summary is not None and summary.returns_device else None

    @functools.cached_property
    def _functions(self) -> Dict[str, List[ast.AST]]:
        out: Dict[str, List[ast.AST]] = {}
        for fn in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            if id(fn) not in self._method_class:
                out.setdefault(fn.name, []).append(fn)
        return out

    def _return_statements(self, fn: ast.AST) -> List[ast.Return]:
        """The ``return`` statements of a def's own body (not of the defs, lambdas and classes in it), in
        walk order: found once per def (a helper is asked about at every call of it)."""
        found = self._returns_of.get(id(fn))
        if found is None:
            nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
            found = self._returns_of[id(fn)] = [n for n in walk(fn.body, nested) if type(n) is ast.Return]
        return found

    def _returns(self, name: str) -> Kind:
        """What a call of the file's one function of that name returns: the common kind of its
        ``return`` values (``def compute_loss(...): return F.cross_entropy(...)``)."""
        defs = self._functions.get(name, ())
        if len(defs) != 1 or name in self._rebound_functions:
            return None
        key = id(defs[0])
        if key in self._busy:
            return None  # recursion
        self._busy.add(key)
        try:
            values = [node.value for node in self._return_statements(defs[0])]
            return _same([self.kind(v) if v is not None else HOST for v in values]) if values else None
        finally:
            self._busy.discard(key)

    @functools.cached_property
    def _rebound_functions(self) -> set:
        """Function names also assigned as variables (``step = torch_xla.compile(step)``)."""
        return {n.id for n in self.index.of(ast.Name) if type(n.ctx) is ast.Store and n.id in self._functions}

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
        qualname = self._callee(node)
        if qualname in XLA_DEVICE_CALLS:
            return True
        if qualname == "torch.device" and bool(node.args) and type(node.args[0]) is ast.Constant:
            return str(node.args[0].value).split(":")[0] == "xla"
        return self.helper_device(node) is not None

    def helper_device(self, call: ast.Call) -> Optional[str]:
        """For a call of a helper that returns the XLA device (``device = get_device()``, in this file
        or another module of the project): "all" when every return that can run on XLA gives it, "any"
        when one does (a helper that picks the backend), else None."""
        fn = self.local_callee(call)
        if fn is not None:
            return self.returns_xla_device(fn)
        if self.project is not None:
            summary = self.project.callee(call, self.assigned_value)
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
            values = [n.value for n in self._return_statements(fn) if
                      id(n) not in self.off_xla.nodes and not is_fallback_return(n.value)]
            found = [self.is_xla_device(v) for v in values]
        finally:
            self._busy.discard(key)
        if not found or not any(found):
            return None
        return "all" if all(found) else "any"

    def _named_xla_device(self, node: ast.expr, name: str) -> bool:
        bound = self._lookup(node, name)
        entries = self._bindings.get((id(self.index.scope_of(node)), name))
        if entries and bound:  # every assignment before the use, not only the last: branches on a flag
            at = (node.lineno, node.col_offset)
            bound = [b for b in entries if b[0] <= at] or bound
        for binding in bound:
            how, value = binding[1], binding[2]
            if how == _VALUE and self.is_xla_device(value):
                return True
            if how == _ARGUMENT:
                values = self._arguments(value, binding[3])
                if values and all(self.is_xla_device(v) for v in values):
                    return True
                if not values and XLA_DEVICE in self._incoming(value, binding[3]):
                    return True
        return False

    def xla_device_value(self, node: Optional[ast.expr]) -> Optional[ast.expr]:
        """The expression that makes ``node`` the XLA device for sure: ``node`` itself when it is
        ``torch_xla.device()`` / ``xm.xla_device()`` / ``torch.device("xla")`` / ``"xla:0"``, or the
        value of the one plain assignment of a name that gave it one, or, for a plain function's
        parameter, what every call of it in the file passes when that is the XLA device; else None
        (a conditional expression such as ``torch_xla.device() if tpu else "cuda"`` included)."""
        if type(node) is ast.Name:
            value = self.assigned_value(node)
            if value is None and ("xla-device", id(node)) not in self._busy:
                self._busy.add(("xla-device", id(node)))
                try:
                    found = [self.xla_device_value(v) for v in self._parameter_values(node)]
                    facts = self._parameter_facts(node) if not found else []
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

    def _on_cpu(self, node: ast.expr) -> bool:
        """``"cpu"``, ``torch.device("cuda")``, or a name given one of those and never the XLA device."""
        if type(node) is ast.Name:
            if self.is_xla_device(node):
                return False
            node = self.assigned_value(node) or node
        return _is_cpu(node)

    def moves_to_cuda(self, call: ast.Call) -> bool:
        """``x.cuda()`` or ``x.to("cuda")`` / ``x.to(torch.device("cuda:0"))``, also through a name that
        holds such a device and never the XLA one: CUDA code."""
        func = call.func
        if type(func) is not ast.Attribute or self.qualname(func) is not None:
            return False
        if func.attr == "cuda":
            return True
        where = call.args[0] if call.args else _keyword(call, "device")
        if func.attr != "to" or where is None:
            return False
        if type(where) is ast.Name and not self.is_xla_device(where):
            where = self.assigned_value(where) or where  # ``device = torch.device("cuda")`` earlier
        return _is_cuda(where)

    def _is_dtype(self, node: ast.expr) -> bool:
        qualname = self.qualname(node) or ""
        return qualname.startswith("torch.") and qualname.count(".") == 1 and qualname[6:] in _DTYPES

    def _api_call(self, call: ast.Call, qualname: str) -> Kind:
        args = [a for a in call.args if type(a) is not ast.Starred]
        if qualname.startswith("builtins."):
            name = qualname[9:]
            if name in _HOST_BUILTINS:
                return HOST
            if name in ("abs", "min", "max", "sum"):
                return join(self.kind(a) for a in args) if args else None
            if name == "next" and args:
                return _flat(self._element(args[0]))  # a batch drawn from an iterator
            return None
        if qualname in FSDP_ANY or qualname == "torch.nn.parallel.DistributedDataParallel" or _model_factory(qualname):
            return MODULE
        leaf = qualname.rsplit(".", 1)[-1]
        if qualname.startswith(_HOST_MODULES) or _returns_python_value(leaf) or \
                (qualname.startswith(("torch_xla.runtime.", "torch.distributed.", "torch.cuda.")) and
                 leaf[:1].islower()):
            return HOST
        if qualname in _COLLECTIVES:
            return DEVICE
        if qualname == "torch_xla.core.xla_model.mesh_reduce":
            return HOST
        if not qualname.startswith("torch."):
            return None
        parts = qualname.split(".")
        if parts[1] == "nn":
            if len(parts) > 2 and parts[2] == "functional":
                return self._operands(call)
            if parts[-1] == "Parameter":
                return DEVICE if args and self.kind(args[0]) == DEVICE else None
            return MODULE if parts[-1][:1].isupper() and len(parts) == 3 else None
        if qualname == "torch.compile":
            return MODULE if args and self.kind(args[0]) == MODULE else None
        if len(parts) == 3 and parts[1] in ("linalg", "fft", "special"):
            return self._operands(call)
        if len(parts) != 2 or not parts[1][:1].islower() or parts[1] in _TORCH_NOT_TENSORS:
            return None
        name = parts[1]
        if name == "normal" and args and self.kind(args[0]) == DEVICE:
            return DEVICE  # torch.normal(mean_tensor, std): samples where its mean lives
        if name in _FACTORIES or name == "from_numpy":
            device = _keyword(call, "device")
            if device is None:
                return HOST_TENSOR
            return HOST_TENSOR if self._on_cpu(device) else DEVICE
        if name.endswith("_like"):
            device = _keyword(call, "device")
            if device is not None:
                return HOST_TENSOR if self._on_cpu(device) else DEVICE
            return self.kind(args[0]) if args else None
        return self._operands(call)

    def _operands(self, call: ast.Call) -> Kind:
        """The kind of a torch op's result: a tensor, on the CPU only when every tensor argument
        (lists of tensors included) is known to be there."""
        kinds = []
        for arg in list(call.args) + [k.value for k in call.keywords]:
            items = arg.elts if type(arg) in (ast.List, ast.Tuple) else [arg]
            kinds.extend(self.kind(i) for i in items)
        if HOST_TENSOR in kinds and all(k in (HOST_TENSOR, HOST) for k in kinds):
            return HOST_TENSOR
        return DEVICE

    # -- masks ------------------------------------------------------------------------------------
    def _mask(self, node: ast.AST) -> bool:
        kind = type(node)
        if kind is ast.Compare:
            return not all(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops)
        if kind is ast.UnaryOp:
            return type(node.op) is ast.Invert and self.is_mask(node.operand)
        if kind is ast.BinOp:
            return type(node.op) in (ast.BitAnd, ast.BitOr, ast.BitXor) and \
                (self.is_mask(node.left) or self.is_mask(node.right))
        if kind is ast.Name or (kind is ast.Attribute and (dotted(node) or "").startswith("self.")):
            return self._name(node, dotted(node))[1]
        if kind is ast.Call:
            qualname = self.qualname(node.func) or ""
            if qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1] in _BOOL_METHODS:
                return True
            func = node.func
            if type(func) is ast.Attribute and qualname == "":
                if func.attr in _BOOL_METHODS:
                    return True
                if func.attr == "to" and node.args and self.qualname(node.args[0]) == "torch.bool":
                    return True
            dtype = _keyword(node, "dtype")
            return dtype is not None and self.qualname(dtype) == "torch.bool"
        return False


def _order(binding: Binding) -> Tuple[int, int]:
    return binding[0]


def _end(node: ast.AST) -> Tuple[int, int]:
    return node.end_lineno, node.end_col_offset


def _flat(element: Element) -> Kind:
    return None if type(element) is tuple else element


_TENSOR_ONLY_METHODS = frozenset({
    "unsqueeze", "masked_fill", "masked_fill_", "permute", "contiguous", "softmax", "log_softmax", "type_as",
    "view_as", "expand", "expand_as", "size", "dim", "new_zeros", "new_ones", "new_full", "new_empty", "chunk",
    "unbind", "narrow", "index_select", "masked_select", "float", "half", "bfloat16", "detach", "bmm", "matmul",
    "sigmoid", "relu", "unflatten", "baddbmm", "addmm",
})
# Python values from a call, whatever the module: predicates, ranks, counts, devices
_PYTHON_VALUE_NAMES = frozenset({
    "device_count", "current_device", "world_size", "xrt_world_size", "global_ordinal", "local_ordinal",
    "global_runtime_device_count", "global_device_count", "local_device_count", "addressable_device_count",
    "addressable_runtime_device_count", "process_index", "process_count", "host_index", "xla_device", "device",
    "xla_real_devices", "xla_device_hw", "use_spmd", "get_ordinal", "get_local_ordinal",
})


def _model_factory(qualname: str) -> bool:
    """``torchvision.models.resnet50``, ``timm.create_model``: calls that build an nn.Module."""
    return (qualname.startswith("torchvision.models.") and qualname.count(".") == 2 and
            qualname.rsplit(".", 1)[-1][:1].islower() and not qualname.endswith(("get_weight", "list_models"))) or \
        qualname == "timm.create_model"


def _returns_python_value(leaf: str) -> bool:
    """``is_available``, ``is_initialized``, ``has_...``, ``get_rank``, ``world_size``: functions
    whose result is a Python value (a bool, an int, a device, a dtype)."""
    return leaf.startswith(("is_", "has_", "get_")) or leaf in _PYTHON_VALUE_NAMES


_BACKWARD_KEYWORDS = frozenset({"gradient", "retain_graph", "create_graph", "inputs"})
_BUILTIN_NAMES = frozenset(_HOST_BUILTINS | {"abs", "min", "max", "sum", "enumerate", "zip", "iter", "next"})
_DTYPES = frozenset({
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "int8", "int16", "short", "int32",
    "int", "int64", "long", "uint8", "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2",
})
