"""What an expression holds, as far as the graph rules (XLA3xx) need to know: one of the kinds of
:mod:`flake8_xla.analysis.values`. Part of the shared semantic layer; rules ask :meth:`TensorFacts.kind`.

Kinds come from what produced a value: torch factories and ops, module calls, losses, device
loaders, ``.to(device)``, ``.cpu()``, ``.item()``, Python literals and builtins. A name takes the
common kind of the assignments that reach the use (:mod:`flake8_xla.analysis.bindings`), a parameter
also what the calls pass (:mod:`flake8_xla.analysis.arguments`). What a loop over a loader or an
iterable draws is worked out here too: it and the kinds of expressions ask each other, and cut
their cycles through the same record of what is being worked out.
"""
from __future__ import annotations

import ast
import functools
from typing import Dict, List, Optional, Tuple

from .arguments import CallArguments
from .bindings import ARGUMENT, AUGMENTED, FIXED, ITERATED, PARAMETER, VALUE, Binding, Bindings
from .device_values import DeviceValues
from .project import DEVICE_LOADER, XLA_MODULE
from .syntax import dotted, keyword_value, walk
from .values import (DEVICE, HOST, HOST_ATTRIBUTES, HOST_BUILTINS, HOST_METHODS, HOST_TENSOR, MODULE, TENSORS,
                     Kind, join, same)
from .wraps import FSDP_ANY

_MODULE_SELF_METHODS = frozenset({"to", "train", "eval", "cpu", "cuda", "half", "float", "double", "bfloat16",
                                  "requires_grad_", "apply", "share_memory", "to_empty"})
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

# an iterable's elements: one kind, or a tuple of kinds for enumerate()/zip()
Element = object


class TensorFacts:
    """Kinds of expressions in one file, computed on demand and memoized."""

    @classmethod
    def from_context(cls, ctx) -> "TensorFacts":
        return cls(ctx.get(Bindings), ctx.get(CallArguments), ctx.get(DeviceValues))

    def __init__(self, bindings: Bindings, arguments: CallArguments, devices: DeviceValues) -> None:
        self.bindings = bindings
        self.arguments = arguments
        self.devices = devices
        self.index = bindings.index
        self.qualname = bindings.qualname  # the resolved name of an imported name's use, else None
        self.project = arguments.project  # functions of the project's other modules: what they return
        self.assigned_value = bindings.assigned_value
        self.module_classes = bindings.module_classes  # local nn.Module subclasses by name
        self._kinds: Dict[int, Kind] = {}
        self._busy: set = set()
        self._evidence: Dict[int, set] = {}  # id(forward) -> its parameters used as tensors

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

    def named(self, node: ast.expr, name: str) -> Tuple[Kind, List[Binding]]:
        """Kind of a (dotted) name where ``node`` uses it, and the bindings that give it (none for a
        name known a device tensor from its ``.backward()`` alone)."""
        bound = self.bindings.lookup(node, name)
        kind = same([self._binding_kind(b) for b in bound]) if bound else None
        if kind is None and self._backward and \
                (id(self.index.scope_of(node)), name) in self._backward:
            return DEVICE, []
        return kind, bound

    def read_before(self, node: ast.expr) -> bool:
        """Whether the value a name holds at ``node`` was already read to the host earlier in its
        scope (``loss.item()`` ... ``f"{loss:.4f}"``) with no assignment between: the tensor holds its
        data then, and reading it again cuts no graph."""
        if type(node) is not ast.Name:
            return False
        lookup = self.bindings.lookup
        bound = lookup(node, node.id)
        if not bound:
            return False
        at = (node.lineno, node.col_offset)
        scope = self.index.scope_of(node)
        for earlier in self._value_reads.get(node.id, ()):
            if (earlier.lineno, earlier.col_offset) < at and self.index.scope_of(earlier) is scope and \
                    lookup(earlier, node.id) == bound and not self._may_skip(earlier, node):
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
                    not self.bindings.bound_anywhere(func.id):
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

    # -- loaders and iteration --------------------------------------------------------------------
    def yields_device(self, iterable: ast.expr) -> bool:
        """Whether a loop over ``iterable`` draws device batches from a device loader
        (MpDeviceLoader, per_device_loader), also under enumerate()/zip()/tqdm()."""
        while type(iterable) is ast.Call and iterable.args:
            qualname = self.bindings.callee(iterable)
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
        bindings = self.bindings
        if type(expr) is ast.Name:
            if ("loader", id(expr)) in self._busy:
                return None  # a recursive function passing its parameter on
            self._busy.add(("loader", id(expr)))
            try:
                values = self.arguments.parameter_values(expr)
                if values:
                    return same([self.loader(v) for v in values])
                if DEVICE_LOADER in self.arguments.parameter_facts(expr):
                    return DEVICE
            finally:
                self._busy.discard(("loader", id(expr)))
        if type(expr) is ast.Name:
            # `tk0 = para_loader.per_device_loader(d)` under `if use_tpu:`, `tk0 = tqdm(loader)` else:
            # on XLA the loop draws from the device loader
            bindings.lookup(expr, expr.id)  # binds the scope
            values = [b[2] for b in bindings.in_scope(expr, expr.id) if b[1] == VALUE]
            if len(values) > 1 and any(type(v) is ast.Call and self.loader(v) == DEVICE for v in values):
                return DEVICE
        value = (self.assigned_value(expr) or expr) if type(expr) is ast.Name else expr
        if type(value) is not ast.Call:
            return None
        qualname = bindings.callee(value)
        if qualname in _DEVICE_LOADERS or \
                (type(value.func) is ast.Attribute and value.func.attr == "per_device_loader"):
            return DEVICE
        if qualname in _CPU_LOADERS:
            return HOST_TENSOR
        fn = bindings.local_callee(value)
        if fn is not None and id(fn) not in self._busy:
            # a helper of this file that builds the loader: ``loader = self._get_train_dataloader()``
            self._busy.add(id(fn))
            try:
                values = [n.value for n in bindings.return_statements(fn)]
                return same([self.loader(v) if v is not None else None for v in values]) if values else None
            finally:
                self._busy.discard(id(fn))
        return None

    def _element(self, iterable: ast.expr) -> Element:
        """What iterating ``iterable`` yields."""
        callee = self.bindings.callee
        if type(iterable) is ast.Name:
            value = self.assigned_value(iterable)  # it = iter(loader)
            if type(value) is ast.Call and callee(value) == "builtins.iter":
                iterable = value
        if type(iterable) is ast.Call:
            qualname = callee(iterable)
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
                    values = same([self.kind(v) for v in literal.values])
                    return (HOST, values) if iterable.func.attr == "items" else values
        source = self.loader(iterable)
        if source is not None:
            return source
        kind = self.kind(iterable)
        return kind if kind in TENSORS else (HOST if kind == HOST else None)

    def _unpacked(self, value: ast.expr) -> Element:
        kind = self.kind(value)
        return kind if kind in TENSORS else None

    # -- bindings ---------------------------------------------------------------------------------
    def _binding_kind(self, binding: Binding) -> Kind:
        _, how, a, path = binding
        if how == VALUE:
            return self.kind(a)
        if how == FIXED:
            return a
        if how == PARAMETER:
            return DEVICE if path in self._used_as_tensors(a) else None
        if how == ARGUMENT:
            values = self.arguments.passed(a, path)
            if values:
                return same([self.kind(v) for v in values])
            facts = self.arguments.incoming(a, path)
            # what the XLA code of other modules passes: on a TPU that is what the parameter holds
            found = DEVICE if DEVICE in facts else MODULE if MODULE in facts or XLA_MODULE in facts else None
            return found if found is not None or len(path) < 3 else HOST  # the constant default
        if how == AUGMENTED:
            return join([self.kind(a.target), self.kind(a.value)])
        whole = self._element(a) if how == ITERATED else self._unpacked(a)
        for index in path:
            if type(whole) is tuple:
                whole = whole[index] if 0 <= index < len(whole) else None
            else:
                whole = whole if whole in TENSORS else None
        return _flat(whole)

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
        qualname = self.bindings.callee(call)
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

    # -- kinds ------------------------------------------------------------------------------------
    def _kind(self, node: ast.AST) -> Kind:
        kind = type(node)
        if kind is ast.Name:
            if self.qualname(node) is not None:
                return HOST  # an imported module, function or constant
            return self.named(node, node.id)[0]
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
            return same([self.kind(node.body), self.kind(node.orelse)])
        if kind is ast.BoolOp:
            return same([self.kind(v) for v in node.values])
        if kind is ast.NamedExpr:
            return self.kind(node.value)
        return None

    def _attribute(self, node: ast.Attribute) -> Kind:
        if self.qualname(node) is not None:
            return HOST  # torch.float32, xm.REDUCE_SUM ...
        name = dotted(node)
        if name and name.startswith("self.") and name.count(".") == 1:
            found = self.named(node, name)[0]
            if found is not None:
                return found
        base = self.kind(node.value)
        if node.attr in HOST_ATTRIBUTES and base != MODULE:
            return HOST
        if base in (DEVICE, HOST_TENSOR):
            return base  # .T, .grad, .data, or a field of a model's output (outputs.loss)
        return HOST if base == HOST else None

    def _call(self, call: ast.Call) -> Kind:
        qualname = self.bindings.callee(call)
        func = call.func
        if type(func) is ast.Attribute and func.attr == "from_pretrained" and \
                (dotted(func.value) or "").rsplit(".", 1)[-1][:1].isupper():
            return MODULE  # AutoModelForCausalLM.from_pretrained(...): a Hugging Face model
        if qualname is not None:
            return self._api_call(call, qualname) or self._foreign(call)
        if type(func) is ast.Name:
            if func.id in self.module_classes:
                return MODULE
            if func.id == "self" and \
                    self.bindings.is_module_class(self.bindings.method_class.get(id(self.index.scope_of(call)))):
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
        if method in ("cpu", "cuda") or (method == "to" and call.args and self.devices.on_cpu(call.args[0])):
            return HOST_TENSOR  # whatever it was (a tensor, or a module moved away), not on the XLA device
        if receiver == HOST:
            return HOST
        if receiver is None and method == "to" and call.args and self.devices.is_xla_device(call.args[0]):
            return DEVICE  # batch["ids"].to(xm.xla_device()): whatever it was, now on the device
        if receiver not in TENSORS:
            return None
        if method == "to":
            where = call.args[0] if call.args else keyword_value(call, "device")
            if where is None or self._is_dtype(where):
                return receiver
            return HOST_TENSOR if self.devices.on_cpu(where) else DEVICE
        if method == "backward":
            return None
        return receiver

    def _foreign(self, call: ast.Call) -> Kind:
        """A device tensor from a function of another module of the project that returns one."""
        if self.project is None:
            return None
        summary = self.project.callee(call, self.assigned_value)
        return DEVICE if summary is not None and summary.returns_device else None

    def _returns(self, name: str) -> Kind:
        """What a call of the file's one function of that name returns: the common kind of its
        ``return`` values (``def compute_loss(...): return F.cross_entropy(...)``)."""
        defs = self.bindings.functions.get(name, ())
        if len(defs) != 1 or name in self.bindings.rebound_functions:
            return None
        key = id(defs[0])
        if key in self._busy:
            return None  # recursion
        self._busy.add(key)
        try:
            values = [node.value for node in self.bindings.return_statements(defs[0])]
            return same([self.kind(v) if v is not None else HOST for v in values]) if values else None
        finally:
            self._busy.discard(key)

    def _is_dtype(self, node: ast.expr) -> bool:
        qualname = self.qualname(node) or ""
        return qualname.startswith("torch.") and qualname.count(".") == 1 and qualname[6:] in _DTYPES

    def _api_call(self, call: ast.Call, qualname: str) -> Kind:
        args = [a for a in call.args if type(a) is not ast.Starred]
        if qualname.startswith("builtins."):
            name = qualname[9:]
            if name in HOST_BUILTINS:
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
            device = keyword_value(call, "device")
            if device is None:
                return HOST_TENSOR
            return HOST_TENSOR if self.devices.on_cpu(device) else DEVICE
        if name.endswith("_like"):
            device = keyword_value(call, "device")
            if device is not None:
                return HOST_TENSOR if self.devices.on_cpu(device) else DEVICE
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
_DTYPES = frozenset({
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "int8", "int16", "short", "int32",
    "int", "int64", "long", "uint8", "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2",
})
