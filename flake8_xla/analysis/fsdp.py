"""FSDP and SPMD facts shared by the XLA2xx rules.

What the rules must agree on, kept in one place: the qualified names of torch_xla's checkpoint,
consolidation and SPMD APIs; the checkpoint facts of a file (which saves write an FSDPv1
model's sharded state, and whether a path holds the rank); whether code belongs to the file's own
program; and the import headers that the rules' examples share. Control flow (positions, run
order, bindings, where a node sits) is flake8_xla/analysis/flow.py's.
"""
from __future__ import annotations

import ast
import re
import weakref
from typing import Iterator, List, NamedTuple, Optional

from .flow import FlowFacts, Position, Wrap, argument, dotted, is_main_guard
from ..rule import FileContext
from .semantic import SemanticModel

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
# a test that speaks of these may select one process
MASTER_WORD = re.compile(r"(?i)master|main|rank|ordinal|process_index|process_zero|leader|chief|should_save")

# -- example headers -------------------------------------------------------------------------------
EXAMPLE_FSDP = "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
EXAMPLE_FSDPV2 = ("from torch_xla.experimental.spmd_fully_sharded_data_parallel import (\n"
                  "    SpmdFullyShardedDataParallel as FSDPv2,\n)\n")
EXAMPLE_XM = "import torch_xla.core.xla_model as xm\n"
EXAMPLE_XR = "import torch_xla.runtime as xr\n"
EXAMPLE_SPMD = "import torch_xla.distributed.spmd as xs\n" + EXAMPLE_XR
EXAMPLE_CHECKPOINT = EXAMPLE_XR + "import xla_compat\n" + EXAMPLE_FSDP  # XLA205-XLA207


def spmd_api(qualname: str, *leaves: str) -> bool:
    """Whether ``qualname`` is one of ``leaves`` of the SPMD module (any of its import paths)."""
    module, _, leaf = qualname.rpartition(".")
    return leaf in leaves and module in SPMD_MODULES


def has_fsdp_v1(ctx: FileContext) -> bool:
    return any(wrap.kind == "v1" for wrap in ctx.get(FlowFacts).wraps)


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
            qualname = ctx.get(FlowFacts).qualname(base)
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


class FsdpState(NamedTuple):
    model: str  # dotted name of the FSDPv1 wrapper
    wrap: Wrap
    call: ast.Call  # the ``model.state_dict()`` call


class CheckpointFacts:
    """Checkpoint saves of one file and what their arguments hold, within one scope."""

    def __init__(self, ctx: FileContext) -> None:
        self.flow: FlowFacts = ctx.get(FlowFacts)
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
            if type(expr.func) is ast.Name and expr.func.id == "dict" and self.flow.reference(expr.func) is None:
                parts = list(expr.args) + [k.value for k in expr.keywords]
                return next(filter(None, (self.fsdp_state(p, depth) for p in parts)), None)
            return None
        if kind is ast.Dict:
            return next(filter(None, (self.fsdp_state(v, depth) for v in expr.values)), None)
        if kind in (ast.List, ast.Tuple):
            return next(filter(None, (self.fsdp_state(e, depth) for e in expr.elts)), None)
        value = self.flow.value_of(expr)
        return self.fsdp_state(value, depth - 1) if value is not None else None

    def _fsdp_state_call(self, call: ast.Call) -> Optional[FsdpState]:
        name, at = dotted(call.func.value), self.flow.position(call)
        if name is None or at is None:
            return None
        wrap = self.flow.wrapped_names(at.scope, at.order).get(name)
        if wrap is None or wrap.kind != "v1" or not self.flow.dominates(wrap.at, at):
            return None
        return FsdpState(name, wrap, call)

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
        value = self.flow.value_of(expr)
        if value is not None:
            return self.path_kind(value, part, depth - 1)
        if part and kind is ast.Attribute and name.split(".", 1)[0] not in ("self", "cls"):
            return SAME
        return UNKNOWN

    def _call_path_kind(self, call: ast.Call, depth: int) -> str:
        func = call.func
        ref = self.flow.reference(func)
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


_FACTS: "weakref.WeakKeyDictionary[FileContext, CheckpointFacts]" = weakref.WeakKeyDictionary()


def checkpoint_facts(ctx: FileContext) -> CheckpointFacts:
    """Computed once per file, shared by XLA205-XLA207."""
    facts = _FACTS.get(ctx)
    if facts is None:
        facts = _FACTS[ctx] = CheckpointFacts(ctx)
    return facts


def combine(kinds: Iterator[str]) -> str:
    seen = SAME
    for kind in kinds:
        if kind == RANK:
            return RANK
        if kind == UNKNOWN:
            seen = UNKNOWN
    return seen
