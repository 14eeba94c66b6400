"""XLA218 mesh-without-fsdp-axis."""
import ast
from typing import Dict, Iterator, List, Optional, Tuple

from flake8_xla.rules.examples import EXAMPLE_FSDPV2 as FSDP2
from flake8_xla.rules.examples import EXAMPLE_SPMD as SPMD
from flake8_xla.analysis.fsdp import spmd_api
from flake8_xla.analysis.control import Position
from flake8_xla.analysis.wraps import FsdpWraps, Wrap
from flake8_xla.analysis.syntax import dotted
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.assignments import Assignments

MESH_BUILDERS = ("Mesh", "HybridMesh", "get_1d_mesh")
HEADER = FSDP2 + SPMD + "import numpy as np\n\nxr.use_spmd()\n"


class MeshWithoutFsdpAxis(Rule):
    code = "XLA218"
    name = "mesh-without-fsdp-axis"
    summary = "An FSDPv2 mesh without an axis named 'fsdp'"
    what_it_does = (
        "Flags the axis names of a mesh that reaches an FSDPv2 wrap in the same function, as its "
        "`mesh=` or through `xs.set_global_mesh(...)` before a wrap without `mesh=`, when they are "
        "written out and none is `'fsdp'`: `xs.Mesh(ids, shape, ('data', 'model'))`, "
        "`xs.get_1d_mesh('data')`, or a mesh with no axis names at all. Meshes used only for "
        "`mark_sharding`, axis names held in variables, and meshes from other functions are not "
        "reported."
    )
    why_bad = (
        "FSDPv2 shards every parameter and the output along the mesh axis named `'fsdp'`. Without "
        "one the wrap raises `ValueError: The mesh must have an axis named 'fsdp'.`, or a "
        "`TypeError` when the mesh has no axis names."
    )
    fix_safety = "No automatic fix: renaming an axis changes every partition spec that names it."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/fsdp_spmd.md",)
    valid = (
        Example(HEADER + "num_devices = xr.global_runtime_device_count()\n"
                "mesh = xs.Mesh(np.arange(num_devices), (num_devices, 1), ('fsdp', 'model'))\n"
                "model = FSDPv2(Net(), mesh=mesh)\n", title="the documented mesh"),
        Example(HEADER + "xs.set_global_mesh(xs.get_1d_mesh('fsdp'))\nmodel = FSDPv2(Net())\n",
                title="a global 1-D mesh"),
        Example(HEADER + "mesh = xs.Mesh(np.arange(8), (8,), ('data',))\nx = torch.zeros(8, 4).to('xla')\n"
                "xs.mark_sharding(x, mesh, ('data', None))\n", title="a mesh only for mark_sharding"),
        Example(HEADER + "mesh = xs.Mesh(np.arange(8), (8,), axes)\nmodel = FSDPv2(Net(), mesh=mesh)\n",
                title="axis names in a variable: unknown"),
    )
    invalid = (
        Example(
            HEADER + "mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\nmodel = FSDPv2(Net(), mesh=mesh)\n",
            expect=((9, 38, "mesh axes ('data', 'model') have no 'fsdp' axis for FSDPv2; name the one it "
                            "shards over 'fsdp'",
                     "The mesh goes to FSDPv2 (line 10), which raises ValueError (The mesh must have an axis "
                     "named 'fsdp'). E.g. ('fsdp', 'model')."),),
        ),
        Example(
            HEADER + "def main():\n    mesh = xs.get_1d_mesh('data')\n    xs.set_global_mesh(mesh)\n"
            "    return FSDPv2(Net())\n",
            expect=((10, 27, "mesh axes ('data',) have no 'fsdp' axis for FSDPv2; name the one it shards over "
                             "'fsdp'",
                     "The mesh goes to FSDPv2 (line 12), which raises ValueError (The mesh must have an axis "
                     "named 'fsdp'). E.g. ('fsdp', 'model')."),),
            title="a global mesh",
        ),
        Example(
            HEADER + "model = FSDPv2(Net(), mesh=xs.Mesh(np.arange(8), (8,)))\n",
            expect=((9, 28, "the mesh has no axis names, but FSDPv2 needs an 'fsdp' axis; name the axes",
                     "The mesh goes to FSDPv2 (line 9), which raises TypeError without an axis named 'fsdp'. "
                     "E.g. xs.Mesh(device_ids, (num_devices, 1), ('fsdp', 'model'))."),),
            title="no axis names at all",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        own = ctx.get(FsdpWraps)
        if not own.refs:
            return
        wraps = [wrap for wrap in own.wraps if wrap.kind == "v2"]
        if not wraps:
            return
        builders: Dict[int, str] = {}
        global_sets: List[Tuple[ast.Call, Position]] = []
        for ref in ctx.get(SemanticModel).references:
            call = ref.call
            if call is None:
                continue
            if spmd_api(ref.qualname, *MESH_BUILDERS):
                builders[id(call)] = ref.qualname.rpartition(".")[2]
            elif spmd_api(ref.qualname, "set_global_mesh") and call.args:
                at = own.flow.position(call)
                if at is not None:
                    global_sets.append((call, at))
        if not builders:
            return
        reported = set()
        for wrap in wraps:
            mesh = _mesh_of(ctx.get(Assignments), wrap, global_sets, builders)
            if mesh is None or id(mesh) in reported:
                continue
            problem = _axis_problem(mesh, builders[id(mesh)])
            if problem is None:
                continue
            reported.add(id(mesh))
            node, axes = problem
            if axes is None:
                example = "xs.get_1d_mesh('fsdp')" if builders[id(mesh)] == "get_1d_mesh" else \
                    "xs.Mesh(device_ids, (num_devices, 1), ('fsdp', 'model'))"
                message = "the mesh has no axis names, but FSDPv2 needs an 'fsdp' axis; name the axes"
                help = (f"The mesh goes to FSDPv2 (line {wrap.call.lineno}), which raises TypeError without an axis "
                        f"named 'fsdp'. E.g. {example}.")
            else:
                message = f"mesh axes {axes!r} have no 'fsdp' axis for FSDPv2; name the one it shards over 'fsdp'"
                help = (f"The mesh goes to FSDPv2 (line {wrap.call.lineno}), which raises ValueError (The mesh must "
                        "have an axis named 'fsdp'). E.g. ('fsdp', 'model').")
            yield self.diagnostic(ctx, node, message, help=help)


def _mesh_of(bindings: Assignments, wrap: Wrap, global_sets: List[Tuple[ast.Call, Position]],
             builders: Dict[int, str]) -> Optional[ast.Call]:
    """The mesh-building call whose mesh this wrap uses, when it is certain."""
    call = wrap.call
    if any(k.arg is None for k in call.keywords) or any(type(a) is ast.Starred for a in call.args):
        return None
    given = next((k.value for k in call.keywords if k.arg == "mesh"), None)
    if given is not None:
        return _builder(bindings, given, wrap.at, builders)
    if len(call.args) > 1:
        return None  # a positional mesh raises TypeError first (XLA105)
    earlier = [(c, at) for c, at in global_sets if at.scope is wrap.at.scope and at.order < wrap.at.order]
    if not earlier:
        return None
    setter, at = max(earlier, key=lambda pair: pair[1].order)
    return _builder(bindings, setter.args[0], at, builders)


def _builder(bindings: Assignments, expr: ast.AST, at: Position, builders: Dict[int, str]) -> Optional[ast.Call]:
    if id(expr) in builders:
        return expr
    name = dotted(expr)
    if name is None:
        return None
    # a name assigned once in this scope before the use; several assignments may sit in branches
    bound = bindings.bindings_before(name, at)
    if len(bound) == 1 and id(bound[0].value) in builders:
        return bound[0].value
    return None


def _axis_problem(mesh: ast.Call, builder: str) -> Optional[Tuple[ast.AST, Optional[Tuple[str, ...]]]]:
    """(node to report, the literal axis names or None when there are none) if 'fsdp' is missing."""
    if any(k.arg is None for k in mesh.keywords) or any(type(a) is ast.Starred for a in mesh.args):
        return None
    given = {k.arg for k in mesh.keywords}
    if (builder == "Mesh" and len(mesh.args) < 2 and "mesh_shape" not in given) or \
            (builder == "HybridMesh" and "ici_mesh_shape" not in given):
        return None  # half-written: it fails for other reasons first
    keyword = "axis_name" if builder == "get_1d_mesh" else "axis_names"
    index = {"Mesh": 2, "get_1d_mesh": 0}.get(builder)
    axes = next((k.value for k in mesh.keywords if k.arg == keyword), None)
    if axes is None and index is not None and len(mesh.args) > index:
        axes = mesh.args[index]
    if axes is None or (type(axes) is ast.Constant and axes.value is None):
        return mesh, None
    if builder == "get_1d_mesh":
        names = [axes]
    elif type(axes) in (ast.Tuple, ast.List):
        names = axes.elts
    else:
        return None
    if not all(type(n) is ast.Constant and type(n.value) is str for n in names):
        return None
    values = tuple(n.value for n in names)
    return None if "fsdp" in values else (axes, values)
