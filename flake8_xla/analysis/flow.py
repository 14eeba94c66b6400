"""Flow facts: where a statement sits and what surely runs before it, plus FSDP's wraps on top.

Control flow, within one scope (a function, a class body, or the module): every statement gets a
number in source order, every node the Position of its statement, and the Place of a node tells
its enclosing functions and classes and the branches around it. From the block structure around
two statements follow ``runs_before`` (it surely runs earlier), ``dominates`` (it runs whenever
the other does) and ``within`` (it sits in every branch the other does).

FSDP, on top: which expressions are wrapped with FSDP (and into which name), which optimizers are
built from which modules' parameters, where names are rebound, and where modules are moved to a
device. Names are compared as dotted text (``model``, ``self.model``, ``model.layer``), so facts
never cross scopes: a model that comes from a parameter, a factory or another function stays
unknown and the rules stay silent.

Lazy: statements are numbered for files that reference an FSDP wrapper (their wraps need
positions), for other files only when a rule first asks where a node is; block structure is
worked out per scope on the first query that needs it. Everything else pays one set lookup per
resolved reference.
"""
from __future__ import annotations

import ast
import functools
import re
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .semantic import Reference, SemanticModel
from .syntax import walk

FSDP_V1 = frozenset({
    "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel",
    "torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel",
})
FSDP_V2 = frozenset({
    "torch_xla.experimental.spmd_fully_sharded_data_parallel.SpmdFullyShardedDataParallel",
})
FSDP_ANY = FSDP_V1 | FSDP_V2

# optimizers: torch.optim.X and the usual third-party ones; the name must look like an optimizer
_OPTIMIZER_MODULES = ("torch.optim.", "transformers.", "bitsandbytes.optim.", "apex.optimizers.", "timm.optim.")
_OPTIMIZER_NAME = re.compile(r"(?i)(adam|sgd|adagrad|adadelta|rmsprop|lamb|lars|lion|adafactor|optimizer|lbfgs"
                             r"|nadam|radam|asgd|rprop|sophia|shampoo)")

_DEF_TYPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
# fields of a statement that hold nested statements (numbered on their own)
_BLOCK_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


# -- small AST helpers ---------------------------------------------------------------------------

def to_cpu(call: ast.Call) -> bool:
    """``x.to("cpu")`` / ``x.to(device="cpu")``."""
    where = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    return type(where) is ast.Constant and where.value == "cpu"


PARTIAL = "functools.partial"  # partial(fn, ...) runs fn


def dotted(node: Optional[ast.AST]) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain (``self.model``), else None."""
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def prefixes(name: str) -> List[str]:
    """``a.b.c`` -> ``a``, ``a.b`` (the proper prefixes, outermost first)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def argument(call: ast.Call, index: int, keyword: str) -> Optional[ast.expr]:
    """The argument given as ``keyword=``, else the positional one at ``index`` (not ``*args``)."""
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index and type(call.args[index]) is not ast.Starred else None


def is_constant(node: Optional[ast.AST], value: bool) -> bool:
    return type(node) is ast.Constant and node.value is value


def is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``"""
    test = getattr(node, "test", None)
    if type(node) is not ast.If or type(test) is not ast.Compare or len(test.comparators) != 1 or \
            type(test.ops[0]) is not ast.Eq:
        return False
    sides = [test.left, test.comparators[0]]
    return any(type(s) is ast.Name and s.id == "__name__" for s in sides) and \
        any(type(s) is ast.Constant and s.value == "__main__" for s in sides)


@functools.lru_cache(maxsize=512)
def is_optimizer(qualname: str) -> bool:
    if qualname.startswith("torch.optim.lr_scheduler") or qualname.startswith("torch.optim.swa_utils"):
        return False
    leaf = qualname.rsplit(".", 1)[-1]
    return qualname.startswith(_OPTIMIZER_MODULES) and leaf[:1].isupper() and bool(_OPTIMIZER_NAME.search(leaf))


def parameter_owners(node: ast.AST) -> Iterator[str]:
    """Dotted names whose ``.parameters()`` (or ``named_parameters()``) are called in ``node``."""
    for sub in ast.walk(node):
        if type(sub) is ast.Call and type(sub.func) is ast.Attribute and \
                sub.func.attr in ("parameters", "named_parameters"):
            name = dotted(sub.func.value)
            if name:
                yield name


# -- data ----------------------------------------------------------------------------------------

class Position(NamedTuple):
    scope: ast.AST  # the function (or module) whose body holds the statement
    order: int  # statement number within the scope, in source order
    statement: ast.stmt


class Place(NamedTuple):
    scope: ast.AST  # innermost function or class (the module at top level)
    owners: Tuple[ast.AST, ...]  # enclosing functions and classes, outermost first
    # the branches between the scope and the node: if/else, match cases and except handlers; loop,
    # with and try bodies run unconditionally enough and add nothing, and neither does the module's
    # ``if __name__ == "__main__":`` block
    branches: Tuple[Tuple[int, object], ...]


class Wrap(NamedTuple):
    call: ast.Call
    kind: str  # "v1" (XlaFullyShardedDataParallel) or "v2" (SpmdFullyShardedDataParallel)
    wrapped: Optional[str]  # dotted name of the module argument, when it is a name
    target: Optional[str]  # dotted name the wrapper is assigned to, when it is
    at: Position
    inner: Optional[ast.AST]  # the module argument expression

    @property
    def label(self) -> str:
        return "FSDP" if self.kind == "v1" else "FSDPv2"


class OptimizerBuild(NamedTuple):
    call: ast.Call
    target: Optional[str]
    params_of: Tuple[str, ...]  # dotted names whose .parameters()/.named_parameters() it takes
    param_groups: bool  # built from a list of parameter-group dicts
    at: Position


class Move(NamedTuple):
    name: str  # dotted name of a module moved in place: ``model.to(device)``
    at: Position


class Binding(NamedTuple):
    name: str  # dotted name assigned
    value: ast.AST
    at: Position


# -- which blocks around a statement may be skipped ----------------------------------------------
# A policy decides whether a block of ``stmt`` counts (``key``: "body", "orelse", "finalbody", or
# the index of an except handler or a match case); ``top``: ``stmt`` is in the module's scope.
Policy = Callable[[ast.stmt, object, bool], bool]


def _any_block(stmt: ast.stmt, key: object, top: bool) -> bool:
    """runs_before: any nested block may be skipped (branch, loop, try, handler), but a ``with`` body."""
    return type(stmt) is not ast.With and type(stmt) is not ast.AsyncWith


# blocks that may not run: a statement in one does not run whenever the code after the block does
_CONDITIONAL_FIELDS = {ast.If: ("body", "orelse"), ast.For: ("body", "orelse"), ast.AsyncFor: ("body", "orelse"),
                       ast.While: ("body", "orelse"), ast.Try: ("orelse",)}


def _conditional_block(stmt: ast.stmt, key: object, top: bool) -> bool:
    """dominates: if/else branches, loop bodies and their ``else``, a try's ``else``, except handlers
    and match cases."""
    return type(key) is int or key in _CONDITIONAL_FIELDS.get(type(stmt), ())


def _branch(stmt: ast.stmt, key: object, top: bool) -> bool:
    """within: if/else branches (not the module's main guard), except handlers and match cases."""
    if type(key) is int:
        return True
    return type(stmt) is ast.If and (key == "orelse" or not (top and is_main_guard(stmt)))


def _side(key: object) -> Optional[bool]:
    """Which side of an if a block key is: True for its body, False for its else, None otherwise."""
    return True if key == "body" else False if key == "orelse" else None


def _blocks(stmt: ast.stmt) -> Iterator[Tuple[object, List[ast.stmt]]]:
    """(key, statements) of each block nested in ``stmt``."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if block:
            yield field, block
    for number, handler in enumerate(getattr(stmt, "handlers", None) or []):
        yield number, handler.body
    for number, case in enumerate(getattr(stmt, "cases", None) or []):
        yield number, case.body


def _block_paths(scope: ast.AST, policy: Policy, top: bool) -> Dict[int, Tuple[Tuple[int, object], ...]]:
    """id(statement) -> the blocks around it within ``scope`` that may be skipped, outermost first."""
    paths: Dict[int, Tuple[Tuple[int, object], ...]] = {}
    stack: List[Tuple[List[ast.stmt], tuple]] = [(scope.body, ())]
    while stack:
        body, path = stack.pop()
        for stmt in body:
            paths[id(stmt)] = path
            if type(stmt) in _DEF_TYPES:
                continue
            for key, block in _blocks(stmt):
                stack.append((block, path + ((id(stmt), key),) if policy(stmt, key, top) else path))
    return paths


def within(inner: Place, outer: Place) -> bool:
    """Whether ``inner`` runs whenever ``outer`` does, as far as branches tell: same scope, and
    every branch ``outer`` sits in also holds ``inner``."""
    return inner.scope is outer.scope and inner.branches[:len(outer.branches)] == outer.branches


class FlowFacts:
    """Flow facts of one file: positions and places of nodes, and its FSDP wraps."""

    @classmethod
    def from_context(cls, ctx) -> "FlowFacts":
        return cls(ctx.tree, ctx.get(SemanticModel).references)

    def __init__(self, tree: ast.AST, references: Sequence[Reference]) -> None:
        self.tree = tree
        self.references = references
        self.fsdp_refs = [r for r in references if r.qualname in FSDP_ANY and not r.is_import]
        self.wraps: List[Wrap] = []
        self.optimizers: List[OptimizerBuild] = []
        self.bindings: List[Binding] = []
        self.moves: List[Move] = []
        self._paths: Dict[Tuple[Policy, int], Dict[int, tuple]] = {}
        self._scope_statements: Dict[int, List[Position]] = {}
        self._kinds: Dict[int, Dict[int, type]] = {}
        self._names: Dict[int, Dict[str, List[Tuple[int, bool]]]] = {}
        # filled statement by statement, as far as the queries so far needed
        self._positions: Dict[int, Position] = {}
        self._owners: Dict[int, Tuple[ast.AST, ...]] = {id(tree): ()}  # id(scope) -> its owners
        self._outside: Dict[int, Tuple[ast.AST, ast.stmt, object]] = {}  # id(node) -> scope, statement, branch
        self._numbering: Optional[Iterator[None]] = self._number()
        self._collected = False
        if self.fsdp_refs:
            self.collect()

    def collect(self) -> None:
        """Number every statement and gather the wraps, optimizer builds, moves and bindings: up
        front for a file that references an FSDP wrapper, on a fact's request for others (the
        checkpoint facts need the bindings). Idempotent."""
        if self._collected:
            return
        self._collected = True
        if self._numbering is not None:
            for _ in self._numbering:
                pass
        self._collect()
        self.__dict__.pop("_bindings_by_name", None)  # built from the bindings, maybe before they were gathered

    # -- numbering ----------------------------------------------------------------------------
    def _number(self) -> Iterator[None]:
        """Give every node the Position of its statement, one statement per step; functions and
        classes are scopes of their own (lambda bodies are not numbered: nothing is known inside
        them). Also note the owners of each scope, and the nodes outside any numbered statement
        that still run in a scope: a def itself with its decorators, defaults and bases (where the
        def stands), except clauses and their types, match-case patterns and guards."""
        positions, outside = self._positions, self._outside
        scopes: List[ast.AST] = [self.tree]
        while scopes:
            scope = scopes.pop()
            for order, stmt in enumerate(_statements(scope.body)):
                if type(stmt) in _DEF_TYPES:
                    scopes.append(stmt)
                    self._owners[id(stmt)] = self._owners[id(scope)] + (stmt,)
                    outside[id(stmt)] = (scope, stmt, None)
                    for node in _below(_def_header(stmt)):
                        outside[id(node)] = (scope, stmt, None)
                    yield
                    continue
                position = Position(scope, order, stmt)
                positions[id(stmt)] = position
                for node in _below([value for field in stmt._fields if field not in _BLOCK_FIELDS
                                    for value in _children(getattr(stmt, field, None))]):
                    positions[id(node)] = position
                for number, handler in enumerate(getattr(stmt, "handlers", None) or []):
                    outside[id(handler)] = (scope, stmt, None)
                    for node in _below(_children(handler.type)):
                        outside[id(node)] = (scope, stmt, number)
                for number, case in enumerate(getattr(stmt, "cases", None) or []):
                    for node in _below([root for root in (case.pattern, case.guard) if root is not None]):
                        outside[id(node)] = (scope, stmt, number)
                yield
        self._numbering = None

    def _find(self, node: ast.AST) -> None:
        """Number statements until ``node`` is numbered or noted (or all are)."""
        numbering, key = self._numbering, id(node)
        if numbering is not None and key not in self._positions and key not in self._outside:
            for _ in numbering:
                if key in self._positions or key in self._outside:
                    return

    def position(self, node: ast.AST) -> Optional[Position]:
        at = self._positions.get(id(node))
        if at is None and self._numbering is not None:
            self._find(node)
            at = self._positions.get(id(node))
        return at

    def place(self, node: ast.AST) -> Optional[Place]:
        """Where ``node`` runs: scope, owners and branches. None inside a lambda (when it runs is
        unknown) and in annotations."""
        self._find(node)
        at = self._positions.get(id(node))
        if at is not None:
            scope, stmt, key = at.scope, at.statement, None
        elif id(node) in self._outside:
            scope, stmt, key = self._outside[id(node)]
        else:
            return None
        branches = self._block_paths(_branch, scope)[id(stmt)]
        if key is not None:  # an except clause's type or a case's pattern: in its branch
            branches += ((id(stmt), key),)
        return Place(scope, self._owners[id(scope)], branches)

    def _block_paths(self, policy: Policy, scope: ast.AST) -> Dict[int, tuple]:
        """:func:`_block_paths` of ``scope`` under ``policy``, worked out once per file."""
        paths = self._paths.get((policy, id(scope)))
        if paths is None:
            paths = self._paths[(policy, id(scope))] = _block_paths(scope, policy, scope is self.tree)
        return paths

    # -- order ----------------------------------------------------------------------------------
    def runs_before(self, first: Position, then: Position) -> bool:
        """Whether ``first`` surely runs before ``then`` in the same scope: it comes first and sits
        in the same block as ``then`` or in a block enclosing it (a branch or loop body on the way
        may be skipped, and so may a try body; a ``with`` body may not)."""
        if first.scope is not then.scope or first.order >= then.order:
            return False
        paths = self._block_paths(_any_block, first.scope)
        a, b = paths.get(id(first.statement)), paths.get(id(then.statement))
        return a is not None and b is not None and b[:len(a)] == a

    def dominates(self, earlier: Position, later: Position) -> bool:
        """Whether the statement at ``earlier`` runs whenever the one at ``later`` does: every
        block that may not run (if/else branch, loop body, except handler) around ``earlier`` is
        around ``later`` too."""
        blocks = self._block_paths(_conditional_block, earlier.scope)
        first, second = blocks.get(id(earlier.statement), ()), blocks.get(id(later.statement), ())
        return second[:len(first)] == first

    def flag_dominates(self, earlier: Position, later: Position) -> bool:
        """:meth:`dominates`, or nearly: the blocks around ``earlier`` that are not around ``later`` are
        if branches only (``if use_fsdp: model = FSDP(model)``), and ``later`` is on no other side of them."""
        blocks = self._block_paths(_conditional_block, earlier.scope)
        first, second = blocks.get(id(earlier.statement), ()), blocks.get(id(later.statement), ())
        shared = 0
        while shared < min(len(first), len(second)) and first[shared] == second[shared]:
            shared += 1
        kinds = self._statement_kinds(earlier.scope)
        return all(kinds.get(stmt_id) is ast.If for stmt_id, _ in first[shared:]) and not self.exclusive(earlier, later)

    def _statement_kinds(self, scope: ast.AST) -> Dict[int, type]:
        kinds = self._kinds.get(id(scope))
        if kinds is None:
            kinds = self._kinds[id(scope)] = {id(p.statement): type(p.statement) for p in self.statements_in(scope)}
        return kinds

    def exclusive(self, first: Position, then: Position) -> bool:
        """Whether the statements at ``first`` and ``then`` never both run in one pass: they sit in
        different branches of one if, or on opposite sides of two ifs with the same test (``if use_fsdp:``
        ... ``if not use_fsdp:``, or its ``else``)."""
        if first.scope is not then.scope:
            return False
        blocks = self._block_paths(_branch, first.scope)
        a, b = blocks.get(id(first.statement), ()), blocks.get(id(then.statement), ())
        sides = dict(a)
        if any(stmt_id in sides and sides[stmt_id] != key for stmt_id, key in b):
            return True
        tests = self._if_tests
        mine = {}  # an if test's text -> whether ``first`` runs where it holds
        for stmt_id, key in a:
            side = _side(key)
            if stmt_id in tests and side is not None:
                mine[tests[stmt_id][0]] = side != tests[stmt_id][1]
        for stmt_id, key in b:
            side = _side(key)
            if stmt_id in tests and side is not None:
                text, flipped = tests[stmt_id]
                if text in mine and mine[text] != (side != flipped):
                    return True
        return False

    @functools.cached_property
    def _if_tests(self) -> Dict[int, Tuple[str, bool]]:
        """id(if statement) -> (its test's text without a leading ``not``, whether it had one)."""
        out = {}
        for node in walk([self.tree]):
            if type(node) is ast.If:
                test, flipped = node.test, False
                while type(test) is ast.UnaryOp and type(test.op) is ast.Not:
                    test, flipped = test.operand, not flipped
                out[id(node)] = (ast.dump(test), flipped)
        return out

    # -- resolved names ---------------------------------------------------------------------------
    @functools.cached_property
    def _by_node(self) -> Dict[int, Reference]:
        return {id(r.node): r for r in self.references if not r.is_import}

    def reference(self, node: ast.AST) -> Optional[Reference]:
        """The resolved (non-import) reference whose node is ``node``."""
        return self._by_node.get(id(node))

    def qualname(self, node: ast.AST) -> Optional[str]:
        ref = self._by_node.get(id(node))
        return ref.qualname if ref is not None else None

    # -- FSDP facts -------------------------------------------------------------------------------
    def _collect(self) -> None:
        for ref in self.fsdp_refs:
            call = ref.call
            at = self.position(call) if call is not None else None
            if call is None or at is None:
                continue
            inner = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "module"), None)
            self.wraps.append(Wrap(call, "v1" if ref.qualname in FSDP_V1 else "v2", dotted(inner),
                                   _assigned_name(at.statement, call), at, inner))
        for ref in self.references:
            call = ref.call
            if call is None or not is_optimizer(ref.qualname):
                continue
            at = self.position(call)
            if at is None:
                continue
            params = tuple(parameter_owners(call))
            if params:
                groups = any(type(a) is ast.List and any(type(e) is ast.Dict for e in a.elts) for a in call.args)
                self.optimizers.append(OptimizerBuild(call, _assigned_name(at.statement, call), params, groups, at))
        for at in {id(p.statement): p for p in self._positions.values()}.values():
            stmt = at.statement
            if type(stmt) is ast.Expr and type(stmt.value) is ast.Call and type(stmt.value.func) is ast.Attribute \
                    and stmt.value.func.attr == "to":
                name = dotted(stmt.value.func.value)
                if name:
                    self.moves.append(Move(name, at))
            if type(stmt) in (ast.Assign, ast.AnnAssign, ast.AugAssign) and getattr(stmt, "value", None) is not None:
                targets = stmt.targets if type(stmt) is ast.Assign else [stmt.target]
                for target in targets:
                    for element in (target.elts if type(target) in (ast.Tuple, ast.List) else [target]):
                        name = dotted(element)
                        if name:
                            self.bindings.append(Binding(name, stmt.value, at))
        self.bindings.sort(key=lambda b: b.at.order)

    # -- names within one scope -------------------------------------------------------------------
    @functools.cached_property
    def _bindings_by_name(self) -> Dict[Tuple[int, str], List[Binding]]:
        out: Dict[Tuple[int, str], List[Binding]] = {}
        for binding in self.bindings:  # sorted by order
            out.setdefault((id(binding.at.scope), binding.name), []).append(binding)
        return out

    def bindings_between(self, name: Optional[str], scope: ast.AST, start: int, end: int) -> List[Binding]:
        """Assignments to ``name`` in ``scope`` by statements strictly between two orders, in order."""
        return [b for b in self._bindings_by_name.get((id(scope), name), ()) if start < b.at.order < end]

    def statements_in(self, scope: ast.AST) -> List[Position]:
        """The positions of the statements of ``scope`` (inner blocks included, nested defs and classes
        not), in order; found once per scope."""
        found = self._scope_statements.get(id(scope))
        if found is None:
            body = scope.body if type(scope) is not ast.Lambda else []
            found = []
            for node in walk(body, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                if isinstance(node, ast.stmt):
                    where = self.position(node)
                    if where is not None and where.statement is node:
                        found.append(where)
            found.sort(key=lambda p: p.order)
            self._scope_statements[id(scope)] = found
        return found

    def bindings_before(self, name: Optional[str], at: Position) -> List[Binding]:
        """Assignments to ``name`` in the scope of ``at`` by earlier statements, in order."""
        return [b for b in self._bindings_by_name.get((id(at.scope), name), ()) if b.at.order < at.order]

    def rebound_between(self, name: str, scope: ast.AST, start: int, end: int) -> bool:
        """Whether ``name`` is assigned in ``scope`` by a statement strictly between two orders."""
        return any(start < b.at.order < end for b in self._bindings_by_name.get((id(scope), name), ()))

    def last_binding(self, name: Optional[str], at: Position) -> Optional[Binding]:
        """``name``'s last assignment before ``at`` in its scope, if it surely runs before ``at``."""
        bound = self.bindings_before(name, at)
        return bound[-1] if bound and self.runs_before(bound[-1].at, at) else None

    def binding_of(self, expr: ast.AST) -> Optional[Binding]:
        """The plain assignment (``name = value``) a dotted name was last given in its scope, when
        it runs whenever ``expr`` does and nothing else stores the name in between; else None."""
        name, at = dotted(expr), self.position(expr)
        if name is None or at is None:
            return None
        bound = self.bindings_before(name, at)
        binding = bound[-1] if bound else None
        if binding is None or not _plain_assignment(binding.at.statement, name):
            return None
        if not self.dominates(binding.at, at) or self.occurs_between(name, at.scope, binding.at.order, at.order,
                                                                     stores_only=True):
            return None
        return binding

    def value_of(self, expr: ast.AST) -> Optional[ast.AST]:
        """The value of :meth:`binding_of`."""
        binding = self.binding_of(expr)
        return binding.value if binding is not None else None

    def occurs_between(self, name: str, scope: ast.AST, start: int, end: int, stores_only: bool = False) -> bool:
        """Whether ``name`` is stored (or, unless ``stores_only``, used at all) in ``scope`` by a
        statement strictly between two orders."""
        names = self._names.get(id(scope))
        if names is None:
            names = self._names[id(scope)] = self._occurrences(scope)
        return any(start < order < end and (store or not stores_only) for order, store in names.get(name, ()))

    def _occurrences(self, scope: ast.AST) -> Dict[str, List[Tuple[int, bool]]]:
        """Dotted name -> (statement order, is a store) of each of its occurrences in ``scope``."""
        out: Dict[str, List[Tuple[int, bool]]] = {}
        for node in ast.walk(scope):
            if type(node) is ast.Name or type(node) is ast.Attribute:
                at = self.position(node)
                name = dotted(node) if at is not None and at.scope is scope else None
                if name is not None:
                    out.setdefault(name, []).append((at.order, type(node.ctx) is not ast.Load))
        return out

    # -- FSDP queries -----------------------------------------------------------------------------
    def wrapped_names(self, scope: ast.AST, before: int, wraps: Optional[List[Wrap]] = None) -> Dict[str, Wrap]:
        """Names bound to an FSDP wrapper at statement ``before`` of ``scope`` (last wrap wins,
        unless rebound to something else since); ``wraps``: others than the file's own FSDP calls."""
        out: Dict[str, Wrap] = {}
        for wrap in self.wraps if wraps is None else wraps:
            if wrap.at.scope is scope and wrap.at.order < before and wrap.target:
                if not self.rebound_between(wrap.target, scope, wrap.at.order, before):
                    out[wrap.target] = wrap
        return out

    def wrapper_at(self, name: Optional[str], node: ast.AST) -> Optional[Wrap]:
        """The FSDP wrap ``name`` is bound to where ``node`` is (same scope, earlier statement)."""
        at = self.position(node)
        if not name or at is None:
            return None
        return self.wrapped_names(at.scope, at.order).get(name)

    def optimizer_named(self, name: Optional[str], node: ast.AST) -> Optional[OptimizerBuild]:
        """The optimizer build ``name`` is bound to where ``node`` is (same scope, not rebound)."""
        at = self.position(node)
        if not name or at is None:
            return None
        found = None
        for build in self.optimizers:
            if build.target == name and build.at.scope is at.scope and build.at.order < at.order:
                found = build
        if found and self.rebound_between(name, at.scope, found.at.order, at.order):
            return None
        return found

    def outer_wraps(self, kind: str) -> Dict[int, Wrap]:
        """id(call) of each ``kind`` wrap that is nested into another ``kind`` wrap -> the first such one
        (see :meth:`nested_in`)."""
        wraps = [w for w in self.wraps if w.kind == kind]
        out: Dict[int, Wrap] = {}
        if len(wraps) < 2:
            return out
        for inner in wraps:
            outer = next((o for o in wraps if o is not inner and self.nested_in(inner, o)), None)
            if outer is not None:
                out[id(inner.call)] = outer
        return out

    def nested_in(self, inner: Wrap, outer: Wrap) -> bool:
        """Whether the wrapper bound by ``inner`` is, for sure, part of the module ``outer`` wraps:
        assigned onto it (``m.layer = FSDP(m.layer)`` then ``FSDP(m)``), passed to its constructor
        (``FSDP(Net(inner))``, or ``m = Net(inner)`` then ``FSDP(m)``), or stored on it
        (``m.block = inner`` then ``FSDP(m)``)."""
        name, parent = inner.target, outer.wrapped
        scope = inner.at.scope
        if not name or outer.at.scope is not scope or not self.runs_before(inner.at, outer.at):
            return False
        start, end = inner.at.order, outer.at.order
        if parent and name.startswith(parent + "."):
            chain = [n for n in prefixes(name) if n == parent or n.startswith(parent + ".")] + [name]
            return not any(self.rebound_between(n, scope, start, end) for n in chain)
        if self.rebound_between(name, scope, start, end):
            return False
        if name in _passed_names(outer.inner):
            return True
        if not parent:
            return False
        for binding in reversed(self.bindings):
            at = binding.at
            if at.scope is not scope or not start < at.order < end:
                continue
            if binding.name == parent:
                # the last binding of the parent before the wrap: it must surely run and take the wrapper
                return self.runs_before(at, outer.at) and name in _passed_names(binding.value) and \
                    not self.rebound_between(name, scope, start, at.order)
            if binding.name.startswith(parent + ".") and dotted(binding.value) == name and \
                    self.runs_before(at, outer.at) and not self.rebound_between(parent, scope, at.order, end):
                return True
        return False


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a block in source order, descending into compound statements (not defs)."""
    for stmt in body:
        yield stmt
        if type(stmt) in _DEF_TYPES:
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, field, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            yield from _statements(handler.body)
        for case in getattr(stmt, "cases", None) or []:
            yield from _statements(case.body)


def _children(value: object) -> List[ast.AST]:
    """The nodes in a field's value (a node, a list, or neither)."""
    if type(value) is list:
        return [item for item in value if isinstance(item, ast.AST)]
    return [value] if isinstance(value, ast.AST) else []


def _below(roots: List[ast.AST]) -> List[ast.AST]:
    """The roots and all nodes below them, but not inside lambdas (another scope)."""
    return walk(roots, (ast.Lambda,))


def _def_header(stmt: ast.stmt) -> List[ast.AST]:
    """What a def or class statement evaluates where it stands: decorators, defaults, bases."""
    if type(stmt) is ast.ClassDef:
        return stmt.decorator_list + stmt.bases + [k.value for k in stmt.keywords]
    return stmt.decorator_list + stmt.args.defaults + [d for d in stmt.args.kw_defaults if d]


def _assigned_name(stmt: ast.stmt, call: ast.Call) -> Optional[str]:
    """``x`` in ``x = <call>`` / ``x: T = <call>`` (the call itself, not nested in it)."""
    if type(stmt) is ast.Assign and stmt.value is call and len(stmt.targets) == 1:
        return dotted(stmt.targets[0])
    if type(stmt) is ast.AnnAssign and stmt.value is call:
        return dotted(stmt.target)
    return None


def _plain_assignment(stmt: ast.stmt, name: str) -> bool:
    """``name = value`` (or ``a = name = value`` / ``name: T = value``), not unpacking or ``+=``."""
    if type(stmt) is ast.Assign:
        return any(dotted(t) == name for t in stmt.targets)
    return type(stmt) is ast.AnnAssign and dotted(stmt.target) == name


def _passed_names(expr: Optional[ast.AST]) -> Iterator[str]:
    """Dotted names handed to a constructor call as arguments (``Net(inner)``,
    ``nn.Sequential(a, b)``, ``Net(layers=[a, b])``, ``Net(Block(a))``)."""
    if type(expr) is not ast.Call:
        return
    stack = list(expr.args) + [k.value for k in expr.keywords]
    while stack:
        node = stack.pop()
        name = dotted(node)
        if name:
            yield name
        elif type(node) in (ast.List, ast.Tuple, ast.Set):
            stack.extend(node.elts)
        elif type(node) is ast.Call:
            stack.extend(list(node.args) + [k.value for k in node.keywords])
