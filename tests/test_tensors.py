"""The value layer (flake8_xla/analysis/tensors.py, masks.py): what the last line's expression holds."""
import ast

import pytest

from flake8_xla.analysis.arguments import CallArguments
from flake8_xla.analysis.bindings import Bindings
from flake8_xla.analysis.device_values import DeviceValues
from flake8_xla.analysis.masks import Masks
from flake8_xla.analysis.semantic import QualifiedNames, SemanticModel
from flake8_xla.analysis.summaries import outgoing_calls
from flake8_xla.analysis.syntax import NodeIndex
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.values import DEVICE, HOST, HOST_TENSOR, MODULE, ValueKind
from flake8_xla.fixing.lines import split_lines
from flake8_xla.lifecycle.table import api_table
from flake8_xla.rule import FileContext
from flake8_xla.versions import Target

HEADER = ("import numpy as np\nimport torch\nimport torch.nn.functional as F\nimport torch_xla\n"
          "import torch_xla.distributed.parallel_loader as pl\nfrom torch.utils.data import DataLoader\n\n"
          "device = torch_xla.device()\n")


def facts_and_last(source: str):
    tree = ast.parse(HEADER + source)
    bindings = Bindings(NodeIndex(tree), QualifiedNames(SemanticModel(tree).references).qualname)
    arguments = CallArguments(bindings)
    facts = TensorFacts(bindings, arguments, DeviceValues(bindings, arguments))
    last = tree.body[-1]
    while type(last) in (ast.For, ast.While, ast.FunctionDef, ast.ClassDef, ast.If):
        last = last.body[-1]
    assert type(last) is ast.Expr, "the case must end with an expression"
    return facts, last.value


@pytest.mark.parametrize("source, expected", [
    ("torch.randn(3, device=device)", DEVICE),
    ("torch.randn(3)", HOST_TENSOR),  # a factory without a device makes a CPU tensor
    ("torch.multinomial(torch.randn(3, device=device).softmax(-1), 1)", DEVICE),  # samples where its input is
    ("torch.randn(3).to(device)", DEVICE),
    ("torch.randn(3, device=device).cpu()", HOST_TENSOR),
    ("torch.randn(3, device=device).to('cpu')", HOST_TENSOR),
    ("torch.randn(3, device=device).to(torch.float16)", DEVICE),  # a dtype move stays on the device
    ("torch.randn(3, device=device).sum().item()", HOST),
    ("torch.randn(3, device=device).shape[0]", HOST),
    ("x = torch.randn(3, device=device)\nx.size(0) + len(x)", HOST),
    ("x = torch.randn(3, device=device)\nx > 0", DEVICE),
    ("x = torch.randn(3, device=device)\nx is None", HOST),
    ("np.zeros(3).sum()", HOST),
    ("F.relu(torch.randn(3, device=device))", DEVICE),
    ("F.relu(unknown)", DEVICE),  # an op's result is a tensor; where it lives is unknown
    ("unknown.sum()", None),  # could be a numpy array
    ("torch.nn.Linear(2, 2)", MODULE),
    ("import torchvision\ntorchvision.models.alexnet(num_classes=10)", MODULE),
    ("AutoModelForCausalLM.from_pretrained('gpt2')", MODULE),
    ("tokenizer.from_pretrained('gpt2')", None),  # lower-case receiver: not a model class
    ("model = torch.nn.Linear(2, 2).to(device)\nmodel(torch.ones(2).to(device))", DEVICE),
    ("class Net(torch.nn.Module):\n    pass\n\nNet()", MODULE),
    ("loss = compute(batch)\nloss.backward()\nloss", DEVICE),  # whatever .backward() is called on
    ("def compute(model, batch):\n    return F.cross_entropy(model(batch), batch)\n\ncompute(m, b)", DEVICE),
    ("def ratio(a, b):\n    if b:\n        return a / b\n    return 0.0\n\nratio(x, y)", None),
    # a parameter holds what every call in the file passes
    ("def ratio(a, b):\n    if b:\n        return a / b\n    return 0.0\n\nratio(1, 2)", HOST),
    ("f(torch.ones(2, device=device))\nf(t=torch.zeros(2).to(device))\ndef f(t):\n    t", DEVICE),
    ("f(torch.ones(2, device=device))\nf(3)\ndef f(t):\n    t", None),
    ("f(torch.ones(2, device=device))\ncallbacks = [f]\ndef f(t):\n    t", None),  # called elsewhere too
    ("class T:\n    def run(self):\n        self.check(torch.ones(2, device=device))\n"
     "    def check(self, batch):\n        batch", DEVICE),
    ("class T:\n    def loader(self):\n        loader = pl.MpDeviceLoader(self.data, device)\n        return loader\n"
     "    def run(self):\n        it = iter(self.loader())\n        next(it)", DEVICE),
    ("it = iter(DataLoader(ds))\nnext(it)", HOST_TENSOR),
    ("def f(loader):\n    f(loader)\n    for b in loader:\n        b", None),  # recursion: no loop forever
    ("for data, target in DataLoader(ds):\n    data", HOST_TENSOR),
    ("for step, (data, target) in enumerate(pl.MpDeviceLoader(loader, device)):\n    target", DEVICE),
    ("for step, (data, target) in enumerate(pl.MpDeviceLoader(loader, device)):\n    step", HOST),
    ("loss = 0.0\nloss = F.mse_loss(a, b)\nloss", DEVICE),  # the last assignment before the use
    ("loss = F.mse_loss(a, b)\nloss = loss.item()\nloss", HOST),
    ("total = 0.0\nfor x in DataLoader(ds):\n    total += x.to(device).sum()\ntotal", DEVICE),
    ("a, b = torch.ones(2).to(device), 3\nb", HOST),
    ("class Net(torch.nn.Module):\n    def forward(self, x, flag=False):\n        x", DEVICE),
    ("class Net(torch.nn.Module):\n    def forward(self, x, flag=False):\n        flag", HOST),
    # forward's other parameters are tensors only where the body uses them as one
    ("class Net(torch.nn.Module):\n    def forward(self, x, seq_len, train):\n        seq_len", None),
    ("class Net(torch.nn.Module):\n    def forward(self, x, mask):\n        y = x.masked_fill(mask, 0)\n"
     "        y = F.relu(mask.float())\n        mask", DEVICE),
    ("class Net(torch.nn.Module):\n    def forward(self, x, n: int):\n        n", HOST),
    ("accelerator.backward(loss)\naccelerator", None),  # not a tensor for having a backward method
    ("torch.is_autocast_enabled()", HOST),
    ("torch.cuda.is_available()", HOST),
    ("torch.distributed.get_rank()", HOST),
    ("torch.where(torch.randn(3, device=device) > 0, 1.0, 0.0)", DEVICE),
    ("cpu = torch.device('cpu')\ntorch.zeros(3, device=cpu)", HOST_TENSOR),
    ("loader = DataLoader(ds)\ndef outer():\n    def inner(loader):\n        for b in loader:\n            b", None),
    ("class T:\n    def __init__(self):\n        self.crit = torch.nn.MSELoss()\n"
     "    def step(self):\n        self.crit(a, b)", DEVICE),
])
def test_kind(source: str, expected) -> None:
    facts, expr = facts_and_last(source)
    assert facts.kind(expr) == expected


@pytest.mark.parametrize("source, expected", [
    ("x = torch.randn(3, device=device)\nx > 0", True),
    ("x = torch.randn(3, device=device)\nm = x > 0\n~m", True),
    ("x = torch.randn(3, device=device)\nx.isnan() | (x < -1)", True),
    ("x = torch.randn(3, device=device)\ntorch.argmax(x)", False),  # an index tensor, not a mask
    ("x = np.zeros(3)\nx > 0", False),  # a numpy mask is not a device tensor
])
def test_mask(source: str, expected: bool) -> None:
    facts, expr = facts_and_last(source)
    assert Masks(facts).is_mask(expr) is expected



def test_kinds_reach_summaries_as_their_text() -> None:
    """A call's arguments reach the callee's module as a kind's text, not as the enum member (whose
    format() differs between Python versions)."""
    assert [k.value for k in ValueKind] == ["device", "host-tensor", "host", "module"]
    source = HEADER + "from helpers import step\n\nstep(torch.randn(3, device=device), torch.nn.Linear(2, 2))\n"
    table = api_table()
    ctx = FileContext(split_lines(source), ast.parse(source), "main.py", Target(table.latest, "test"), table)
    (call,) = outgoing_calls(ctx, lambda level, name: name == "helpers.step")
    assert call.arguments == ((0, "device"), (1, "module"))
    assert [type(fact) for _, fact in call.arguments] == [str, str]
