"""FSDP, SPMD and checkpoint-save facts.

The qualified names of torch_xla's checkpoint, consolidation and SPMD APIs; the checkpoint facts of a
file (which saves write an FSDPv1 model's sharded state, and whether a path holds the rank); and whether
code belongs to the file's own program. Control flow (positions, run order, where a node sits) is
flake8_xla/analysis/control.py's, bindings analysis/bindings.py's, the wraps themselves analysis/wraps.py's.
"""
from __future__ import annotations

import ast
import functools
import os
import re
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from .assignments import Assignments
from .control import FlowFacts, Position
from ..rule import FileContext
from .semantic import QualifiedNames, SemanticModel
from .syntax import Fact, NodeIndex, argument, dotted, is_constant, is_main_guard, positional_parameters, walk
from .wraps import FsdpWraps, HelperWraps, Wrap

# -- qualified names -------------------------------------------------------------------------------
# savers with xm.save's parameters (data, file_or_path, master_only, global_master)
SAVES = frozenset({"torch_xla.core.xla_model.save", "xla_compat.save", "xla_compat.checkpoint.save"})
TORCH_SAVE = "torch.save"
# calls that build a rank-suffixed path themselves
SHARD_PATHS = frozenset({"xla_compat.shard_path", "xla_compat.checkpoint.shard_path"})
# callees that return the same text for the same arguments: a path built with them has a rank only if its parts do
_PATH_BUILDERS = frozenset({"os.path.join", "os.path.abspath", "os.path.expanduser", "os.path.normpath",
                            "os.fspath", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath"})
_PATH_METHODS = frozenset({"format", "joinpath", "with_suffix", "with_name", "with_stem"})

CHECKPOINT_MODULE = frozenset({"torch_xla.distributed.fsdp.checkpoint_module",
                               "torch_xla.distributed.fsdp.utils.checkpoint_module"})
CONSOLIDATE = frozenset({"torch_xla.distributed.fsdp.consolidate_sharded_model_checkpoints",
                         "torch_xla.distributed.fsdp.state_dict_utils.consolidate_sharded_model_checkpoints"})

USE_SPMD = "torch_xla.runtime.use_spmd"
# torch_xla.distributed.spmd re-exports xla_sharding; torch_xla.experimental.xla_sharding is the pre-2.5 home
SPMD_MODULES = frozenset({"torch_xla.distributed.spmd", "torch_xla.distributed.spmd.xla_sharding",
                          "torch_xla.experimental.xla_sharding"})
# Bases whose code is known not to enable SPMD; any other imported base may do it in setUp.
_INERT_BASES = frozenset({"unittest.TestCase", "torch.nn.Module", "torch.nn.modules.module.Module"})

# -- words ---------------------------------------------------------------------------------------------
# a path, or a name in it, that speaks of these holds the rank
RANK_WORD = re.compile(r"(?i)rank|ordinal|process_index")
# a call or flag that holds on the master process only (``xm.is_master_ordinal()``, ``is_main_process``)
_MASTER_ONLY = re.compile(r"(?i)master|is_main|main_process|process_zero|should_save")
# a test that speaks of these may select one process
MASTER_WORD = re.compile(r"(?i)master|main|rank|ordinal|process_index|process_zero|leader|chief|should_save")


def spmd_api(qualname: str, *leaves: str) -> bool:
    """Whether ``qualname`` is one of ``leaves`` of the SPMD module (any of its import paths)."""
    module, _, leaf = qualname.rpartition(".")
    return leaf in leaves and module in SPMD_MODULES


def has_fsdp_v1(ctx: FileContext) -> bool:
    """The file wraps a model in FSDPv1, itself or, when it saves something, through a helper
    (``model = shard_module_fsdp(model)``)."""
    if any(wrap.kind == "v1" for wrap in ctx.get(FsdpWraps).wraps):
        return True
    calls = ctx.get(NodeIndex).of(ast.Call)
    leaves = {call.func.attr if type(call.func) is ast.Attribute else getattr(call.func, "id", "") for call in calls}
    if "state_dict" not in leaves or not any("save" in leaf.lower() for leaf in leaves):
        return False  # nothing here saves a model's state: no need to ask the helpers (other modules' summaries)
    # only the names whose state is taken, and what the file passes to its own functions (``_save(model)``)
    owners = {dotted(c.func.value) for c in calls if type(c.func) is ast.Attribute and c.func.attr == "state_dict"}
    local = {fn.name for fn in ctx.get(NodeIndex).of(ast.FunctionDef, ast.AsyncFunctionDef)}
    owners.update(dotted(a) for c in calls if type(c.func) is ast.Name and c.func.id in local for a in c.args)
    owners.discard(None)
    return any(wrap.kind == "v1" for wrap in ctx.get(HelperWraps).assigned_to(frozenset(owners)))


# -- programs --------------------------------------------------------------------------------------
def runs_as_program(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` belongs to this file's own program: it runs at top level or the file has a
    ``__main__`` block, and no enclosing class inherits code from another module (a test base class
    may set up SPMD or a mesh in ``setUpClass``). A library module that only defines functions for
    callers elsewhere is not a program: its callers may set things up. Code in a lambda, which may
    run anywhere, is not either."""
    place = ctx.get(FlowFacts).place(node)
    if place is None:
        return False
    if place.owners and not any(is_main_guard(stmt) for stmt in ctx.tree.body):
        return False
    classes = [owner for owner in place.owners if type(owner) is ast.ClassDef]
    return not classes or not _foreign_rooted(ctx, classes)


def _foreign_rooted(ctx: FileContext, classes: List[ast.ClassDef]) -> bool:
    local = {stmt.name: stmt for stmt in ctx.tree.body if type(stmt) is ast.ClassDef}
    seen = set()
    while classes:
        cls = classes.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        for base in cls.bases:
            if type(base) is ast.Name and base.id == "object":
                continue
            qualname = ctx.get(QualifiedNames).qualname(base)
            if qualname is not None:
                if qualname not in _INERT_BASES:
                    return True
            elif type(base) is ast.Name and base.id in local:
                classes.append(local[base.id])
            else:
                return True  # a base we cannot follow
    return False


# -- checkpoints -----------------------------------------------------------------------------------
# what a path expression says about the rank
RANK, SAME, UNKNOWN = "rank", "same", "unknown"


class Save(NamedTuple):
    call: ast.Call
    callee: str  # as written, e.g. "xm.save"
    qualname: str
    data: Optional[ast.expr]
    path: Optional[ast.expr]
    master_only: Optional[ast.expr]  # None: left to the default (True)
    unpacked: bool  # *args or **kwargs: the arguments are unknown
    at: Position
    helper: str = ""  # a helper that saves its argument on the master only: where it does ("utils.py:40")


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def master_only_test(test: ast.AST) -> bool:
    """Whether an if test holds on the master process only: ``xm.is_master_ordinal()``,
    ``is_main_process``, ``rank == 0`` (or an ``and`` holding one)."""
    kind = type(test)
    if kind is ast.BoolOp:
        return type(test.op) is ast.And and any(master_only_test(v) for v in test.values)
    node = test.func if kind is ast.Call else test
    if type(node) in (ast.Name, ast.Attribute):
        return bool(_MASTER_ONLY.search((dotted(node) or "").rsplit(".", 1)[-1]))
    if kind is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Eq:
        left, right = test.left, test.comparators[0]
        side = left if _zero(right) else right if _zero(left) else None
        side = side.func if type(side) is ast.Call else side
        return side is not None and bool(RANK_WORD.search(dotted(side) or ""))
    return False


def _zero(node: ast.AST) -> bool:
    return type(node) is ast.Constant and node.value == 0 and type(node.value) is int


def master_only_saves(fn: ast.AST, method: bool, qualname: Callable[[ast.AST], Optional[str]]) -> Tuple[Tuple[int, int], ...]:
    """(position, line) of the parameters of ``fn`` (``self`` not counted) that it saves on the master
    process only, or something computed from them: ``xm.save(state, path)`` (master_only defaults to True),
    or a save under ``if xm.is_master_ordinal():`` / ``if rank == 0:``; never on every rank."""
    origin: Dict[str, int] = {name: i for i, name in enumerate(positional_parameters(fn, method))}
    if not origin:
        return ()
    own = walk(fn.body, _NESTED)
    assigns = [n for n in own if type(n) is ast.Assign]
    for _ in range(2):  # values computed from values computed from a parameter
        for node in assigns:
            source = _mentioned(node.value, origin)
            if source is not None:
                for target in node.targets:
                    for name in walk([target]):
                        if type(name) is ast.Name and name.id not in origin:
                            origin[name.id] = source
    guarded = set()
    for node in own:
        if type(node) is ast.If and master_only_test(node.test):
            guarded.update(id(n) for n in walk(node.body, _NESTED))
    master: Dict[int, int] = {}
    everyone = set()
    for node in own:
        if type(node) is not ast.Call:
            continue
        name = qualname(node.func)
        if name in SAVES:
            flag = argument(node, 2, "master_only")
            on_master = True if flag is None or is_constant(flag, True) else False if is_constant(flag, False) \
                else None
        else:
            leaf = (name or dotted(node.func) or "").rsplit(".", 1)[-1].lower()
            on_master = id(node) in guarded if "save" in leaf else None
        data = node.args[0] if node.args else None
        source = _mentioned(data, origin) if on_master is not None and data is not None else None
        if source is None:
            continue
        if on_master:
            master[source] = min(master.get(source, node.lineno), node.lineno)
        else:
            everyone.add(source)
    return tuple((p, line) for p, line in sorted(master.items()) if p not in everyone)


def _mentioned(expr: ast.AST, origin: Dict[str, int]) -> Optional[int]:
    """The parameter (position) a name in ``expr`` holds or was computed from, if any."""
    for node in walk([expr], _NESTED):
        if type(node) is ast.Name and node.id in origin:
            return origin[node.id]
    return None


class FsdpState(NamedTuple):
    model: str  # dotted name of the FSDPv1 wrapper
    wrap: Wrap
    call: ast.Call  # the ``model.state_dict()`` call
    passed: Optional[ast.Call] = None  # the call of the file that passes the wrapper for a parameter


class CheckpointFacts(Fact):
    """Checkpoint saves of one file and what their arguments hold, within one scope."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.flow: FlowFacts = ctx.get(FlowFacts)
        self.names = ctx.get(QualifiedNames)
        self.saves: List[Save] = []
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or (ref.qualname not in SAVES and ref.qualname != TORCH_SAVE):
                continue
            at = self.flow.position(call)
            if at is None:
                continue
            data_kw, path_kw = ("obj", "f") if ref.qualname == TORCH_SAVE else ("data", "file_or_path")
            unpacked = any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords)
            self.saves.append(Save(call, ref.written_prefix(ref.qualname), ref.qualname,
                                   argument(call, 0, data_kw), argument(call, 1, path_kw),
                                   argument(call, 2, "master_only") if ref.qualname in SAVES else None,
                                   unpacked, at))

    @functools.cached_property
    def helper_saves(self) -> List[Save]:
        """Calls of helpers, of the file or of another module of the project, that save an argument on
        the master process only (``utils.save_checkpoint(state, path)``)."""
        helpers = self.ctx.get(HelperWraps)
        out: List[Save] = []
        for call in self.ctx.get(NodeIndex).of(ast.Call):
            found = helpers.callee(call) if call.args else None
            if found is None:
                continue
            local, summary = found
            saves = master_only_saves(local, False, self.names.qualname) if local is not None else \
                summary.saves_on_master
            at = self.flow.position(call) if saves else None
            for position, line in saves:
                if at is None or position >= len(call.args) or type(call.args[position]) is ast.Starred:
                    continue
                where = f"line {line}" if local is not None else f"{os.path.basename(summary.path)}:{line}"
                out.append(Save(call, dotted(call.func) or "", "", call.args[position], None, None, False, at, where))
        return out

    @functools.cached_property
    def _calls_of(self) -> Dict[int, List[ast.Call]]:
        """id(function of the file) -> the file's calls that run it (``_save(model, ...)``)."""
        helpers = self.ctx.get(HelperWraps)
        out: Dict[int, List[ast.Call]] = {}
        for call in self.ctx.get(NodeIndex).of(ast.Call):
            if type(call.func) is ast.Name:
                found = helpers.callee(call)
                if found is not None and found[0] is not None:
                    out.setdefault(id(found[0]), []).append(call)
        return out

    @property
    def bindings(self) -> Assignments:
        return self.ctx.get(Assignments)

    # -- what the data holds ------------------------------------------------------------------
    def fsdp_state(self, expr: Optional[ast.AST], depth: int = 3) -> Optional[FsdpState]:
        """The FSDPv1 ``model.state_dict()`` that ``expr`` is or carries (in a dict, list or tuple,
        or through a name bound in the same scope), if any."""
        if expr is None or depth < 0:
            return None
        kind = type(expr)
        if kind is ast.Call:
            if type(expr.func) is ast.Attribute and expr.func.attr == "state_dict":
                return self._fsdp_state_call(expr)
            if type(expr.func) is ast.Name and expr.func.id == "dict" and self.names.reference(expr.func) is None:
                parts = list(expr.args) + [k.value for k in expr.keywords]
                return next(filter(None, (self.fsdp_state(p, depth) for p in parts)), None)
            return None
        if kind is ast.Dict:
            return next(filter(None, (self.fsdp_state(v, depth) for v in expr.values)), None)
        if kind in (ast.List, ast.Tuple):
            return next(filter(None, (self.fsdp_state(e, depth) for e in expr.elts)), None)
        value = self.bindings.value_of(expr)
        return self.fsdp_state(value, depth - 1) if value is not None else None

    def _fsdp_state_call(self, call: ast.Call) -> Optional[FsdpState]:
        name = dotted(call.func.value)
        wrap = self._wrapper(name, call)
        if wrap is not None:
            return FsdpState(name, wrap, call)
        passed = self._passed_wrapper(name, call)
        return FsdpState(name, passed[0], call, passed[1]) if passed is not None else None

    def _wrapper(self, name: Optional[str], node: ast.AST) -> Optional[Wrap]:
        """The FSDPv1 wrapper ``name`` is bound to where ``node`` is, by the file's own wrap or a helper's,
        on a path that can reach ``node``: a wrap under a flag (``if use_fsdp:``) counts, as the program
        runs it whenever FSDP is on; a save on the flag's other side does not see it."""
        at = self.flow.position(node)
        if name is None or at is None:
            return None
        wrap = self.ctx.get(FsdpWraps).wrapped_names(at.scope, at.order).get(name) or \
            self.ctx.get(HelperWraps).wrapper_at(name, node)
        if wrap is None or wrap.kind != "v1" or not self.flow.flag_dominates(wrap.at, at):
            return None
        return wrap

    def _passed_wrapper(self, name: Optional[str], node: ast.AST):
        """(wrapper, call) when ``name`` is a parameter of the function around ``node``, never assigned
        there, and a call of the file passes it an FSDPv1 wrapper (one such call is enough)."""
        at = self.flow.position(node)
        fn = at.scope if at is not None else None
        if name is None or type(fn) not in (ast.FunctionDef, ast.AsyncFunctionDef) or \
                self.bindings.bindings_before(name, at):
            return None
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if name not in params:
            return None
        for call in self._calls_of.get(id(fn), ()):
            given = argument(call, params.index(name), name)
            wrap = self._wrapper(dotted(given), call) if given is not None else None
            if wrap is not None:
                return wrap, call
        return None

    # -- what the path says about the rank ----------------------------------------------------
    def path_kind(self, expr: Optional[ast.AST], part: bool = False, depth: int = 4) -> str:
        """RANK when ``expr`` mentions the rank, SAME when it is provably the same text on every
        rank, else UNKNOWN. ``part``: ``expr`` is a piece of a larger path, where an attribute of a
        configuration object (``args.output_dir``) is taken as the same on every rank."""
        if expr is None or depth < 0:
            return UNKNOWN
        kind = type(expr)
        if kind is ast.Constant:
            return SAME if type(expr.value) in (str, bytes) else UNKNOWN
        if kind is ast.JoinedStr:
            return combine(self.path_kind(v.value, True, depth) for v in expr.values
                           if type(v) is ast.FormattedValue)
        if kind is ast.BinOp and type(expr.op) in (ast.Add, ast.Mod, ast.Div):
            return combine(self.path_kind(side, True, depth) for side in (expr.left, expr.right))
        if kind is ast.Tuple:
            return combine(self.path_kind(e, True, depth) for e in expr.elts)
        if kind is ast.Call:
            return self._call_path_kind(expr, depth)
        name = dotted(expr)
        if name is None:
            return UNKNOWN
        if RANK_WORD.search(name):
            return RANK
        value = self.bindings.value_of(expr)
        if value is not None:
            return self.path_kind(value, part, depth - 1)
        if part and kind is ast.Attribute and name.split(".", 1)[0] not in ("self", "cls"):
            return SAME
        return UNKNOWN

    def _call_path_kind(self, call: ast.Call, depth: int) -> str:
        func = call.func
        ref = self.names.reference(func)
        text = ref.qualname if ref is not None else (dotted(func) or "")
        if RANK_WORD.search(text) or text in SHARD_PATHS:
            return RANK
        if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
            return UNKNOWN
        parts = list(call.args) + [k.value for k in call.keywords]
        if text in _PATH_BUILDERS or (type(func) is ast.Name and func.id == "str" and ref is None):
            return combine(self.path_kind(p, True, depth) for p in parts)
        if ref is None and type(func) is ast.Attribute and func.attr in _PATH_METHODS:
            return combine(self.path_kind(p, True, depth) for p in [func.value] + parts)
        return UNKNOWN


def combine(kinds: Iterator[str]) -> str:
    seen = SAME
    for kind in kinds:
        if kind == RANK:
            return RANK
        if kind == UNKNOWN:
            seen = UNKNOWN
    return seen
