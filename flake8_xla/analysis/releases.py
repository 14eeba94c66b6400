"""Release guards: which branches of a test on the torch_xla release (``if XLA_GE_2_1:``, a version
comparison, ``RequirementCache("torch_xla>=2.1")``, ``hasattr(xr, "world_size")``) are compat code on the
target. The semantic model asks it for every ``if``, conditional expression and boolean operand it walks."""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Callable, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

from .syntax import chain_text, walk
from ..versions import Version, release_numbers

if TYPE_CHECKING:  # the model imports this module: its scopes are only annotations here
    from .semantic import Scope


class Guard(NamedTuple):
    """A release check: whether its body and its else branch are compat code on the target."""

    body_compat: bool
    orelse_compat: bool
    unknown: bool  # the check could not be evaluated against the target: both branches are compat


# the qualified name a Name/Attribute chain refers to from a scope (SemanticModel.resolve)
Resolve = Callable[[ast.AST, "Scope"], Optional[str]]


def release_guard(test: ast.expr, scope: Scope, target: Optional[Version], lines: Optional[Sequence[str]],
                  resolve: Resolve) -> Optional[Guard]:
    """Which branches of ``test`` are compat code on ``target`` (every branch when it is None or the
    test cannot be evaluated); None when the test is not about the release."""
    value = _Evaluator(scope, target, lines, resolve).truth(test)
    if not value.release:
        return None
    if value.unknown or not value.possible:
        return Guard(True, True, True)
    return Guard(True not in value.possible, False not in value.possible, False)


def may_mention_release(lines: Optional[Sequence[str]], node: ast.AST) -> bool:
    """False when the source lines of ``node`` spell no word a release test needs."""
    if lines is None or getattr(node, "end_lineno", None) is None:
        return True
    return _RELEASE_WORDS.search("".join(lines[node.lineno - 1:node.end_lineno])) is not None


_VERSION_NAME = re.compile(
    r"(?i)(?:(?:xla|torch)\w*(?:version|greater|less|newer|older|_(?:ge|gt|le|lt|eq)_?\d|\d+_\d+))"
    r"|(?:version\w*(?:xla|torch))"
)
_REQUIREMENT_TEXT = re.compile(r"(?i)torch[-_]xla\s*(?:>=|<=|==|~=|!=|>|<)")
# every release test the heuristics recognise spells one of these (a cheap test on the source lines)
_RELEASE_WORDS = re.compile(r"(?i)version|xla|torch|hasattr|getattr")

_TRUE, _FALSE = frozenset({True}), frozenset({False})
_EITHER = frozenset({True, False})
_OPS = {
    ast.GtE: lambda a, b: a >= b, ast.Gt: lambda a, b: a > b, ast.LtE: lambda a, b: a <= b,
    ast.Lt: lambda a, b: a < b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
}
_OP_WORDS = {
    ">=": ast.GtE, ">": ast.Gt, "<=": ast.LtE, "<": ast.Lt, "==": ast.Eq, "!=": ast.NotEq,
    "ge": ast.GtE, "gt": ast.Gt, "le": ast.LtE, "lt": ast.Lt, "eq": ast.Eq, "ne": ast.NotEq,
}
_FLIP = {ast.GtE: ast.LtE, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.Lt: ast.Gt, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
# a flag that names a release in its name: XLA_GE_2_1, _XLA_AVAILABLE_GE_2_1,
# _TORCH_XLA_GREATER_EQUAL_2_1, _TORCH_GREATER_EQUAL_2_0, IS_XLA_2_1_OR_NEWER
_FLAG_OPS = (
    ("GREATER_EQUAL", ast.GtE), ("GREATER_OR_EQUAL", ast.GtE), ("AT_LEAST", ast.GtE), ("ATLEAST", ast.GtE),
    ("GE", ast.GtE), ("MIN", ast.GtE), ("GREATER_THAN", ast.Gt), ("GREATER", ast.Gt), ("NEWER_THAN", ast.Gt),
    ("GT", ast.Gt), ("LESS_EQUAL", ast.LtE), ("LESS_OR_EQUAL", ast.LtE), ("LE", ast.LtE),
    ("LESS_THAN", ast.Lt), ("LESS", ast.Lt), ("OLDER_THAN", ast.Lt), ("BEFORE", ast.Lt), ("LT", ast.Lt),
    ("BELOW", ast.Lt), ("EQUAL", ast.Eq), ("EQ", ast.Eq),
)
_FLAG = re.compile(
    r"(?:^|_)(?P<op>" + "|".join(word for word, _ in _FLAG_OPS) + r")_?V?(?P<v>\d+(?:_\d+){1,2})(?:_|$)"
    r"|(?:^|_)V?(?P<v2>\d+(?:_\d+){1,2})_?(?P<suffix>OR_NEWER|OR_LATER|OR_ABOVE|OR_GREATER|PLUS|OR_OLDER"
    r"|OR_EARLIER|OR_BELOW|OR_LESS)(?:_|$)"
)
_FLAG_OP = dict(_FLAG_OPS)
_AVAILABLE = re.compile(r"(?i)xla\w*available|available\w*xla|has_(?:torch_)?xla$")
_PACKAGE = re.compile(r"(?i)\s*(torch[-_.]xla|torch)\s*(?:\[[^\]]*\])?\s*(.*)")
_SPEC = re.compile(r"\s*(~=|===|==|!=|>=|<=|>|<)\s*v?([\d.*]+)\s*")
_VERSION_OF_NAME = re.compile(r"(?i)(?:xla|torch)\w*version|version\w*(?:xla|torch)")


class _Truth(NamedTuple):
    possible: FrozenSet[bool]  # the values the test can take on the target
    release: bool = False  # the test depends on the torch/torch_xla release
    unknown: bool = False  # ... in a way that could not be evaluated


_FREE = _Truth(_EITHER)


class _Evaluator:
    """Evaluates a test against the target release, three-valued. torch and torch_xla releases
    go in lockstep (torch_xla 2.x needs torch 2.x), so a torch version check is judged against
    the same major.minor."""

    def __init__(self, scope: Scope, target: Optional[Version], lines: Optional[Sequence[str]],
                 resolve: Resolve) -> None:
        self.scope = scope
        self.target = target
        self.lines = lines
        self.resolve = resolve
        self.depth = 0

    def truth(self, node: ast.AST) -> _Truth:
        if self.depth > 20:
            return _Truth(_EITHER, True, True)
        self.depth += 1
        try:
            return self._truth(node)
        finally:
            self.depth -= 1

    def _truth(self, node: ast.AST) -> _Truth:
        kind = type(node)
        if kind is ast.UnaryOp and type(node.op) is ast.Not:
            inner = self.truth(node.operand)
            return inner._replace(possible=frozenset(not v for v in inner.possible))
        if kind is ast.BoolOp:
            parts = [self.truth(v) for v in node.values]
            if type(node.op) is ast.And:
                can_true = all(True in p.possible for p in parts)
                can_false = any(False in p.possible for p in parts)
            else:
                can_true = any(True in p.possible for p in parts)
                can_false = all(False in p.possible for p in parts)
            possible = frozenset(v for v, ok in ((True, can_true), (False, can_false)) if ok)
            return _Truth(possible, any(p.release for p in parts), any(p.unknown for p in parts))
        if kind is ast.Compare:
            return self._compare(node)
        if kind is ast.Call:
            return self._call(node)
        if kind in (ast.Name, ast.Attribute):
            return self._flag(node)
        return self._leftover(node)

    def _leftover(self, node: ast.AST) -> _Truth:
        """A test we cannot evaluate: still a release check (compat both ways) when it mentions
        a release the way the old heuristics recognise."""
        if not may_mention_release(self.lines, node):
            return _FREE
        for sub in walk([node]):
            kind = type(sub)
            if kind is ast.Attribute:
                if sub.attr == "__version__":
                    base = chain_text(sub.value).lower()
                    if "xla" in base or "torch" in base:
                        return _Truth(_EITHER, True, True)
                elif _VERSION_NAME.search(sub.attr):
                    return _Truth(_EITHER, True, True)
            elif kind is ast.Name:
                if _VERSION_NAME.search(sub.id):
                    return _Truth(_EITHER, True, True)
            elif kind is ast.Constant and type(sub.value) is str:
                if _REQUIREMENT_TEXT.search(sub.value):
                    return _Truth(_EITHER, True, True)
            elif kind is ast.Call and self._feature_check(sub):
                return _Truth(_EITHER, True, True)
        return _FREE

    # -- atoms ------------------------------------------------------------------------------------
    def _flag(self, node: ast.AST) -> _Truth:
        name = node.id if type(node) is ast.Name else node.attr
        if type(node) is ast.Name:
            assigned = self.scope.value_of(name)
            if assigned is not None:
                value, where = assigned
                inner = _Evaluator(where, self.target, self.lines, self.resolve)
                inner.depth = self.depth
                result = inner.truth(value)
                if result.release and not result.unknown:
                    return result
        parsed = _flag_version(name)
        if parsed is not None:
            op, version = parsed
            return self._judge(op, version)
        if _AVAILABLE.search(name):
            return _Truth(_TRUE)  # the target has torch_xla installed; alone this is no release check
        return self._leftover(node)

    def _call(self, node: ast.Call) -> _Truth:
        func = node.func
        name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
        lowered = name.lower()
        strings = [a.value for a in node.args if type(a) is ast.Constant and type(a.value) is str]
        if self._feature_check(node):
            return _Truth(_EITHER, True, True)
        if name in ("hasattr", "getattr"):
            return _FREE
        if "requirement" in lowered or "package_available" in lowered or "module_available" in lowered:
            if strings:
                return self._requirement(strings[0]) if _PACKAGE.fullmatch(strings[0]) else _FREE
        if "version" in lowered or "greater" in lowered or "less" in lowered:
            return self._version_helper(node, lowered, strings)
        if _AVAILABLE.search(name):
            return _Truth(_TRUE)
        return self._leftover(node)

    def _feature_check(self, node: ast.AST) -> bool:
        """``hasattr``/``getattr`` on a torch_xla module or object: a feature check we cannot
        evaluate. On anything else (``hasattr(args, "tpu")``) it is no release check at all."""
        if type(node) is not ast.Call:
            return False
        func = node.func
        if not (type(func) is ast.Name and func.id in ("hasattr", "getattr") and len(node.args) >= 2):
            return False
        resolved = self.resolve(node.args[0], self.scope)
        return resolved is not None and resolved.split(".", 1)[0] == "torch_xla"

    def _requirement(self, text: str) -> _Truth:
        match = _PACKAGE.fullmatch(text)
        if match is None:
            return _FREE
        spec = match.group(2).strip()
        if not spec:
            return _Truth(_TRUE) if "xla" in match.group(1).lower() else _FREE
        results = []
        for clause in spec.split(","):
            found = _SPEC.fullmatch(clause)
            if found is None:
                return _Truth(_EITHER, True, True)
            op, version = found.groups()
            if op == "~=":
                parsed = release_numbers(version)
                if parsed is None:
                    return _Truth(_EITHER, True, True)
                results.append(self._judge(ast.GtE, parsed))
                continue
            if version.endswith(".*") and op in ("==", "!="):
                prefix = [int(p) for p in version[:-2].split(".") if p.isdigit()]
                if self.target is None or not 1 <= len(prefix) <= 2:
                    return _Truth(_EITHER, True, True)
                same = list(self.target)[:len(prefix)] == prefix
                results.append(_Truth(_TRUE if same == (op == "==") else _FALSE, True))
                continue
            parsed = release_numbers(version)
            if parsed is None:
                return _Truth(_EITHER, True, True)
            results.append(self._judge(_OP_WORDS["==" if op == "===" else op], parsed))
        return _Truth(_FALSE if any(r.possible == _FALSE for r in results) else
                      _TRUE if all(r.possible == _TRUE for r in results) else _EITHER,
                      True, any(r.unknown for r in results))

    def _version_helper(self, node: ast.Call, lowered: str, strings: List[str]) -> _Truth:
        """``compare_version("torch_xla", operator.ge, "2.1")``, ``is_torch_version(">=", "2.1")``,
        ``is_torch_greater_or_equal("2.1")``: a package, an operator and a version."""
        package = next((s for s in strings if re.fullmatch(r"(?i)torch([-_.]xla)?", s)), None)
        if package is None and "torch" not in lowered and "xla" not in lowered:
            return self._leftover(node)
        op = None
        for arg in node.args:
            word = arg.value if type(arg) is ast.Constant and type(arg.value) is str else \
                arg.attr if type(arg) is ast.Attribute else arg.id if type(arg) is ast.Name else None
            if word in _OP_WORDS:
                op = _OP_WORDS[word]
        if op is None:
            for words, candidate in (("greater_or_equal", ast.GtE), ("greater_equal", ast.GtE),
                                     ("greater", ast.Gt), ("less_or_equal", ast.LtE), ("less", ast.Lt)):
                if words in lowered:
                    op = candidate
                    break
        version = next((v for v in (release_numbers(s) for s in strings if s != package) if v is not None), None)
        if op is None or version is None:
            return _Truth(_EITHER, True, True)
        return self._judge(op, version)

    def _compare(self, node: ast.Compare) -> _Truth:
        results = []
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if type(op) not in _OPS:
                return self._leftover(node)
            if self._version_of(left) and not self._version_of(right):
                constant, kind = _constant_version(right), type(op)
            elif self._version_of(right) and not self._version_of(left):
                constant, kind = _constant_version(left), _FLIP[type(op)]
            else:
                return self._leftover(node)
            if constant is None:
                return _Truth(_EITHER, True, True)
            results.append(self._judge(kind, constant))
            left = right
        return _Truth(_FALSE if any(r.possible == _FALSE for r in results) else
                      _TRUE if all(r.possible == _TRUE for r in results) else _EITHER,
                      True, any(r.unknown for r in results))

    def _version_of(self, node: ast.AST, depth: int = 0) -> bool:
        """Whether ``node`` is the installed torch/torch_xla version, in any usual spelling."""
        while depth < 12:
            depth += 1
            kind = type(node)
            if kind is ast.Attribute:
                if node.attr == "__version__":
                    base = self.resolve(node.value, self.scope) or chain_text(node.value)
                    return base.split(".", 1)[0] in ("torch", "torch_xla") or "xla" in base.lower()
                if node.attr in ("base_version", "release", "public", "version"):
                    node = node.value
                    continue
                return False
            if kind is ast.Subscript:
                node = node.value
                continue
            if kind in (ast.GeneratorExp, ast.ListComp):
                node = node.generators[0].iter
                continue
            if kind is ast.Call:
                func = node.func
                fname = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
                strings = [a.value for a in node.args if type(a) is ast.Constant and type(a.value) is str]
                if fname in ("getattr",) and len(node.args) >= 2 and strings[:1] == ["__version__"]:
                    node = ast.Attribute(value=node.args[0], attr="__version__", ctx=ast.Load())
                    continue
                if any(re.fullmatch(r"(?i)torch([-_.]xla)?", s) for s in strings) and (
                        "version" in fname.lower() or "distribution" in fname.lower()):
                    return True
                if fname == "split" and type(func) is ast.Attribute:
                    node = func.value
                    continue
                if fname == "map" and len(node.args) == 2:
                    node = node.args[1]
                    continue
                if len(node.args) == 1 and not node.keywords:
                    node = node.args[0]
                    continue
                return False
            if kind is ast.Name:
                assigned = self.scope.value_of(node.id)
                if assigned is not None and assigned[1] is self.scope:
                    node = assigned[0]
                    continue
                return bool(_VERSION_OF_NAME.fullmatch(node.id.strip("_")))
            return False
        return False

    def _judge(self, op: type, version: Tuple[int, int, int]) -> _Truth:
        """``<installed release> <op> version`` on the target (taken as its .0 patch release)."""
        target = self.target
        if target is None:
            return _Truth(_EITHER, True, True)
        if version[:2] == tuple(target) and version[2] != 0:
            return _Truth(_EITHER, True, True)  # a patch release of the target: either way
        value = _OPS[op]((target.major, target.minor, 0), version)
        return _Truth(_TRUE if value else _FALSE, True)


def _flag_version(name: str) -> Optional[Tuple[type, Tuple[int, int, int]]]:
    upper = name.upper()
    if "XLA" not in upper and "TORCH" not in upper:
        return None
    match = _FLAG.search(upper)
    if match is None:
        return None
    if match.group("op"):
        op, digits = _FLAG_OP[match.group("op")], match.group("v")
    else:
        suffix = match.group("suffix")
        op = ast.LtE if suffix.startswith(("OR_OLDER", "OR_EARLIER", "OR_BELOW", "OR_LESS")) else ast.GtE
        digits = match.group("v2")
    numbers = [int(n) for n in digits.split("_")] + [0]
    return op, (numbers[0], numbers[1], numbers[2])


def _constant_version(node: ast.AST) -> Optional[Tuple[int, int, int]]:
    """``"2.1"``, ``(2, 1)``, ``Version("2.1")``, ``version.parse("2.1.0")`` as a release tuple."""
    if type(node) is ast.Constant and type(node.value) is str:
        return release_numbers(node.value)
    if type(node) in (ast.Tuple, ast.List):
        numbers = [e.value for e in node.elts if type(e) is ast.Constant and type(e.value) is int]
        if len(numbers) != len(node.elts) or len(numbers) < 2:
            return None
        numbers += [0]
        return numbers[0], numbers[1], numbers[2]
    if type(node) is ast.Call and len(node.args) == 1 and not node.keywords:
        return _constant_version(node.args[0])
    return None
