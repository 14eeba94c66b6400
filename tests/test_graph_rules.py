"""The graph rules (XLA301-XLA305) on what real training, evaluation and generation code does:
each class of false alarm and of miss found on code nobody here wrote, in our own words, with the
exact diagnostics (code, line, column, message) or exact silence."""
import ast
from typing import List, Tuple

from flake8_xla.analysis.hooks import EVALUATION
from flake8_xla.analysis.loops import HookKind, RegionKind, StepRegion
from flake8_xla.engine import lint_source
from flake8_xla.rules.graph.wording import abridged, hands_off, runs, where, where_in_full

HEADER = ("import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
          "import torch_xla.distributed.parallel_loader as pl\nfrom torch.utils.data import DataLoader\n\n"
          "device = torch_xla.device()\n")
TRAIN = "on every training step"
MODEL = "on every model-loop iteration"
DEVICE = "on every device-loop iteration"
DYNAMIC = "has a data-dependent shape and runs on the CPU; keep shapes static"
NO_SYNC = "this training loop never syncs the graph; end each step with torch_xla.sync()"


def graph(source: str) -> List[Tuple[int, int, str, str]]:
    """(line, 1-based column, code, message) of the graph rules' diagnostics."""
    return [(d.line, d.col + 1, d.code, d.message) for d in lint_source(source) if d.code.startswith("XLA3")]


def line(source: str, text: str) -> int:
    """The number of the one line of ``source`` that contains ``text``."""
    found = [n for n, content in enumerate(source.splitlines(), 1) if text in content]
    assert len(found) == 1, (text, found)
    return found[0]


def read(label: str, where: str = TRAIN) -> str:
    return f"{label} copies to the host {where}; read it every N steps"


def branch(test: str, where: str = TRAIN) -> str:
    return f"`if {test}` branches on a tensor {where}; use torch.where"


def blocking(call: str) -> str:
    return f"{call} blocks the host on every training step; move it after the loop"


# -- false alarms ---------------------------------------------------------------------------------

def test_an_object_with_a_backward_method_is_not_a_tensor() -> None:
    source = HEADER + (
        "accelerator = Accelerator()\n"
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "for batch in loader:\n"
        "    loss = model(**batch).loss\n"
        "    accelerator.backward(loss)\n"
        "    optimizer.step()\n"
        "    if accelerator.sync_gradients:\n"
        "        accelerator.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    print(f'processes: {accelerator.num_processes}')\n"
    )
    assert graph(source) == []


def test_functions_returning_python_values_are_not_tensors() -> None:
    source = HEADER + (
        "import torch_xla.runtime as xr\n"
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "for data in pl.MpDeviceLoader(loader, device):\n"
        "    loss = model(data).sum()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if torch.is_autocast_enabled():\n"
        "        pass\n"
        "    if torch.cuda.is_available():\n"
        "        pass\n"
        "    if torch.distributed.is_initialized() and torch.distributed.get_rank() == 0:\n"
        "        pass\n"
        "    if xr.world_size() > 1 or xm.is_master_ordinal():\n"
        "        pass\n"
    )
    assert graph(source) == []


def test_forward_parameters_are_unknown_unless_used_as_tensors() -> None:
    source = HEADER + (
        "class Attention(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = torch.nn.Linear(8, 8)\n"
        "\n"
        "    def forward(self, x, seq_len, train):\n"
        "        if seq_len != self.cached:\n"
        "            self.cached = seq_len\n"
        "        if train and self.use_dropout:\n"
        "            x = x * 0.5\n"
        "        return x\n"
        "\n"
        "\n"
        "class Gate(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = torch.nn.Linear(8, 8)\n"
        "\n"
        "    def forward(self, h, mask, scale: float, limit):\n"
        "        if scale > limit:\n"
        "            h = h * scale\n"
        "        h = h.masked_fill(mask.unsqueeze(-1), 0.0)\n"
        "        if mask.all():\n"
        "            h = self.proj(h)\n"
        "        if (h > 0).any():\n"
        "            h = h * 2\n"
        "        return h\n"
    )
    assert graph(source) == [
        (line(source, "if mask.all():"), 12, "XLA304", branch("mask.all()", "on every forward pass")),
        (line(source, "if (h > 0).any():"), 12, "XLA304", branch("(h > 0).any()", "on every forward pass")),
    ]


def test_three_argument_where_and_chained_methods() -> None:
    source = HEADER + (
        "x = torch.randn(8, device=device)\n"
        "m = x > 0\n"
        "picked = torch.where(m, x, torch.zeros_like(x)).unsqueeze(-1)\n"
        "kept = torch.masked_select(x, m).reshape(-1).to('cpu')\n"
    )
    assert graph(source) == [(line(source, "kept ="), 8, "XLA301", "torch.masked_select " + DYNAMIC)]


def test_dynamic_shape_op_on_a_cpu_tensor() -> None:
    source = HEADER + (
        "x = torch.randn(8, device=device)\n"
        "x_cpu = x.to('cpu')\n"
        "m = x_cpu > 0\n"
        "kept = torch.masked_select(x_cpu, m)\n"
        "rows = torch.nonzero(x.cpu())\n"
        "host = torch.device('cpu')\n"
        "ids = torch.unique(torch.arange(4, device=host))\n"
    )
    assert graph(source) == []


def test_item_in_a_branch_that_never_runs_on_xla() -> None:
    source = HEADER + (
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "for data in pl.MpDeviceLoader(loader, device):\n"
        "    loss = model(data).sum()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if is_torch_cuda_available():\n"
        "        print(loss.item())\n"
        "    if device.type == 'cuda':\n"
        "        print(loss.item())\n"
    )
    assert graph(source) == []


def test_item_under_a_periodic_guard_kept_in_a_variable() -> None:
    source = HEADER + (
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "for step, data in enumerate(pl.MpDeviceLoader(loader, device)):\n"
        "    loss = model(data).sum()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    log_now = (step + 1) % 100 == 0\n"
        "    if log_now:\n"
        "        print(loss.item())\n"
        "        xm.wait_device_ops()\n"
    )
    assert graph(source) == []


def test_loop_over_a_nested_functions_parameter() -> None:
    source = HEADER + (
        "loader = DataLoader(dataset, batch_size=8)\n"
        "\n"
        "\n"
        "def main(model, optimizer):\n"
        "    def train(loader):\n"
        "        for data in loader:\n"
        "            model(data).sum().backward()\n"
        "            optimizer.step()\n"
        "    train(pl.MpDeviceLoader(loader, device))\n"
    )
    assert graph(source) == []


def test_loop_ending_with_the_projects_own_sync_wrapper() -> None:
    source = HEADER + (
        "loader = DataLoader(dataset, batch_size=8)\n"
        "mark = xm.mark_step\n"
        "\n"
        "\n"
        "class Dist:\n"
        "    @staticmethod\n"
        "    def sync():\n"
        "        torch_xla.sync()\n"
        "\n"
        "\n"
        "def end_step():\n"
        "    Dist.sync()\n"
        "\n"
        "\n"
        "for data in loader:\n"
        "    model(data.to(device)).sum().backward()\n"
        "    optimizer.step()\n"
        "    Dist.sync()\n"
        "for data in loader:\n"
        "    model(data.to(device)).sum().backward()\n"
        "    optimizer.step()\n"
        "    end_step()\n"
        "for data in loader:\n"
        "    model(data.to(device)).sum().backward()\n"
        "    optimizer.step()\n"
        "    mark()\n"
    )
    assert [d[:3] for d in graph(source)] == []


def test_loop_ending_with_a_sync_wrapper_declared_in_configuration() -> None:
    """``mylib.sync()`` calls torch_xla.sync() in another module: only the project's configuration
    (``sync-functions``) can say so; without it the loop is reported, with it the loop is silent."""
    source = HEADER + (
        "import mylib\n"
        "from mylib.steps import finish_step as finish\n"
        "loader = DataLoader(dataset, batch_size=8)\n"
        "for data in loader:\n"
        "    model(data.to(device)).sum().backward()\n"
        "    optimizer.step()\n"
        "    mylib.sync()\n"
        "for data in loader:\n"
        "    model(data.to(device)).sum().backward()\n"
        "    optimizer.step()\n"
        "    finish()\n"
    )
    start = HEADER.count("\n")
    never = ("XLA305", NO_SYNC)
    assert [(d.line, d.col + 1, d.code, d.message) for d in lint_source(source) if d.code == "XLA305"] == [
        (start + 4, 1) + never, (start + 8, 1) + never]
    configured = frozenset({"mylib.sync", "mylib.steps.finish_step"})
    assert [d for d in lint_source(source, sync_functions=configured) if d.code == "XLA305"] == []
    partly = [d.line for d in lint_source(source, sync_functions=frozenset({"mylib.sync"})) if d.code == "XLA305"]
    assert partly == [start + 8]


def test_blocking_calls_that_run_once() -> None:
    source = HEADER + (
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "xm.wait_device_ops()\n"
        "for step, data in enumerate(pl.MpDeviceLoader(loader, device)):\n"
        "    if step == 0:\n"
        "        xm.wait_device_ops()\n"
        "    model(data).sum().backward()\n"
        "    optimizer.step()\n"
        "    if step >= max_steps:\n"
        "        xm.save(model.state_dict(), 'last.pt')\n"
        "        break\n"
        "xm.rendezvous('done')\n"
    )
    assert graph(source) == []


# -- misses ---------------------------------------------------------------------------------------

def test_host_read_in_a_plain_inner_loop_of_a_step() -> None:
    source = HEADER + (
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "for data in pl.MpDeviceLoader(loader, device):\n"
        "    losses = model(data)\n"
        "    sum(losses.values()).backward()\n"
        "    optimizer.step()\n"
        "    for k, v in losses.items():\n"
        "        total[k] += v.item()\n"
    )
    assert graph(source) == [(line(source, "v.item()"), 21, "XLA303", read("v.item()"))]


def test_step_body_in_a_helper_of_the_same_module() -> None:
    source = HEADER + (
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "loss_fn = torch.nn.MSELoss()\n"
        "\n"
        "\n"
        "def train_one_step(model, data, target):\n"
        "    loss = loss_fn(model(data), target)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    print(f'loss {loss}')\n"
        "    return loss\n"
        "\n"
        "\n"
        "for data, target in pl.MpDeviceLoader(loader, device):\n"
        "    loss = train_one_step(model, data, target)\n"
        "    history.append(loss.item())\n"
    )
    assert graph(source) == [
        (line(source, "print(f'loss"), 11, "XLA303", read("formatting loss in an f-string")),
        (line(source, "history.append"), 20, "XLA303", read("loss.item()")),
    ]


def test_per_step_sync_hidden_in_a_helper() -> None:
    source = HEADER + (
        "class Mixer(torch.nn.Module):\n"
        "    def mix(self):\n"
        "        xm.wait_device_ops()\n"
        "\n"
        "\n"
        "model = Mixer().to(device)\n"
        "for data in pl.MpDeviceLoader(loader, device):\n"
        "    model(data).sum().backward()\n"
        "    optimizer.step()\n"
        "    model.mix()\n"
    )
    assert graph(source) == [(line(source, "xm.wait_device_ops()"), 9, "XLA302",
                              blocking("xm.wait_device_ops()"))]


def test_evaluation_loop_over_device_batches() -> None:
    source = HEADER + (
        "def evaluate(model, loader):\n"
        "    for data, target in pl.MpDeviceLoader(loader, device):\n"
        "        loss = torch.nn.functional.cross_entropy(model(data), target)\n"
        "        print(loss)\n"
        "        total += loss.item()\n"
    )
    assert graph(source) == [
        (line(source, "print(loss)"), 9, "XLA303", read("print(loss)", DEVICE)),
        (line(source, "total +="), 18, "XLA303", read("loss.item()", DEVICE)),
    ]


def test_evaluation_loop_with_a_model_from_a_helper() -> None:
    source = HEADER + (
        "def build():\n"
        "    net = torch.nn.Linear(4, 4)\n"
        "    return net.to(device)\n"
        "\n"
        "\n"
        "model = build()\n"
        "for batch in batches:\n"
        "    out = model(**batch)\n"
        "    correct += int(out.argmax())\n"
    )
    assert graph(source) == [(line(source, "correct +="), 16, "XLA303", read("int(out.argmax())", MODEL))]


def test_token_loop() -> None:
    source = HEADER + (
        "model = AutoModelForCausalLM.from_pretrained('gpt2').to(device)\n"
        "ids = torch.tensor([[1, 2, 3]], device=device)\n"
        "for _ in range(32):\n"
        "    logits = model(ids).logits\n"
        "    next_id = logits[:, -1].argmax(-1)\n"
        "    ids = torch.cat([ids, next_id[:, None]], dim=-1)\n"
        "    print(tokenizer.decode(ids[0]))\n"
        "    if (ids == eos).all():\n"
        "        break\n"
        "    last = next_id.cpu()\n"
    )
    assert graph(source) == [
        (line(source, "tokenizer.decode"), 11, "XLA303", read("decoding ids[0]", MODEL)),
        (line(source, "(ids == eos)"), 8, "XLA304", branch("(ids == eos).all()", MODEL)),
        # `.cpu()` is a copy that hands the tensor on (to CPU logits processors, metrics): in
        # generation and evaluation loops the real-code sweep found it deliberate 12 times in 14
    ]


def test_per_iteration_callback_of_a_library() -> None:
    source = HEADER + (
        "metric = RunningAverage(output_transform=lambda out: out.item())\n"
    )
    assert graph(source) == [(line(source, "RunningAverage"), 54, "XLA303",
                              read("out.item()", "in a per-iteration callback"))]


def test_code_that_never_runs_on_xla() -> None:
    source = HEADER + (
        "from apex import amp\n"
        "\n"
        "\n"
        "def _unpad(mask):\n"
        "    indices = torch.nonzero(mask.flatten()).flatten()\n"
        "    return indices, mask.sum().item()\n"
        "\n"
        "\n"
        "class LlamaFlashAttention2(torch.nn.Module):\n"
        "    def forward(self, x, mask):\n"
        "        indices, longest = _unpad(mask)\n"
        "        return x[:, :longest]\n"
        "\n"
        "\n"
        "class Collator:\n"
        "    def __call__(self, ids):\n"
        "        return torch.where(ids == 0)[0].tolist()\n"
        "\n"
        "\n"
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "for data in pl.MpDeviceLoader(loader, device):\n"
        "    loss = model(data).sum()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if config.attn_implementation == 'flash_attention_2':\n"
        "        print(loss.item())\n"
        "for data in DataLoader(dataset):\n"
        "    loss = model(data.to(device)).sum()\n"
        "    with amp.scale_loss(loss, optimizer) as scaled:\n"
        "        scaled.backward()\n"
        "    optimizer.step()\n"
        "    total += loss.item()\n"
    )
    assert graph(source) == []


def test_rest_of_the_step_after_a_periodic_skip_and_debug_output() -> None:
    source = HEADER + (
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "for step, data in enumerate(pl.MpDeviceLoader(loader, device)):\n"
        "    loss = model(data).sum()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    if debug:\n"
        "        print(f'loss {loss}')\n"
        "    if step % log_interval:\n"
        "        continue\n"
        "    print(loss.item())\n"
    )
    assert graph(source) == []


def test_assertions_in_a_test_module_read_values_on_purpose() -> None:
    source = HEADER + (
        "def test_matches_cpu():\n"
        "    for x in inputs:\n"
        "        y = torch.relu(x.to(device))\n"
        "        torch_xla.sync()\n"
        "        assert (y >= 0).all()\n"
        "        torch.testing.assert_close(y.cpu(), torch.relu(x))\n"
    )
    assert [d for d in lint_source(source, "tests/test_relu.py") if d.code.startswith("XLA3")] == []
    # outside a test module the branch on a device tensor is reported; the copy to compare on the
    # CPU is a hand-off, not a read
    assert [(d.line, d.col + 1, d.code) for d in lint_source(source, "relu_check.py")] == [
        (line(source, "assert (y"), 16, "XLA304")]


def test_token_loop_that_syncs_with_an_unknown_model() -> None:
    source = HEADER + (
        "def generate(model, idx, steps, eos_id):\n"
        "    for _ in range(steps):\n"
        "        logits = model(idx)[0, -1]\n"
        "        idx_next = torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1)\n"
        "        xm.mark_step()\n"
        "        idx = torch.cat([idx, idx_next])\n"
        "        if idx_next == eos_id:\n"
        "            return idx\n"
        "    return idx\n"
    )
    assert graph(source) == [(line(source, "if idx_next == eos_id"), 12, "XLA304",
                              branch("idx_next == eos_id", DEVICE))]


def test_sampling_loop_that_makes_device_tensors() -> None:
    source = HEADER + (
        "def sample(x, steps):\n"
        "    for i in range(steps):\n"
        "        keep = torch.rand(x.shape, device=device) < 0.5\n"
        "        if keep.any():\n"
        "            x = torch.where(keep, x, 0.0)\n"
        "    for key in stats:\n"
        "        stats[key] = torch.tensor([stats[key]], device=device).cpu().numpy()\n"
        "    return x\n"
    )
    assert graph(source) == [(line(source, "if keep.any()"), 12, "XLA304", branch("keep.any()", DEVICE))]


def test_evaluation_loop_over_a_loader_passed_by_the_caller() -> None:
    source = HEADER + (
        "def test_loop_fn(loader):\n"
        "    correct = 0\n"
        "    for data, target in loader:\n"
        "        pred = model(data).argmax(dim=1)\n"
        "        correct += pred.eq(target).sum().item()\n"
        "    return correct\n"
        "\n"
        "\n"
        "para_loader = pl.ParallelLoader(test_loader, [device])\n"
        "accuracy = test_loop_fn(para_loader.per_device_loader(device))\n"
    )
    assert graph(source) == [(line(source, "correct +="), 20, "XLA303",
                              read("pred.eq(...).sum().item()", DEVICE))]


def test_validation_helper_called_every_step_with_a_device_batch() -> None:
    source = HEADER + (
        "class Trainer:\n"
        "    def _loader(self):\n"
        "        return pl.MpDeviceLoader(self.data, device)\n"
        "\n"
        "    @torch_xla.compile(full_graph=True)\n"
        "    def train_step(self, batch):\n"
        "        loss = self.model(batch).sum()\n"
        "        loss.backward()\n"
        "        self.optimizer.step()\n"
        "        return loss\n"
        "\n"
        "    def _validate(self, batch):\n"
        "        mask = batch['src_mask']\n"
        "        if mask.shape != batch['input_ids'].shape:\n"
        "            raise ValueError('shape')\n"
        "        if mask.sum() == 0:\n"
        "            raise ValueError('empty')\n"
        "\n"
        "    def train(self):\n"
        "        batches = iter(self._loader())\n"
        "        for step in range(self.max_steps):\n"
        "            batch = next(batches)\n"
        "            self._validate(batch)\n"
        "            loss = self.train_step(batch)\n"
    )
    assert graph(source) == [(line(source, "if mask.sum() == 0"), 12, "XLA304", branch("mask.sum() == 0"))]


def test_dataloader_rule_leaves_evaluation_endless_and_cuda_only_loaders_alone() -> None:
    source = HEADER + (
        "from apex import amp\n"
        "train_loader = DataLoader(MNIST(train=True), batch_size=64, shuffle=True)\n"
        "val_loader = DataLoader(MNIST(train=False), batch_size=64)\n"
        "tune_loader = DataLoader(validation_set, batch_size=64)\n"
        "stream = DataLoader(train_set, batch_size=64, sampler=RandomSampler(train_set, replacement=True))\n"
        "\n"
        "\n"
        "def test_dataloader(self):\n"
        "    return DataLoader(self.datasets['test'], batch_size=64)\n"
        "\n"
        "\n"
        "def train_on_gpu(model, optimizer):\n"
        "    loader = DataLoader(train_set, batch_size=64)\n"
        "    model, optimizer = amp.initialize(model, optimizer)\n"
    )
    found = [(d.line, d.col + 1, d.code) for d in lint_source(source) if d.code == "XLA901"]
    assert found == [(line(source, "train_loader ="), 16, "XLA901"), (line(source, "tune_loader ="), 15, "XLA901")]


SHAPES = """\
import torch
import torch_xla

x = torch.randn(8, device=torch_xla.device())
y = torch.where(x > 0, x, torch.zeros_like(x))  # three arguments: not the nonzero form
z = torch.norm(x, p=2, dim=0)  # not p=0 alone
idx = [1, 2]
w = x[idx][0]  # a list index is no boolean mask
v = [3, 1].index(1)
"""


def test_files_whose_calls_cannot_match_a_pattern_are_never_parsed_for_it(monkeypatch) -> None:
    """The ast-grep parse is skipped when no call has the pattern's shape, no index is a mask and no
    method is called on a device tensor; the same file with one matching call is parsed and reported."""
    import ast_grep_py

    real = ast_grep_py.SgRoot
    parsed = []

    def counting(source, language):
        parsed.append(source)  # also the rule's own patterns, read once per process
        return real(source, language)

    monkeypatch.setattr(ast_grep_py, "SgRoot", counting)
    assert [d.code for d in lint_source(SHAPES)] == []
    assert SHAPES not in parsed
    found = lint_source(SHAPES + "nz = torch.where(x > 0)\n")
    assert [(d.line, d.col, d.code) for d in found] == [(10, 5, "XLA301")]
    assert parsed[-1] == SHAPES + "nz = torch.where(x > 0)\n"


def test_a_long_expression_is_abridged_to_fit_the_first_line() -> None:
    """The arguments of a call, an operand, or a library function's module path give way first, the
    smallest change that fits; what cannot shrink stays whole up to 48 characters, else the short form."""
    def shown(text: str, longest: int) -> str:
        return abridged(ast.parse(text, mode="eval").body, "SHORT", longest)

    assert shown("accuracy(pred, targ.squeeze(dim=1)).item()", 30) == "accuracy(...).item()"
    assert shown("seq_len > self.original_max_position_embeddings", 30) == "seq_len > ..."
    assert shown("int(num_mask_token * (1 - s / t))", 30) == "int(num_mask_token * ...)"
    assert shown("torch.sigmoid(y_pred).detach().cpu()", 30) == "sigmoid(y_pred).detach().cpu()"
    assert shown("pred.eq(target.view_as(pred)).sum().item()", 30) == "pred.eq(...).sum().item()"
    assert shown("loss.detach().item()", 16) == "loss.detach().item()"
    assert shown("running_loss_reduced_detached_and_gathered_over_replicas.item()", 30) == "SHORT"


def test_where_a_region_runs_comes_from_its_kind_hook_or_caller() -> None:
    """A kind's text is its value, the same on every Python (format() of a str-valued Enum is not); a
    hook region and one a caller in another module runs carry which hook and which call."""
    assert [kind.value for kind in RegionKind] == ["training loop", "model loop", "device loop", "torch_xla.compile",
                                                   "openxla", "forward", "callback", "hook", "called"]
    node = ast.parse("pass").body[0]
    hook = StepRegion(node, RegionKind.HOOK, hook=HookKind(EVALUATION, "Lightning", "validation_step"))
    assert (where(hook), runs(hook), hands_off(hook)) == \
        ("in validation_step", "validation_step runs on every batch (Lightning). ", True)
    called = StepRegion(node, RegionKind.CALLED, caller="train.py:12")
    assert (where(called), where_in_full(called), hands_off(called)) == \
        ("on every step of its caller", "on every step of its caller (train.py:12)", False)
    loop = StepRegion(node, RegionKind.MODEL_LOOP)
    assert (where(loop), runs(loop), hands_off(loop)) == \
        (MODEL, "It runs on every iteration of a loop that runs the model. ", True)
