"""XLA208 fsdp-unguarded-consolidation."""
import ast
import builtins
from typing import Dict, Iterator, List, Optional, Set, Tuple

from flake8_xla.analysis.fsdp import EXAMPLE_XM as XM
from flake8_xla.analysis.fsdp import EXAMPLE_XR as XR
from flake8_xla.analysis.fsdp import CONSOLIDATE, LAUNCH, MASTER_WORD, PARTIAL, SPAWN
from flake8_xla.analysis.flow import FSDP_V1, FlowFacts, argument, dotted
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import Reference
from flake8_xla.analysis.semantic import SemanticModel

CONSOLIDATORS = CONSOLIDATE | {"xla_compat.consolidate_sharded", "xla_compat.checkpoint.consolidate_sharded"}
# start ``fn(index, ...)`` once per process
LAUNCHERS = LAUNCH | SPAWN | {"torch.multiprocessing.spawn"}
_BUILTINS = frozenset(dir(builtins))
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)

HEADER = ("import torch_xla\nimport xla_compat\nfrom torch_xla.distributed.fsdp import (\n"
          "    XlaFullyShardedDataParallel as FSDP,\n    consolidate_sharded_model_checkpoints,\n)\n")
SAVE = "    xla_compat.save_sharded(model, '/tmp/ckpt')\n"
CONSOLIDATE_CALL = "consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/{}', ckpt_suffix='_rank-*-of-*.pth')\n"


class FsdpUnguardedConsolidation(Rule):
    code = "XLA208"
    name = "fsdp-unguarded-consolidation"
    summary = "FSDP checkpoint consolidation run by every rank"
    what_it_does = (
        "Flags `consolidate_sharded_model_checkpoints(...)` (and `xla_compat.consolidate_sharded`) in "
        "code that runs on every rank, unless an enclosing `if` (or an early `return`) checks the "
        "master: `xm.is_master_ordinal(...)`, `xr.global_ordinal() == 0`, `rank == 0`, and the like. "
        "Code runs on every rank when its function builds an `XlaFullyShardedDataParallel`, is "
        "started with `torch_xla.launch`/`xmp.spawn`, or is called unguarded from such a function; "
        "module code when it builds one. Scripts that only consolidate, and code after a launch "
        "returns, are left alone, as are tests the rule cannot read (a flag from a parameter)."
    )
    why_bad = (
        "Consolidation loads every rank's shard file and writes one full checkpoint. Run by every "
        "rank, each process holds all the shards in host memory at once and all of them write the "
        "same consolidated file concurrently, which can leave it truncated or mixed. It must run once, "
        "on the master, after a barrier that ensures every rank has finished writing its shard."
    )
    fix_safety = "No automatic fix: the guard and the barrier depend on how the surrounding code syncs the ranks."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/test/test_train_mp_mnist_fsdp_with_ckpt.py",)
    valid = (
        Example(HEADER + XR + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE +
                "    if xr.global_ordinal() == 0:\n"
                "        " + CONSOLIDATE_CALL.format("ckpt") +
                "    xla_compat.rendezvous('ckpt_consolidation')\n\n"
                "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
                title="on the master only, after the shards are written"),
        Example(HEADER + XM + XR + "\ndef train_mnist(flags):\n    model = FSDP(Net())\n"
                "    ckpt = {'model': model.state_dict(), 'shard_metadata': model.get_shard_metadata()}\n"
                "    ckpt_path = f'/tmp/mnist_rank-{xr.global_ordinal()}-of-{xr.world_size()}.pth'\n"
                "    xm.save(ckpt, ckpt_path, master_only=False)\n    xm.rendezvous('ckpt_consolidation')\n"
                "    if xm.is_master_ordinal(local=False):\n"
                "        " + CONSOLIDATE_CALL.format("mnist"),
                title="the reference pattern (torch_xla's MNIST FSDP test)"),
        Example(HEADER + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE +
                "    if index != 0:\n        return\n"
                "    consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/ckpt', ckpt_suffix='_rank-*-of-*.pth')\n\n"
                "torch_xla.launch(_mp_fn)\n",
                title="an early return on the other ranks"),
        Example("from torch_xla.distributed.fsdp import consolidate_sharded_model_checkpoints\n\n"
                "consolidate_sharded_model_checkpoints(ckpt_prefix=args.prefix, ckpt_suffix='_rank-*-of-*.pth')\n",
                title="an offline script that only consolidates"),
        Example(HEADER + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE + "\n"
                "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
                "    consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/ckpt', ckpt_suffix='_rank-*-of-*.pth')\n",
                title="after the launch returns: one process"),
        Example(HEADER + "\ndef train(net, is_writer):\n    model = FSDP(net)\n" + SAVE +
                "    if is_writer:\n        xla_compat.consolidate_sharded('/tmp/ckpt', world=8)\n",
                title="a test on a parameter may be the master check: silent"),
    )
    invalid = (
        Example(
            HEADER + "\ndef _mp_fn(index):\n    model = FSDP(Net())\n" + SAVE +
            "    consolidate_sharded_model_checkpoints(ckpt_prefix='/tmp/ckpt', ckpt_suffix='_rank-*-of-*.pth')\n\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            expect=((11, 5, "consolidate_sharded_model_checkpoints() runs on every rank (`_mp_fn` is launched "
                            "on every rank by torch_xla.launch, line 14): each process loads all the shards and "
                            "writes the same consolidated file; call it once, on the master "
                            "(`if xm.is_master_ordinal(local=False):`), after a barrier"),),
        ),
        Example(
            HEADER + "\ndef consolidate(flags):\n    if flags.ckpt_consolidation:\n"
            "        consolidate_sharded_model_checkpoints(ckpt_prefix=flags.prefix)\n\n"
            "def _mp_fn(index, flags):\n    train(flags)\n    consolidate(flags)\n\n"
            "torch_xla.launch(_mp_fn, args=(flags,))\n",
            expect=((10, 9, "consolidate_sharded_model_checkpoints() runs on every rank (`consolidate` is called "
                            "from `_mp_fn`, line 14, which runs on every rank): each process loads all the shards "
                            "and writes the same consolidated file; call it once, on the master "
                            "(`if xm.is_master_ordinal(local=False):`), after a barrier"),),
            title="called from a launched function, under a test that is not a master check",
        ),
        Example(
            HEADER + "import functools\n\ndef run(index, prefix):\n"
            "    xla_compat.consolidate_sharded(prefix, world=8, save_path=prefix + '.pth')\n\n"
            "torch_xla.launch(functools.partial(run, prefix='/tmp/ckpt'))\n",
            expect=((10, 5, "xla_compat.consolidate_sharded() runs on every rank (`run` is launched on every rank "
                            "by torch_xla.launch, line 12): each process loads all the shards and writes the same "
                            "consolidated file; call it once, on the master "
                            "(`if xm.is_master_ordinal(local=False):`), after a barrier"),),
            title="the companion in a launched function",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        calls = [r for r in ctx.get(SemanticModel).references if r.qualname in CONSOLIDATORS and r.call is not None]
        if not calls:
            return
        ranks = _EveryRank(ctx)
        for ref in calls:
            owner = ranks.owner(ref.call)
            reason = ranks.reason(owner)
            if reason is None or ranks.guarded(ref.call, owner):
                continue
            effect = "loads all the shards and writes the same consolidated file" if _writes(ref) else \
                "loads all the shards into host memory"
            yield self.diagnostic(ctx, ref.call, (
                f"{ref.written_prefix(ref.qualname)}() runs on every rank ({reason}): each process {effect}; "
                "call it once, on the master (`if xm.is_master_ordinal(local=False):`), after a barrier"))


class _EveryRank:
    """Which functions of a file run on every rank, and which statements only one rank reaches."""

    def __init__(self, ctx: FileContext) -> None:
        self.tree = ctx.tree
        self.parents: Dict[int, ast.AST] = {}
        self.defs: Dict[str, List[ast.AST]] = {}
        for node in ast.walk(ctx.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, _FUNCTIONS):
                self.defs.setdefault(node.name, []).append(node)
        self.rank_index: Set[Tuple[int, str]] = set()  # (function, parameter) holding the launch index
        self.reasons: Dict[int, str] = {}
        self.launching: Set[int] = set()  # functions (or the module) that start the processes: the parent
        self._locals: Dict[int, Dict[str, List[Optional[ast.AST]]]] = {}
        self.flow = ctx.get(FlowFacts)
        for ref in ctx.get(SemanticModel).references:
            if ref.qualname in FSDP_V1 and not ref.is_import and _builds(ref, self.flow):
                self._mark_builder(ref.node)
        for ref in ctx.get(SemanticModel).references:
            if ref.qualname in LAUNCHERS and ref.call is not None:
                self._mark_launched(ref)
        for owner in self.launching:  # code around a launch runs once, in the parent process
            self.reasons.pop(owner, None)
        self._propagate()

    # -- what runs on every rank ----------------------------------------------------------
    def owner(self, node: ast.AST) -> ast.AST:
        """The function (not lambda) whose body holds ``node``, or the module."""
        parent = self.parents.get(id(node))
        while parent is not None and not isinstance(parent, _FUNCTIONS):
            parent = self.parents.get(id(parent))
        return parent if parent is not None else self.tree

    def reason(self, owner: ast.AST) -> Optional[str]:
        return self.reasons.get(id(owner))

    def _mark_builder(self, node: ast.AST) -> None:
        owner = self.owner(node)
        if owner is self.tree:
            self.reasons.setdefault(id(owner), f"module code that builds FSDP, line {node.lineno}")
        while owner is not self.tree:  # an FSDP built in a nested function is part of the outer one's work
            self.reasons.setdefault(id(owner), f"`{owner.name}` builds FSDP, line {node.lineno}")
            owner = self.owner(owner)

    def _mark_launched(self, ref: Reference) -> None:
        call = ref.call
        self.launching.add(id(self.owner(call)))
        target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "fn"), None)
        if type(target) is ast.Call and self.flow.qualname(target.func) == PARTIAL and target.args:
            target = target.args[0]
        if type(target) is not ast.Name:
            return
        launcher = ref.written_prefix(ref.qualname)
        for fn in self.defs.get(target.id, ()):
            self.reasons[id(fn)] = f"`{fn.name}` is launched on every rank by {launcher}, line {call.lineno}"
            params = fn.args.posonlyargs + fn.args.args
            if params:
                self.rank_index.add((id(fn), params[0].arg))

    def _propagate(self) -> None:
        """A function called, without a master check, from one that runs on every rank runs there too."""
        pending = [fn for fn in [self.tree] + [d for defs in self.defs.values() for d in defs]
                   if id(fn) in self.reasons]
        while pending:
            caller = pending.pop()
            label = f"`{caller.name}`" if isinstance(caller, _FUNCTIONS) else "the module code"
            for node in ast.walk(caller):
                if type(node) is not ast.Call or type(node.func) is not ast.Name or \
                        self.owner(node) is not caller or self.guarded(node, caller):
                    continue
                for fn in self.defs.get(node.func.id, ()):
                    if id(fn) not in self.reasons and id(fn) not in self.launching:
                        self.reasons[id(fn)] = (f"`{fn.name}` is called from {label}, line {node.lineno}, "
                                                "which runs on every rank")
                        pending.append(fn)

    # -- master checks ----------------------------------------------------------------------
    def guarded(self, node: ast.AST, owner: ast.AST) -> bool:
        """Whether an enclosing ``if`` (or conditional expression, ``and``/``or``), or an earlier
        ``if ...: return`` in an enclosing block, may restrict ``node`` to one rank. Inside a lambda
        it is whoever calls the lambda (``xm.do_on_ordinals``...) that decides: unknown."""
        child, parent = node, self.parents.get(id(node))
        while parent is not None:
            kind = type(parent)
            if kind is ast.Lambda:
                return True
            if kind in (ast.If, ast.IfExp) and child is not parent.test and self._master_test(parent.test, owner):
                return True
            if kind is ast.BoolOp and any(self._master_test(v, owner) for v in parent.values if v is not child):
                return True
            if isinstance(child, ast.stmt):
                for block in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")):
                    if block and child in block and any(
                            type(s) is ast.If and _exits(s.body) and self._master_test(s.test, owner)
                            for s in block[:block.index(child)]):
                        return True
            if parent is owner:
                break
            child, parent = parent, self.parents.get(id(parent))
        return False

    def _master_test(self, test: ast.AST, owner: ast.AST) -> bool:
        """Whether ``test`` may check which rank this is. A name the rule cannot read (a parameter, a
        global) may hold such a check, so it counts; an attribute of a configuration object
        (``flags.consolidate``) does not, unless its name speaks of the master or the rank."""
        stack = [test]
        while stack:
            node = stack.pop()
            if type(node) in (ast.Name, ast.Attribute) and dotted(node) is not None:
                text = dotted(node)
                if MASTER_WORD.search(text):
                    return True
                if type(node) is ast.Name and self._may_hold_rank(node.id, owner):
                    return True
                continue
            stack.extend(ast.iter_child_nodes(node))
        return False

    def _may_hold_rank(self, name: str, owner: ast.AST) -> bool:
        if (id(owner), name) in self.rank_index:
            return True
        if name in _BUILTINS:
            return False
        values = self._assigned(owner).get(name)
        if values is None:  # a parameter or a global: unknown
            return True
        return any(v is None or any(type(n) in (ast.Name, ast.Attribute) and MASTER_WORD.search(dotted(n) or "")
                                    for n in ast.walk(v)) for v in values)

    def _assigned(self, owner: ast.AST) -> Dict[str, List[Optional[ast.AST]]]:
        """Names stored in ``owner`` (not in nested functions) -> the values assigned (None when
        stored another way: loop target, ``with ... as``, augmented assignment)."""
        found = self._locals.get(id(owner))
        if found is None:
            found = self._locals[id(owner)] = {}
            for node in ast.walk(owner):
                if type(node) is ast.Name and type(node.ctx) is not ast.Load and self.owner(node) is owner:
                    parent = self.parents.get(id(node))
                    value = parent.value if type(parent) is ast.Assign and node in parent.targets else None
                    found.setdefault(node.id, []).append(value)
        return found


def _builds(ref: Reference, flow: FlowFacts) -> bool:
    """``FSDP(...)`` or ``functools.partial(FSDP, ...)``, not ``isinstance(m, FSDP)``."""
    if ref.call is not None:
        return True
    parent = ref.parent
    return type(parent) is ast.Call and bool(parent.args) and parent.args[0] is ref.node and \
        flow.qualname(parent.func) == PARTIAL


def _writes(ref: Reference) -> bool:
    """Whether the consolidation also saves the merged checkpoint (upstream: unless
    ``save_model=False``; the companion: when given a ``save_path``)."""
    call = ref.call
    if ref.qualname.startswith("xla_compat."):
        return len(call.args) > 2 or any(k.arg in ("save_path", None) for k in call.keywords)
    save_model = argument(call, 3, "save_model")
    return not (type(save_model) is ast.Constant and not save_model.value)


def _exits(body: List[ast.stmt]) -> bool:
    """Whether a block ends by leaving: ``return``, ``raise``, ``continue``, ``break``, ``sys.exit()``."""
    last = body[-1] if body else None
    if type(last) is ast.Expr and type(last.value) is ast.Call:
        return (dotted(last.value.func) or "").rsplit(".", 1)[-1] in ("exit", "_exit")
    return type(last) in (ast.Return, ast.Raise, ast.Continue, ast.Break)
