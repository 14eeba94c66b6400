"""Control flow: where a statement sits and what surely runs before it, within one scope (a
function, a class body, or the module). Every statement gets a number in source order, every node
the Position of its statement, and the Place of a node tells its enclosing functions and classes
and the branches around it. From the block structure around two statements follow ``runs_before``
(it surely runs earlier), ``dominates`` (it runs whenever the other does) and ``within`` (it sits in
every branch the other does).

Lazy: statements are numbered as far as the queries so far needed (all of them once a fact asks
for every statement, as the bindings do); block structure is worked out per scope on the first
query that needs it.
"""
from __future__ import annotations

import ast
import functools
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .syntax import is_main_guard, walk

_DEF_TYPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
# fields of a statement that hold nested statements (numbered on their own)
_BLOCK_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


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
    """Control flow of one file: positions and places of nodes, and the order of statements."""

    @classmethod
    def from_context(cls, ctx) -> "FlowFacts":
        return cls(ctx.tree)

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        self._paths: Dict[Tuple[Policy, int], Dict[int, tuple]] = {}
        self._scope_statements: Dict[int, List[Position]] = {}
        self._kinds: Dict[int, Dict[int, type]] = {}
        # filled statement by statement, as far as the queries so far needed
        self._positions: Dict[int, Position] = {}
        self._owners: Dict[int, Tuple[ast.AST, ...]] = {id(tree): ()}  # id(scope) -> its owners
        self._outside: Dict[int, Tuple[ast.AST, ast.stmt, object]] = {}  # id(node) -> scope, statement, branch
        self._numbering: Optional[Iterator[None]] = self._number()

    def statements(self) -> List[Position]:
        """The Position of every statement of the file (all of them numbered first), in the order
        they were numbered: scope by scope."""
        if self._numbering is not None:
            for _ in self._numbering:
                pass
        return list({id(p.statement): p for p in self._positions.values()}.values())

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
