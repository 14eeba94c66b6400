"""XLA216 fsdpv2-without-spmd.

Also home of the small SPMD helpers the XLA216-XLA222 family shares (qualified names of the SPMD
API, and ``locate``: scope and branch of a node in files the FSDP flow layer does not cover)."""
import ast
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from flake8_xla.flow import FSDP_V2
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

USE_SPMD = "torch_xla.runtime.use_spmd"
# torch_xla.distributed.spmd re-exports xla_sharding; torch_xla.experimental.xla_sharding is the pre-2.5 home
SPMD_MODULES = frozenset({"torch_xla.distributed.spmd", "torch_xla.distributed.spmd.xla_sharding",
                          "torch_xla.experimental.xla_sharding"})
# Bases whose code is known not to enable SPMD; any other imported base may do it in setUp.
_INERT_BASES = frozenset({"unittest.TestCase", "torch.nn.Module", "torch.nn.modules.module.Module"})

FSDP2 = ("from torch_xla.experimental.spmd_fully_sharded_data_parallel import (\n"
         "    SpmdFullyShardedDataParallel as FSDPv2,\n)\n")
SPMD = "import torch_xla.distributed.spmd as xs\nimport torch_xla.runtime as xr\n"


def spmd_api(qualname: str, *leaves: str) -> bool:
    """Whether ``qualname`` is one of ``leaves`` of the SPMD module (any of its import paths)."""
    module, _, leaf = qualname.rpartition(".")
    return leaf in leaves and module in SPMD_MODULES


class Place(NamedTuple):
    scope: ast.AST  # innermost function or class (the module at top level)
    owners: Tuple[ast.AST, ...]  # enclosing functions and classes, outermost first
    # (compound statement, branch) pairs between the scope and the node: if/else, match cases and
    # except handlers; loop, with and try bodies run unconditionally enough and add nothing
    branches: Tuple[Tuple[int, object], ...]


def locate(tree: ast.AST, nodes: Iterable[ast.AST]) -> Dict[int, Place]:
    """The Place of each node, by id. Nodes inside lambdas are left out: when they run is unknown.
    The module's ``if __name__ == "__main__":`` block counts as top level."""
    wanted = {id(node) for node in nodes}
    out: Dict[int, Place] = {}
    stack: List[Tuple[ast.AST, Tuple[ast.AST, ...], tuple]] = [(tree, (), ())]
    while stack and len(out) < len(wanted):
        node, owners, branches = stack.pop()
        if id(node) in wanted:
            out[id(node)] = Place(owners[-1] if owners else tree, owners, branches)
        kind = type(node)
        if kind is ast.Lambda:
            continue
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            outer = node.decorator_list + (node.bases + [k.value for k in node.keywords] if kind is ast.ClassDef
                                           else node.args.defaults + [d for d in node.args.kw_defaults if d])
            stack.extend((child, owners, branches) for child in outer)
            stack.extend((stmt, owners + (node,), ()) for stmt in node.body)
        elif kind is ast.If:
            stack.append((node.test, owners, branches))
            body = branches if not owners and is_main_guard(node) else branches + ((id(node), "body"),)
            stack.extend((stmt, owners, body) for stmt in node.body)
            stack.extend((stmt, owners, branches + ((id(node), "else"),)) for stmt in node.orelse)
        elif kind is ast.Match:
            stack.append((node.subject, owners, branches))
            for number, case in enumerate(node.cases):
                stack.extend((child, owners, branches + ((id(node), number),))
                             for child in [case.pattern, case.guard] + case.body if child is not None)
        elif kind is ast.ExceptHandler:
            inner = branches + ((id(node), "except"),)
            stack.extend((child, owners, inner) for child in ast.iter_child_nodes(node))
        else:
            stack.extend((child, owners, branches) for child in ast.iter_child_nodes(node))
    return out


def within(inner: Place, outer: Place) -> bool:
    """Whether ``inner`` runs whenever ``outer`` does, as far as branches tell: same scope, and
    every branch ``outer`` sits in also holds ``inner``."""
    return inner.scope is outer.scope and inner.branches[:len(outer.branches)] == outer.branches


def is_main_guard(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    if type(node) is not ast.If or type(test) is not ast.Compare or len(test.comparators) != 1 or \
            type(test.ops[0]) is not ast.Eq:
        return False
    sides = [test.left, test.comparators[0]]
    return any(type(s) is ast.Name and s.id == "__name__" for s in sides) and \
        any(type(s) is ast.Constant and s.value == "__main__" for s in sides)


def runs_as_program(ctx: FileContext, place: Place) -> bool:
    """Whether code at ``place`` belongs to this file's own program: it runs at top level or the
    file has a ``__main__`` block, and no enclosing class inherits code from another module (a test
    base class may set up SPMD or a mesh in ``setUpClass``). A library module that only defines
    functions for callers elsewhere is not a program: its callers may set things up."""
    if place.owners and not any(is_main_guard(stmt) for stmt in ctx.tree.body):
        return False
    classes = [owner for owner in place.owners if type(owner) is ast.ClassDef]
    return not classes or not _foreign_rooted(ctx, classes)


def _foreign_rooted(ctx: FileContext, classes: List[ast.ClassDef]) -> bool:
    resolved = {id(ref.node): ref.qualname for ref in ctx.model.references if not ref.is_import}
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
            qualname = resolved.get(id(base))
            if qualname is not None:
                if qualname not in _INERT_BASES:
                    return True
            elif type(base) is ast.Name and base.id in local:
                classes.append(local[base.id])
            else:
                return True  # a base we cannot follow
    return False


class FsdpV2WithoutSpmd(Rule):
    code = "XLA216"
    name = "fsdpv2-without-spmd"
    summary = "FSDPv2 or mark_sharding in a program that never enables SPMD"
    what_it_does = (
        "Flags the first `SpmdFullyShardedDataParallel` call (or, without one, the first "
        "`xs.mark_sharding`) in a program that never calls `torch_xla.runtime.use_spmd()`, in any "
        "function. Only programs are checked: files with an `if __name__ == \"__main__\":` block or "
        "with the call at top level. A library module, a method of a class that inherits from "
        "another module (a test base class may enable SPMD in `setUpClass`), and files that set "
        "`XLA_USE_SPMD` stay silent."
    )
    why_bad = (
        "FSDPv2 shards with SPMD annotations, which only work on the SPMD virtual device. Without "
        "`use_spmd()` the wrap fails with `RuntimeError: ... Please enable SPMD via "
        "torch_xla.runtime.use_spmd()`. The FSDPv2 guide's own snippet leaves the call out."
    )
    fix_safety = "No automatic fix: use_spmd() belongs at the start of the program, before any device use."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/spmd_basic.md",
                  "https://github.com/pytorch/xla/blob/v2.9.0/examples/fsdp/train_decoder_only_fsdp_v2.py")
    valid = (
        Example(FSDP2 + SPMD + "\nxr.use_spmd()\nmesh = xs.get_1d_mesh('fsdp')\n"
                "model = FSDPv2(Net(), mesh=mesh)\n", title="SPMD enabled first"),
        Example(FSDP2 + SPMD + "\ndef main():\n    xs.set_global_mesh(xs.get_1d_mesh('fsdp'))\n"
                "    model = FSDPv2(Net())\n\nif __name__ == '__main__':\n    xr.use_spmd()\n    main()\n",
                title="use_spmd() anywhere in the file counts, as in the official example"),
        Example(FSDP2 + "\ndef shard(model, mesh):\n    return FSDPv2(model, mesh=mesh)\n",
                title="a library function: its caller may have enabled SPMD"),
        Example(FSDP2 + "import unittest\n\nimport spmd_test_base\n\n"
                "class FsdpTest(spmd_test_base.SpmdTestCase):\n    def test_wrap(self):\n"
                "        FSDPv2(Net(), mesh=self.mesh)\n\nif __name__ == '__main__':\n    unittest.main()\n",
                title="a test whose base class comes from another module"),
    )
    invalid = (
        Example(
            FSDP2 + SPMD + "\nmesh = xs.get_1d_mesh('fsdp')\nmodel = FSDPv2(Net(), mesh=mesh)\n",
            expect=((8, 9, "FSDPv2 needs SPMD, but this program never calls use_spmd(): the wrap fails with "
                           "RuntimeError (Please enable SPMD via torch_xla.runtime.use_spmd()); call "
                           "torch_xla.runtime.use_spmd() at the start of the program"),),
        ),
        Example(
            FSDP2 + SPMD + "\ndef main():\n    mesh = xs.get_1d_mesh('fsdp')\n"
            "    model = FSDPv2(Net(), mesh=mesh)\n\nif __name__ == '__main__':\n    main()\n",
            expect=((9, 13, "FSDPv2 needs SPMD, but this program never calls use_spmd(): the wrap fails with "
                            "RuntimeError (Please enable SPMD via torch_xla.runtime.use_spmd()); call "
                            "torch_xla.runtime.use_spmd() at the start of the program"),),
            title="a script with a main function",
        ),
        Example(
            SPMD + "import torch\n\nmesh = xs.Mesh(list(range(8)), (8,), ('data',))\n"
            "x = torch.zeros(16, 128, device='xla')\nxs.mark_sharding(x, mesh, ('data', None))\n",
            expect=((7, 1, "mark_sharding() needs SPMD, but this program never calls use_spmd(): it fails with "
                           "RuntimeError (Please enable SPMD via torch_xla.runtime.use_spmd()); call "
                           "torch_xla.runtime.use_spmd() at the start of the program"),),
            title="plain SPMD sharding",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        wraps: List[ast.Call] = []
        shardings: List[ast.Call] = []
        for ref in ctx.model.references:
            qualname = ref.qualname
            if qualname == USE_SPMD:
                return
            call = ref.call
            if call is None:
                continue
            if qualname in FSDP_V2:
                wraps.append(call)
            elif spmd_api(qualname, "mark_sharding", "mark_sharding_with_gradients"):
                shardings.append(call)
        if not (wraps or shardings) or any("XLA_USE_SPMD" in line for line in ctx.lines):
            return
        places = locate(ctx.tree, wraps + shardings)
        for calls, what, fails in ((wraps, "FSDPv2", "the wrap fails"), (shardings, "mark_sharding()", "it fails")):
            first = _first(ctx, calls, places)
            if first is not None:
                yield self.diagnostic(ctx, first, (
                    f"{what} needs SPMD, but this program never calls use_spmd(): {fails} with RuntimeError "
                    "(Please enable SPMD via torch_xla.runtime.use_spmd()); call torch_xla.runtime.use_spmd() "
                    "at the start of the program"))
                return


def _first(ctx: FileContext, calls: List[ast.Call], places: Dict[int, Place]) -> Optional[ast.Call]:
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        place = places.get(id(call))
        if place is not None and runs_as_program(ctx, place):
            return call
    return None
