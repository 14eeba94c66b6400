"""XLA220 fsdpv2-output-not-sharded."""
import ast
import re
from typing import Dict, Iterator, Optional

from flake8_xla.rules.examples import EXAMPLE_FSDPV2 as FSDP2
from flake8_xla.rules.examples import EXAMPLE_SPMD as SPMD
from flake8_xla.analysis.fsdp import CHECKPOINT_MODULE
from flake8_xla.analysis.control import Position
from flake8_xla.analysis.syntax import dotted
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.wraps import FsdpWraps
from flake8_xla.analysis.assignments import Assignments

# Hugging Face model classes return a ModelOutput (a dict) from forward; tokenizers, configs and
# TF/Flax classes are not torch modules.
_HF_MODEL_CLASS = re.compile(r"AutoModel\w*|\w+For[A-Z]\w*|\w+Model")
_HF_LOADERS = ("from_pretrained", "from_config", "_from_config")
# methods that return the module itself, so the value is still the Hugging Face model
_SELF_RETURNING = frozenset({"to", "train", "eval", "float", "half", "bfloat16", "requires_grad_"})
HEADER = FSDP2 + SPMD + "from transformers import AutoModelForCausalLM\n\nxr.use_spmd()\n"


class FsdpV2OutputNotSharded(Rule):
    code = "XLA220"
    name = "fsdpv2-output-not-sharded"
    summary = "FSDPv2 around a Hugging Face model without shard_output="
    what_it_does = (
        "Flags an `SpmdFullyShardedDataParallel` call without `shard_output=` whose module is a "
        "Hugging Face model: a `transformers` `AutoModel*.from_pretrained(...)`/`from_config(...)`, a "
        "`*For<Task>`/`*Model` class, built in the call or assigned once to the wrapped name earlier "
        "in the same function (also through `checkpoint_module(...)` and `.to(...)`). Models built "
        "with `return_dict=` anywhere in the file, user modules and models from elsewhere are not "
        "reported."
    )
    why_bad = (
        "FSDPv2 marks the forward output as sharded along 'fsdp' so that the compiler implements "
        "the FSDP algorithm. Its default handler knows only a tensor or a tuple's first element; a "
        "Hugging Face model returns a `ModelOutput` (a dict), so the first forward raises "
        "`RuntimeError: The output type is not supported: <class '...'>. Please provide your own "
        "shard_output callable.`"
    )
    fix_safety = "No automatic fix: which output to shard, and along which dimensions, depends on the model."
    references = ("https://github.com/pytorch/xla/blob/v2.9.0/docs/source/perf/fsdp_spmd.md",)
    valid = (
        Example(HEADER + "mesh = xs.get_1d_mesh('fsdp')\n\ndef shard_output(output, mesh):\n"
                "    xs.mark_sharding(output.logits, mesh, ('fsdp', None, None))\n\n"
                "model = AutoModelForCausalLM.from_pretrained('gpt2')\n"
                "model = FSDPv2(model, mesh=mesh, shard_output=shard_output)\n",
                title="the documented shard_output"),
        Example(HEADER + "mesh = xs.get_1d_mesh('fsdp')\nmodel = FSDPv2(DecoderOnly(config), mesh=mesh)\n",
                title="a model that returns a tensor"),
        Example(HEADER + "def wrap(model, mesh):\n    return FSDPv2(model, mesh=mesh)\n",
                title="a model from the caller: unknown"),
    )
    invalid = (
        Example(
            HEADER + "mesh = xs.get_1d_mesh('fsdp')\nmodel = AutoModelForCausalLM.from_pretrained('gpt2')\n"
            "model = FSDPv2(model, mesh=mesh)\n",
            expect=((11, 9, "FSDPv2 wraps a Hugging Face model without shard_output=; pass one that marks the "
                            "logits",
                     "The model (line 10) returns a ModelOutput from forward, which the default output "
                     "sharding rejects (RuntimeError: The output type is not supported). Pass shard_output=fn "
                     "that marks the logits, e.g. xs.mark_sharding(output.logits, mesh, ('fsdp', None, None))."),),
        ),
        Example(
            HEADER + "import transformers\nfrom torch_xla.distributed.fsdp import checkpoint_module\n\n"
            "xs.set_global_mesh(xs.get_1d_mesh('fsdp'))\n"
            "model = FSDPv2(checkpoint_module(transformers.LlamaForCausalLM(config)))\n",
            expect=((13, 9, "FSDPv2 wraps a Hugging Face model without shard_output=; pass one that marks the "
                            "logits",
                     "The model (line 13) returns a ModelOutput from forward, which the default output "
                     "sharding rejects (RuntimeError: The output type is not supported). Pass shard_output=fn "
                     "that marks the logits, e.g. xs.mark_sharding(output.logits, mesh, ('fsdp', None, None))."),),
            title="built in place, with gradient checkpointing",
        ),
    )

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        own = ctx.get(FsdpWraps)
        if not own.refs:
            return
        wraps = [wrap for wrap in own.wraps if wrap.kind == "v2" and wrap.inner is not None
                 and not any(k.arg in ("shard_output", None) for k in wrap.call.keywords)
                 and not any(type(a) is ast.Starred for a in wrap.call.args)]
        if not wraps:
            return
        builds: Dict[int, str] = {}  # id(call) -> qualname, for transformers model constructors
        unwrapping = set()  # id(call) of checkpoint_module(...) calls
        for ref in ctx.get(SemanticModel).references:
            if ref.call is None:
                continue
            if ref.qualname.startswith("transformers.") and _is_hf_model(ref.qualname):
                builds[id(ref.call)] = ref.qualname
            elif ref.qualname in CHECKPOINT_MODULE:
                unwrapping.add(id(ref.call))
        if not builds or any("return_dict" in line for line in ctx.lines):
            return
        for wrap in wraps:
            model = _hf_build(ctx.get(Assignments), wrap.inner, wrap.at, builds, unwrapping)
            if model is not None:
                yield self.diagnostic(
                    ctx, wrap.call, "FSDPv2 wraps a Hugging Face model without shard_output=; pass one that marks "
                    "the logits",
                    help=(f"The model (line {model.lineno}) returns a ModelOutput from forward, which the default "
                          "output sharding rejects (RuntimeError: The output type is not supported). Pass "
                          "shard_output=fn that marks the logits, e.g. "
                          "xs.mark_sharding(output.logits, mesh, ('fsdp', None, None))."))


def _is_hf_model(qualname: str) -> bool:
    parts = qualname.split(".")
    cls = parts[-2] if parts[-1] in _HF_LOADERS and len(parts) > 2 else parts[-1]
    return bool(_HF_MODEL_CLASS.fullmatch(cls)) and not cls.startswith(("TF", "Flax")) and cls != "PreTrainedModel"


def _hf_build(bindings: Assignments, expr: ast.AST, at: Position, builds: Dict[int, str], unwrapping: set,
              depth: int = 4) -> Optional[ast.Call]:
    """The transformers call that ``expr`` evaluates to, following one assignment per name."""
    expr = _peel(expr, unwrapping, builds)
    if type(expr) is ast.Call:
        return expr
    name = dotted(expr)
    if name is None or depth == 0:
        return None
    bound = bindings.bindings_before(name, at)
    if not bound:
        return None
    last = bound[-1]
    # with several assignments only ``model = model.to(...)`` is followed: others may sit in branches
    if len(bound) > 1 and _receiver(last.value, unwrapping) != name:
        return None
    return _hf_build(bindings, last.value, last.at, builds, unwrapping, depth - 1)


def _receiver(expr: ast.AST, unwrapping: set) -> Optional[str]:
    """``model`` in ``model.to(device).train()`` or ``checkpoint_module(model)``."""
    return dotted(_peel(expr, unwrapping))


def _peel(expr: ast.AST, unwrapping: set, builds: Optional[Dict[int, str]] = None) -> Optional[ast.AST]:
    """``expr`` without the calls that return their module (``checkpoint_module(m)``,
    ``m.to(device)``), stopping at a call in ``builds``; None when another call is in the way."""
    while type(expr) is ast.Call and (builds is None or id(expr) not in builds):
        if id(expr) in unwrapping and expr.args:
            expr = expr.args[0]
        elif type(expr.func) is ast.Attribute and expr.func.attr in _SELF_RETURNING:
            expr = expr.func.value
        else:
            return None
    return expr
