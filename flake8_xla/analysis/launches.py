"""Which processes a file starts and what runs in them: the ``torch_xla.launch`` / ``xmp.spawn`` /
``torch.multiprocessing.spawn`` calls, the file's functions they launch, the functions every launched
process reaches, and which top-level code leads to a function before a launch."""
from __future__ import annotations

import ast
import functools
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

from .bindings import Bindings
from .callgraph import LocalFunctions
from .semantic import QualifiedNames, SemanticModel
from .syntax import PARTIAL, Fact, NodeIndex, argument, is_constant, is_main_guard, walk

# start ``fn(index, ...)`` once per device
LAUNCH = frozenset({"torch_xla.launch", "torch_xla.torch_xla.launch", "xla_compat.launch",
                    "xla_compat.supervisor.launch"})
SPAWN = frozenset({"torch_xla.distributed.xla_multiprocessing.spawn"})
TORCH_SPAWN = frozenset({"torch.multiprocessing.spawn"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Launch(NamedTuple):
    call: ast.Call
    qualname: str
    spelled: str  # how the call is written: ``torch_xla.launch``, ``xmp.spawn``
    target: Optional[ast.Name]  # the launched function's name, through ``functools.partial``


class Launches(Fact):
    """The file's launch calls, in source order, and the functions they run."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        names = ctx.get(QualifiedNames)
        self.all: List[Launch] = []
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None or not (ref.qualname in LAUNCH or ref.qualname in SPAWN or ref.qualname in TORCH_SPAWN):
                continue
            target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "fn"), None)
            if type(target) is ast.Call and names.qualname(target.func) == PARTIAL and target.args:
                target = target.args[0]
            self.all.append(Launch(call, ref.qualname, ref.written_prefix(ref.qualname),
                                   target if type(target) is ast.Name else None))

    def of(self, qualnames: frozenset) -> List[Launch]:
        return [launch for launch in self.all if launch.qualname in qualnames]

    def processes(self, qualnames: frozenset = LAUNCH | SPAWN) -> List[Launch]:
        """The launches that start new processes (not ``nprocs=1`` nor ``debug_single_process=True``)."""
        return [launch for launch in self.of(qualnames) if not self.single_process(launch)]

    def single_process(self, launch: Launch) -> bool:
        """``xmp.spawn(fn, nprocs=1)`` or ``torch_xla.launch(fn, debug_single_process=True)``, also through a
        name assigned the constant (``nprocs = 1``): one process, the calling one."""
        spawn = launch.qualname not in LAUNCH
        value = argument(launch.call, 2, "nprocs") if spawn else argument(launch.call, 3, "debug_single_process")
        if type(value) is ast.Name:
            value = self.ctx.get(Bindings).assigned_value(value) or value
        return (type(value) is ast.Constant and value.value == 1) if spawn else is_constant(value, True)

    def launched(self, launch: Launch) -> List[ast.AST]:
        """The file's functions (not methods, not imports) that ``launch`` runs in each process."""
        target = launch.target
        if target is None or self.ctx.get(QualifiedNames).qualname(target) is not None:
            return []
        return self.ctx.get(LocalFunctions).functions.get(target.id, [])

    @functools.cached_property
    def reached(self) -> Tuple[Dict[int, str], Dict[Tuple[int, str], ast.expr]]:
        """The functions of the file that run in each launched process: the launched ones and those they
        call (plain names, ``self.m()``; nested defs run with the function around them), each with the
        words that say why; and (id(launched def), parameter) -> what the launch passes it (``args=``)."""
        why: Dict[int, str] = {}
        passed: Dict[Tuple[int, str], ast.expr] = {}
        local = self.ctx.get(LocalFunctions)
        chain: Dict[int, List[str]] = {}  # id(def) -> its name, then its callers' back to the launched one
        launched: Dict[int, str] = {}  # id(def) -> "runs in every process that ... starts"
        pending: List[ast.AST] = []
        for launch in self.processes():
            arguments = argument(launch.call, 1, "args")
            for fn in self.launched(launch):
                if type(arguments) in (ast.Tuple, ast.List):
                    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
                    passed.update(((id(fn), name), value) for name, value in zip(params, arguments.elts)
                                  if type(value) is not ast.Starred)
                if id(fn) not in chain:
                    chain[id(fn)] = [fn.name]
                    launched[id(fn)] = f"runs in every process that {launch.spelled}(...) on line " \
                                       f"{launch.call.lineno} starts"
                    pending.append(fn)
        while pending:
            fn = pending.pop(0)
            for node in walk([fn]):
                if type(node) in _DEFS and node is not fn and id(node) not in chain:
                    chain[id(node)], launched[id(node)] = chain[id(fn)], launched[id(fn)]  # runs with its function
                elif type(node) is ast.Call:
                    for callee in local.targets(node):
                        if id(callee) not in chain:
                            chain[id(callee)] = [callee.name] + chain[id(fn)]
                            launched[id(callee)] = launched[id(fn)]
                            pending.append(callee)
        for key, names in chain.items():
            via = "".join(f", called from `{name}`" for name in names[2:])
            head = f"`{names[0]}`" if len(names) == 1 else f"`{names[0]}` (called from `{names[1]}`{via})"
            why[key] = f"{head} {launched[key]}"
        return why, passed

    def helper_calls(self, uses: List[Tuple[ast.AST, str]]) -> List[Tuple[ast.AST, str, str]]:
        """Calls of the module's top-level functions that contain one of ``uses`` (directly or through each
        other), each spelled (``setup()``) with what it uses (``torch_xla.device() on line 5``): ``setup()``
        before a launch starts the runtime as surely as its body.
        Not the launched functions, and not the ones that launch themselves (their own order decides)."""
        tree = self.ctx.tree
        by_id = {id(node): (node, what) for node, what in uses}
        processes = self.processes()
        launched = {launch.target.id for launch in processes if launch.target is not None}
        launch_calls = {id(launch.call) for launch in processes}
        functions = {node.name: node for node in tree.body if type(node) in _DEFS and node.name not in launched}
        inside = {name: walk([fn]) for name, fn in functions.items()}
        inside = {name: nodes for name, nodes in inside.items() if not any(id(n) in launch_calls for n in nodes)}
        reason: Dict[str, str] = {}
        for name, nodes in inside.items():
            found = min((by_id[id(n)] for n in nodes if id(n) in by_id), default=None,
                        key=lambda pair: (pair[0].lineno, pair[0].col_offset))
            if found is not None:
                reason[name] = f"{found[1]} on line {found[0].lineno}"
        changed = True
        while changed:  # a helper that calls a helper that uses it
            changed = False
            for name, nodes in inside.items():
                if name in reason:
                    continue
                callee = min(((n.lineno, n.col_offset, n.func.id) for n in nodes if type(n) is ast.Call
                              and type(n.func) is ast.Name and n.func.id in reason), default=None)
                if callee is not None:
                    reason[name] = f"{callee[2]}() on line {functions[callee[2]].lineno}"
                    changed = True
        return [(node, f"{node.func.id}()", reason[node.func.id])
                for node in self.ctx.get(NodeIndex).of(ast.Call)
                if type(node.func) is ast.Name and node.func.id in reason]

    # -- what the launching process runs first -----------------------------------------------------------
    @functools.cached_property
    def _top(self) -> Tuple[Dict[str, List[ast.AST]], Dict[str, Set[str]], List[Tuple[int, int]]]:
        """Top-level uses of each name (the call when called), the names each top-level def or class uses,
        and the lines of the ``if __name__ == "__main__":`` blocks."""
        tree = self.ctx.tree
        top: Dict[str, List[ast.AST]] = {}
        inside: Dict[str, Set[str]] = {}
        main = [(stmt.lineno, stmt.end_lineno) for stmt in tree.body if is_main_guard(stmt)]
        stack: List[Tuple[ast.AST, ast.AST]] = [(child, tree) for child in ast.iter_child_nodes(tree)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inside.setdefault(node.name, set()).update(
                    sub.id for sub in walk([node]) if type(sub) is ast.Name and type(sub.ctx) is ast.Load)
                continue
            if type(node) is ast.Name and type(node.ctx) is ast.Load:
                called = type(parent) is ast.Call and parent.func is node
                top.setdefault(node.id, []).append(parent if called else node)
            stack.extend((child, node) for child in ast.iter_child_nodes(node))
        return top, inside, main

    def triggers(self, name: str) -> List[ast.AST]:
        """Top-level code that leads to top-level function (or class) ``name``: its uses at top level, and
        those of the top-level functions and classes that use it (one module, by name)."""
        top, inside, _ = self._top
        reached, frontier = {name}, [name]
        while frontier:
            current = frontier.pop()
            for other, names in inside.items():
                if other not in reached and current in names:
                    reached.add(other)
                    frontier.append(other)
        return [use for n in reached for use in top.get(n, ())]

    def in_main(self, node: ast.AST) -> bool:
        return any(start <= node.lineno <= end for start, end in self._top[2])
