"""XLA205 fsdp-master-only-save, and the checkpoint facts that XLA205-XLA207 share.

Sharing them here keeps the three rules consistent on what an FSDPv1 checkpoint is; they are
candidates for the flow layer (flake8_xla/flow.py)."""
import ast
import re
import weakref
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from flake8_xla.flow import Binding, FlowFacts, Position, Wrap, dotted
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

# savers with xm.save's parameters (data, file_or_path, master_only, global_master)
SAVES = frozenset({"torch_xla.core.xla_model.save", "xla_compat.save", "xla_compat.checkpoint.save"})
TORCH_SAVE = "torch.save"
# calls that build a rank-suffixed path themselves
SHARD_PATHS = frozenset({"xla_compat.shard_path", "xla_compat.checkpoint.shard_path"})
# callees that return the same text for the same arguments: a path built with them has a rank only if its parts do
_PATH_BUILDERS = frozenset({"os.path.join", "os.path.abspath", "os.path.expanduser", "os.path.normpath",
                            "os.fspath", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath"})
_PATH_METHODS = frozenset({"format", "joinpath", "with_suffix", "with_name", "with_stem"})
RANK_WORD = re.compile(r"(?i)rank|ordinal|process_index")

# what a path expression says about the rank
RANK, SAME, UNKNOWN = "rank", "same", "unknown"

# blocks that may not run: a statement in one does not run whenever the code after the block does
_CONDITIONAL_FIELDS = {ast.If: ("body", "orelse"), ast.For: ("body", "orelse"), ast.AsyncFor: ("body", "orelse"),
                       ast.While: ("body", "orelse"), ast.Try: ("orelse",)}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Save:
    call: ast.Call
    callee: str  # as written, e.g. "xm.save"
    qualname: str
    data: Optional[ast.expr]
    path: Optional[ast.expr]
    master_only: Optional[ast.expr]  # None: left to the default (True)
    unpacked: bool  # *args or **kwargs: the arguments are unknown
    at: Position


@dataclass(frozen=True)
class FsdpState:
    model: str  # dotted name of the FSDPv1 wrapper
    wrap: Wrap
    call: ast.Call  # the ``model.state_dict()`` call


class CheckpointFacts:
    """Checkpoint saves of one file and what their arguments hold, within one scope."""

    def __init__(self, ctx: FileContext) -> None:
        self.flow: FlowFacts = ctx.flow
        self._refs = {id(r.node): r for r in ctx.model.references if not r.is_import}
        self._blocks: Dict[int, Dict[int, Tuple]] = {}
        self._names: Dict[int, Dict[str, List[Tuple[int, bool]]]] = {}
        self.saves: List[Save] = []
        for ref in ctx.model.references:
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

    # -- what the data holds ------------------------------------------------------------
    def fsdp_state(self, expr: Optional[ast.AST], depth: int = 3) -> Optional[FsdpState]:
        """The FSDPv1 ``model.state_dict()`` that ``expr`` is or carries (in a dict, list or tuple,
        or through a name bound in the same scope), if any."""
        if expr is None or depth < 0:
            return None
        kind = type(expr)
        if kind is ast.Call:
            if type(expr.func) is ast.Attribute and expr.func.attr == "state_dict":
                return self._fsdp_state_call(expr)
            if type(expr.func) is ast.Name and expr.func.id == "dict" and id(expr.func) not in self._refs:
                parts = list(expr.args) + [k.value for k in expr.keywords]
                return next(filter(None, (self.fsdp_state(p, depth) for p in parts)), None)
            return None
        if kind is ast.Dict:
            return next(filter(None, (self.fsdp_state(v, depth) for v in expr.values)), None)
        if kind in (ast.List, ast.Tuple):
            return next(filter(None, (self.fsdp_state(e, depth) for e in expr.elts)), None)
        value = self.value_of(expr)
        return self.fsdp_state(value, depth - 1) if value is not None else None

    def _fsdp_state_call(self, call: ast.Call) -> Optional[FsdpState]:
        name, at = dotted(call.func.value), self.flow.position(call)
        if name is None or at is None:
            return None
        wrap = self.flow.wrapped_names(at.scope, at.order).get(name)
        if wrap is None or wrap.kind != "v1" or not self.dominates(wrap.at, at):
            return None
        return FsdpState(name, wrap, call)

    # -- what the path says about the rank ----------------------------------------------
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
        value = self.value_of(expr)
        if value is not None:
            return self.path_kind(value, part, depth - 1)
        if part and kind is ast.Attribute and name.split(".", 1)[0] not in ("self", "cls"):
            return SAME
        return UNKNOWN

    def _call_path_kind(self, call: ast.Call, depth: int) -> str:
        func = call.func
        ref = self._refs.get(id(func))
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

    # -- names within one scope ---------------------------------------------------------
    def value_of(self, expr: ast.AST) -> Optional[ast.AST]:
        """The value a dotted name was last assigned in its scope, when that assignment surely
        runs before ``expr`` and nothing else stores the name in between; else None."""
        binding = self.binding_of(expr)
        return binding.value if binding is not None else None

    def binding_of(self, expr: ast.AST) -> Optional[Binding]:
        name, at = dotted(expr), self.flow.position(expr)
        if name is None or at is None:
            return None
        binding = None
        for candidate in self.flow.bindings:  # sorted by order
            if candidate.at.scope is at.scope and candidate.name == name and candidate.at.order < at.order:
                binding = candidate
        if binding is None or not _plain_assignment(binding.at.statement, name):
            return None
        if not self.dominates(binding.at, at) or self.occurs_between(name, at.scope, binding.at.order, at.order,
                                                                     stores_only=True):
            return None
        return binding

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
                at = self.flow.position(node)
                name = dotted(node) if at is not None and at.scope is scope else None
                if name is not None:
                    out.setdefault(name, []).append((at.order, type(node.ctx) is not ast.Load))
        return out

    def dominates(self, earlier: Position, later: Position) -> bool:
        """Whether the statement at ``earlier`` runs whenever the one at ``later`` does: every
        block that may not run (if/else branch, loop body, except handler) around ``earlier`` is
        around ``later`` too."""
        blocks = self._blocks.get(id(earlier.scope))
        if blocks is None:
            blocks = self._blocks[id(earlier.scope)] = _conditional_blocks(earlier.scope)
        first, second = blocks.get(id(earlier.statement), ()), blocks.get(id(later.statement), ())
        return second[:len(first)] == first


_FACTS: "weakref.WeakKeyDictionary[FileContext, CheckpointFacts]" = weakref.WeakKeyDictionary()


def checkpoint_facts(ctx: FileContext) -> CheckpointFacts:
    """Computed once per file, shared by XLA205-XLA207."""
    facts = _FACTS.get(ctx)
    if facts is None:
        facts = _FACTS[ctx] = CheckpointFacts(ctx)
    return facts


def has_fsdp_v1(ctx: FileContext) -> bool:
    return any(wrap.kind == "v1" for wrap in ctx.flow.wraps)


def argument(call: ast.Call, index: int, keyword: str) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index and type(call.args[index]) is not ast.Starred else None


def combine(kinds: Iterator[str]) -> str:
    seen = SAME
    for kind in kinds:
        if kind == RANK:
            return RANK
        if kind == UNKNOWN:
            seen = UNKNOWN
    return seen


def is_constant(node: Optional[ast.AST], value: bool) -> bool:
    return type(node) is ast.Constant and node.value is value


def _plain_assignment(stmt: ast.stmt, name: str) -> bool:
    """``name = value`` (or ``a = name = value`` / ``name: T = value``), not unpacking or ``+=``."""
    if type(stmt) is ast.Assign:
        return any(dotted(t) == name for t in stmt.targets)
    return type(stmt) is ast.AnnAssign and dotted(stmt.target) == name


def _conditional_blocks(scope: ast.AST) -> Dict[int, Tuple]:
    """Statement id -> the conditional blocks around it, outermost first, within ``scope``."""
    out: Dict[int, Tuple] = {}
    stack: List[Tuple[List[ast.stmt], Tuple]] = [(scope.body, ())]
    while stack:
        body, path = stack.pop()
        for stmt in body:
            out[id(stmt)] = path
            if isinstance(stmt, _DEFS):
                continue
            conditional = _CONDITIONAL_FIELDS.get(type(stmt), ())
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if block:
                    stack.append((block, path + ((id(stmt), field),) if field in conditional else path))
            for i, handler in enumerate(getattr(stmt, "handlers", None) or []):
                stack.append((handler.body, path + ((id(stmt), i),)))
            for i, case in enumerate(getattr(stmt, "cases", None) or []):
                stack.append((case.body, path + ((id(stmt), i),)))
    return out


HEADER = ("import torch_xla.runtime as xr\nimport xla_compat\n"
          "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n")
XM = "import torch_xla.core.xla_model as xm\n"


class FsdpMasterOnlySave(Rule):
    code = "XLA205"
    name = "fsdp-master-only-save"
    summary = "An FSDP model's sharded state saved by the master ordinal only"
    what_it_does = (
        "Flags `xm.save(...)` (and `xla_compat.save(...)`) of the `state_dict()` of a model wrapped "
        "with `XlaFullyShardedDataParallel` in the same function, or of a checkpoint dict holding it, "
        "without `master_only=False`: the default `master_only=True` or an explicit one. FSDPv2 "
        "(SPMD) models are not flagged: they are checkpointed with `torch.distributed.checkpoint`."
    )
    why_bad = (
        "Under FSDP each rank holds only its own shard of the parameters, and `model.state_dict()` "
        "returns that shard. With `master_only=True` only the master ordinal writes, so the "
        "checkpoint holds one shard of the model and the other ranks' shards are lost, with no error. "
        "Every rank must save its own shard to its own file, with the shard metadata that "
        "`consolidate_sharded_model_checkpoints` needs to stitch the shards back together."
    )
    fix_safety = ("No automatic fix: per-rank saving also needs a rank-suffixed path and the shard metadata, "
                  "and whatever loads the checkpoint must change with it.")
    references = (
        "https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/fsdp_collectives.md",
        "https://github.com/huggingface/transformers/issues/32310",
    )
    valid = (
        Example(HEADER + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "path = f'/tmp/ckpt_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'\n"
                "xla_compat.save(ckpt, path, master_only=False)\n",
                title="every rank saves its own shard"),
        Example(HEADER + XM + "\nmodel = FSDP(Net())\n"
                "ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata(),\n"
                "        'optimizer': optimizer.state_dict()}\n"
                "ckpt_path = f'/tmp/rank-{xr.global_ordinal()}-of-{xr.world_size()}-mnist.pth'\n"
                "xm.save(ckpt, ckpt_path, master_only=False)\n",
                title="the reference pattern (torch_xla's MNIST FSDP test)"),
        Example(HEADER + XM + "\nmodel = Net().to('xla')\nxm.save(model.state_dict(), '/tmp/model.pt')\n",
                title="a model without FSDP: the master's copy is the whole model"),
        Example(HEADER + XM + "\ndef save(model, path):\n    xm.save(model.state_dict(), path)\n",
                title="a model from a parameter: unknown, silent"),
        Example(HEADER + XM + "\nmodel = Net()\nif use_fsdp:\n    model = FSDP(model)\n"
                "xm.save(model.state_dict(), '/tmp/model.pt')\n",
                title="wrapped only on one branch: unknown, silent"),
        Example(HEADER + XM + "from torch_xla.experimental.spmd_fully_sharded_data_parallel import (\n"
                "    SpmdFullyShardedDataParallel as FSDPv2,\n)\n\n"
                "model = FSDPv2(Net(), mesh=mesh)\nxm.save(model.state_dict(), '/tmp/model.pt')\n",
                title="FSDPv2 (SPMD) is a different story"),
    )
    invalid = (
        Example(
            HEADER + "\nmodel = FSDP(Net())\nxla_compat.save(model.state_dict(), '/tmp/model.pt')\n",
            expect=((6, 1, "xla_compat.save() writes only the master's shard of FSDP model `model` (line 5): "
                           "master_only defaults to True; save every rank's shard with master_only=False, a "
                           "rank-suffixed path and model.get_shard_metadata()"),),
        ),
        Example(
            HEADER + XM + "\ndef train(net):\n    model = FSDP(net)\n"
            "    ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
            "    xm.save(ckpt, f'/tmp/rank-{xr.global_ordinal()}.pth', master_only=True)\n",
            expect=((9, 59, "xm.save(master_only=True) writes only the master's shard of FSDP model `model` "
                            "(line 7); save every rank's shard with master_only=False, a rank-suffixed path and "
                            "model.get_shard_metadata()"),),
            title="an explicit master_only=True, in a training function",
        ),
        Example(
            HEADER + XM + "\nclass Trainer:\n    def fit(self):\n        self.model = FSDP(self.model)\n"
            "        state = self.model.state_dict()\n        xm.save({'model': state}, '/tmp/model.pt')\n",
            expect=((10, 9, "xm.save() writes only the master's shard of FSDP model `self.model` (line 8): "
                            "master_only defaults to True; save every rank's shard with master_only=False, a "
                            "rank-suffixed path and self.model.get_shard_metadata()"),),
            title="through a variable and a dict",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        if not has_fsdp_v1(ctx):
            return
        facts = checkpoint_facts(ctx)
        for save in facts.saves:
            if save.qualname not in SAVES or save.unpacked:
                continue
            if save.master_only is not None and not is_constant(save.master_only, True):
                continue
            state = facts.fsdp_state(save.data)
            if state is None:
                continue
            model, line = state.model, state.wrap.call.lineno
            fix = (f"save every rank's shard with master_only=False, a rank-suffixed path and "
                   f"{model}.get_shard_metadata()")
            if save.master_only is None:
                yield self.diagnostic(ctx, save.call, f"{save.callee}() writes only the master's shard of FSDP "
                                                      f"model `{model}` (line {line}): master_only defaults to "
                                                      f"True; {fix}")
            else:
                node = next((k for k in save.call.keywords if k.value is save.master_only), save.master_only)
                yield self.diagnostic(ctx, node, f"{save.callee}(master_only=True) writes only the master's shard "
                                                 f"of FSDP model `{model}` (line {line}); {fix}")
