"""Where a file asks whether torch_xla is there: an import of it under ``try/except ImportError``,
``importlib.util.find_spec("torch_xla")``, a library's ``is_torch_xla_available()``, ``device.type ==
"xla"``; and the calls made only to probe for it. After a move to TorchTPU, which cannot be installed
beside torch_xla, every such test answers "no"."""
from __future__ import annotations

import ast
from typing import List, NamedTuple, Optional, Tuple

from .environment import string_value
from .semantic import Reference, SemanticModel
from .syntax import TRY_NODES, Parents, names_used

# what a check on torch_xla's presence catches when the import fails
_IMPORT_FAILURES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
# calls that find a module without importing it; their first argument names it
SPEC_FINDERS = frozenset({"importlib.util.find_spec", "importlib.find_loader", "pkgutil.find_loader"})
# the names libraries give their tests for torch_xla (transformers, accelerate, optimum, ...): imported from
# anywhere, a relative import included, they test the package, not the TPU
LIBRARY_CHECKS = frozenset({"is_torch_xla_available", "is_torch_tpu_available", "is_tpu_available"})
_LOGGING = frozenset({"print", "debug", "info", "warning", "warn", "error", "log", "exception"})


class AvailabilityCheck(NamedTuple):
    kind: str  # "import guard", "spec", "library", "sys.modules", "device type"
    node: ast.AST  # where it is reported
    written: str  # how the message names it
    test: Optional[ast.AST] = None  # the expression a fix replaces (spec, library), or the try (import guard)
    flag: Optional[str] = None  # an import guard's flag, when its shape is only "import, flag = True / False"
    read_elsewhere: bool = False  # code outside the guard reads what it imports (a fix waits for those uses to go)
    ref: Optional[Reference] = None  # the call's reference (spec, library)


def imports_torch_xla(stmt: ast.AST) -> bool:
    if type(stmt) is ast.Import:
        return any(a.name == "torch_xla" or a.name.startswith("torch_xla.") for a in stmt.names)
    return type(stmt) is ast.ImportFrom and not stmt.level and \
        ((stmt.module or "") == "torch_xla" or (stmt.module or "").startswith("torch_xla."))


def catches_import_failure(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if type(handler.type) is ast.Tuple else [handler.type]
    return handler.type is None or any(
        (k.id if type(k) is ast.Name else k.attr if type(k) is ast.Attribute else "") in _IMPORT_FAILURES
        for k in kinds)


def import_guards(tree: ast.AST) -> List[ast.AST]:
    """``try`` statements whose body imports torch_xla and one of whose handlers catches its failure."""
    return [node for node in ast.walk(tree) if type(node) in TRY_NODES
            and any(imports_torch_xla(s) for s in node.body)
            and any(catches_import_failure(h) for h in node.handlers)]


def is_probe(call: ast.Call, parents: Parents, tree: ast.AST) -> bool:
    """A call made to see whether it fails: in the body of a ``try`` that handles a failure, its result
    unused, bound to ``_``, bound to a name that is only printed or logged, or bound to a name that a
    handler binds too (``except RuntimeError: device = cpu``: the fallback is the point)."""
    stmt = parents.of(call)
    name = None
    if type(stmt) is ast.Assign and stmt.value is call and len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Name:
        name = stmt.targets[0].id
    elif type(stmt) is not ast.Expr:
        return False
    for child, parent in parents.chain(stmt):
        if type(parent) in TRY_NODES and child in parent.body:
            if not parent.handlers:
                return False
            return name is None or name.strip("_") == "" or _only_logged(name, parents, tree) or \
                any(type(t) is ast.Name and t.id == name for h in parent.handlers for s in h.body
                    if type(s) is ast.Assign for t in s.targets)
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Module)):
            return False
    return False


def _only_logged(name: str, parents: Parents, tree: ast.AST) -> bool:
    """Every read of ``name`` is an argument (maybe in an f-string) of print or a logging call."""
    reads = [n for n in ast.walk(tree) if type(n) is ast.Name and n.id == name and type(n.ctx) is ast.Load]
    for read in reads:
        call = next((p for _, p in parents.chain(read) if type(p) is ast.Call), None)
        func = None if call is None else call.func
        called = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else None
        if called not in _LOGGING:
            return False
    return bool(reads)


class AvailabilityChecks(tuple):
    """Every test of torch_xla's presence in one file, in source order."""

    @classmethod
    def from_context(cls, ctx) -> "AvailabilityChecks":
        return cls(sorted(_checks(ctx.tree, ctx.get(SemanticModel), ctx.get(Parents)),
                          key=lambda c: (c.node.lineno, c.node.col_offset)))


def _checks(tree: ast.AST, model: SemanticModel, parents: Parents):
    used = None
    for guard in import_guards(tree):
        first = next(s for s in guard.body if imports_torch_xla(s))
        names = ", ".join(a.name if type(first) is ast.Import else f"{first.module}.{a.name}" for a in first.names)
        flag, bound = _flag(guard, parents, tree)
        used = names_used(tree) if used is None else used  # the file's reads, counted once
        outside = used - names_used(guard)
        yield AvailabilityCheck("import guard", first, f"import of {names} in try", guard, flag,
                                read_elsewhere=any(outside[name] for name in bound))
    for ref in model.references:
        call = ref.call
        if call is None:
            continue
        if ref.qualname in SPEC_FINDERS and call.args and _names_torch_xla(string_value(call.args[0])):
            yield AvailabilityCheck("spec", call, f"{'.'.join(ref.written)}(\"{string_value(call.args[0])}\")",
                                    _spec_test(call, parents), ref=ref)
        elif "." in ref.qualname and ref.qualname.rsplit(".", 1)[1] in LIBRARY_CHECKS:
            yield AvailabilityCheck("library", call, f"{'.'.join(ref.written)}()", call, ref=ref)
    yield from _relative_library_checks(tree)
    for node in ast.walk(tree):
        if type(node) is ast.Compare and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            if type(node.ops[0]) in (ast.In, ast.NotIn) and string_value(left) in ("torch_xla", "torch_xla.core") \
                    and ast.unparse(right) == "sys.modules":
                yield AvailabilityCheck("sys.modules", node, f"\"{left.value}\" in sys.modules")
            elif type(node.ops[0]) in (ast.Eq, ast.NotEq):
                op = "==" if type(node.ops[0]) is ast.Eq else "!="
                for side, other in ((left, right), (right, left)):
                    if string_value(side) == "xla" and type(other) is ast.Attribute and other.attr == "type":
                        yield AvailabilityCheck("device type", side, f"{ast.unparse(other)} {op} \"xla\"", side)


def _relative_library_checks(tree: ast.AST):
    """Calls of a library test imported relatively (``from .utils import is_tpu_available`` inside the
    library), which the semantic model leaves unresolved."""
    bound = {a.asname or a.name for node in ast.walk(tree) if type(node) is ast.ImportFrom and node.level
             for a in node.names if a.name in LIBRARY_CHECKS}
    if bound:
        for node in ast.walk(tree):
            if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in bound:
                yield AvailabilityCheck("library", node, f"{node.func.id}()", node)


def _names_torch_xla(module: Optional[str]) -> bool:
    return module is not None and (module == "torch_xla" or module.startswith("torch_xla."))


def _spec_test(call: ast.Call, parents: Parents) -> Optional[ast.AST]:
    """The expression that asks "is it there": ``find_spec(...) is not None`` (or ``is None``), or the
    call itself in a truth test; None when the spec is used otherwise."""
    parent = parents.of(call)
    if type(parent) is ast.Compare and parent.left is call and len(parent.ops) == 1 \
            and type(parent.ops[0]) in (ast.Is, ast.IsNot) and type(parent.comparators[0]) is ast.Constant \
            and parent.comparators[0].value is None:
        return parent
    truth = (type(parent) in (ast.If, ast.While, ast.IfExp, ast.Assert) and parent.test is call) or \
        type(parent) is ast.BoolOp or (type(parent) is ast.UnaryOp and type(parent.op) is ast.Not) or \
        (type(parent) is ast.Call and type(parent.func) is ast.Name and parent.func.id == "bool"
         and parent.args == [call])
    return call if truth else None


def _flag(guard: ast.AST, parents: Parents, tree: ast.AST) -> Tuple[Optional[str], List[str]]:
    """The one name a guard sets to True when torch_xla imports and to False when it does not, when
    the guard does nothing else (imports, probes, the flag); and the names its imports bind."""
    bound = [a.asname or a.name.split(".")[0] for s in guard.body if imports_torch_xla(s) for a in s.names]
    if guard.orelse or guard.finalbody:
        return None, bound
    set_true = set()
    for stmt in guard.body:
        if _sets(stmt, True):
            set_true.add(stmt.targets[0].id)
        elif not imports_torch_xla(stmt) and not (type(stmt) in (ast.Expr, ast.Assign) and type(stmt.value) is ast.Call
                                                  and is_probe(stmt.value, parents, tree)):
            return None, bound
    if len(set_true) != 1:
        return None, bound
    flag = set_true.pop()
    for handler in guard.handlers:
        if handler.name or not catches_import_failure(handler) or \
                not all(_sets(s, False, flag) or type(s) is ast.Pass for s in handler.body) or \
                not any(_sets(s, False, flag) for s in handler.body):
            return None, bound
    return flag, bound


def _sets(stmt: ast.stmt, value: bool, name: Optional[str] = None) -> bool:
    return type(stmt) is ast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Name \
        and (name is None or stmt.targets[0].id == name) and type(stmt.value) is ast.Constant \
        and stmt.value.value is value


__all__ = ["AvailabilityCheck", "AvailabilityChecks", "LIBRARY_CHECKS", "SPEC_FINDERS", "catches_import_failure",
           "import_guards", "imports_torch_xla", "is_probe"]
