"""Edge cases of XLA601 (weight tying lost by a move), XLA605 (torch seed without an XLA seed) and
XLA606 (float16 autocast on TPU), beyond the rules' own examples: the shapes found reviewing real code."""
import pytest

from flake8_xla.engine import lint_source

NET = '''import torch
import torch.nn as nn
import torch_xla

device = torch_xla.device()


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(10, 4)
        self.lm_head = nn.Linear(4, 10, bias=False)
        self._tie()

    def _tie(self):
        self.lm_head.weight = self.wte.weight


class GPT(Base):
    pass


class Mover(Base):
    def _apply(self, fn, recurse=True):
        out = super()._apply(fn, recurse)
        self._tie()
        return out


def main():
'''


def lines(source: str, code: str):
    return [d.line for d in lint_source(source) if d.code == code]


@pytest.mark.parametrize("body, expected", [
    ("    model = GPT()\n    model = model.to(device)\n", [32]),  # inherited tie, through a method __init__ calls
    ("    model = GPT().to(device)\n    model._tie()\n", []),  # tied again (a method named for tying)
    ("    model = Mover().to(device)\n", []),  # the class ties again in _apply
    ("    model = GPT()\n    with preserve_shared_weights(model):\n        model.to(device)\n", []),
    ("    other = GPT().to(device)\n    model = GPT().to(device)\n    other._tie()\n", [32]),  # the other one
    ("    model = GPT().to(torch.bfloat16)\n", []),  # not a move to XLA
    ("    model = Base()\n    model.to('cpu')\n", []),
])
def test_weight_tying(body, expected):
    assert lines(NET + body, "XLA601") == expected


def test_weight_tying_swap_flag():
    source = NET.replace("device = torch_xla.device()",
                         "device = torch_xla.device()\ntorch.__future__.set_swap_module_params_on_conversion(True)")
    assert lines(source + "    model = GPT().to(device)\n", "XLA601") == []


SEED = "import torch\nimport torch_xla\n\n\ndef main(seed, logits):\n"


@pytest.mark.parametrize("body, expected", [
    ("    torch.manual_seed(seed)\n    return torch.rand(4, device=torch_xla.device())\n", [6]),
    ("    torch.manual_seed(7)\n    return torch.rand(4, device=torch_xla.device())\n", []),  # a fixed seed
    ("    torch.manual_seed(seed)\n    return torch.multinomial(logits.softmax(-1), 1)\n", []),  # device unknown
    ("    torch.manual_seed(seed)\n    x = logits.to(torch_xla.device())\n    return torch.bernoulli(x)\n", [6]),
    ("    torch.manual_seed(seed)\n    x = logits.to(torch_xla.device()).cpu()\n    return torch.bernoulli(x)\n", []),
    ("    utils.set_seed(seed)\n    torch.manual_seed(seed)\n    return torch.rand(4, device=torch_xla.device())\n",
     []),  # a project helper may seed XLA
    ("    torch.manual_seed(seed)\n    xm.set_rng_state(seed)\n    return torch.rand(4, device=torch_xla.device())\n",
     []),
])
def test_seed(body, expected):
    source = SEED.replace("import torch_xla\n", "import torch_xla\nimport torch_xla.core.xla_model as xm\nimport utils\n")
    assert lines(source + body, "XLA605") == [n + 2 for n in expected]


def test_seed_dropout_needs_a_model_on_the_device():
    model = ("import torch\nimport torch.nn as nn\nimport torch_xla\n\n\nclass Net(nn.Module):\n"
             "    def __init__(self):\n        super().__init__()\n        self.drop = nn.Dropout(0.1)\n\n\n"
             "def train(seed, batch):\n    torch.manual_seed(seed)\n    model = Net()\n    MOVE\n"
             "    model(batch).sum().backward()\n")
    assert lines(model.replace("MOVE", "model.to(torch_xla.device())"), "XLA605") == [13]
    assert lines(model.replace("MOVE", "model.eval()"), "XLA605") == []  # never moved: maybe on the CPU
    assert lines(model.replace("nn.Dropout(0.1)", "nn.Dropout(p)").replace("MOVE", "model.to(torch_xla.device())"),
                 "XLA605") == []  # a rate from a variable may be 0


AMP = "import torch\nimport torch_xla\nimport torch_xla.amp as xamp\n\nd = torch_xla.device()\n"


@pytest.mark.parametrize("body, expected", [
    ("with xamp.autocast(d, dtype=torch.half):\n    pass\n", [6]),
    ("DT = torch.float16\nwith xamp.autocast(d, dtype=DT):\n    pass\n", [7]),
    ("with xamp.autocast(d, dtype=torch.float16 if gpu else torch.bfloat16):\n    pass\n", []),
    ("with xamp.autocast(d, enabled=False, dtype=torch.float16):\n    pass\n", []),
    ("with torch.amp.autocast('xla', dtype=torch.float16):\n    pass\n", []),
])
def test_fp16_autocast(body, expected):
    assert lines(AMP + body, "XLA606") == expected


def test_fp16_autocast_before_the_check_existed():
    source = AMP + "with xamp.autocast(d, dtype=torch.float16):\n    pass\n"
    assert [d.line for d in lint_source(source, target="2.1") if d.code == "XLA606"] == []
