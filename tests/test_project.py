"""Issue 23: the graph rules see the whole step. Per-batch host syncs in framework hooks (Lightning,
the HF Trainer, fastai callbacks, ignite), in helpers of other modules of the project (resolved by
the CLI), per-batch copies in evaluation loops (XLA307) and blocking calls in them (XLA302); exact
diagnostics, or exact silence, for each. Each case is a class of miss or false alarm found on the
real-code corpus (benchmarks/realcode), written in our own words."""
import json
import os
import textwrap
from typing import Dict, List, Tuple

import pytest

from flake8_xla.engine import lint_source
from flake8_xla.rules.graph.xla303_host_sync_in_step import CUT, INSTEAD
from flake8_xla.rules.graph.xla307_host_copy_in_eval_loop import HELP as COPY

from cli_helpers import run

STEP = "copies to the host on every training step; read it every N steps"
EVALUATION = "copies to the host on every evaluation batch; accumulate on the device"


def graph(source: str) -> List[Tuple[int, int, str, str]]:
    return [(d.line, d.col + 1, d.code, d.message) for d in lint_source(textwrap.dedent(source))
            if d.code.startswith("XLA3")]


def write_tree(root, files: Dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def check(capsys, root, *extra) -> List[Tuple[str, int, int, str, str]]:
    """(path, line, 1-based column, code, message) that `flake8-xla check` reports from ``root``."""
    return [(f["filename"].replace(os.sep, "/").removeprefix("./"), f["line"], f["column"],
             f["code"], f["message"]) for f in findings(capsys, root, *extra)]


def findings(capsys, root, *extra) -> List[dict]:
    old = os.getcwd()
    os.chdir(root)
    try:
        code, out, err = run(capsys, "check", "--isolated", "--no-cache", "--format", "json", *extra, ".")
    finally:
        os.chdir(old)
    assert code in (0, 1), err
    return json.loads(out)


# -- framework hooks --------------------------------------------------------------------------------

LIGHTNING = """\
    import torch
    import torch_xla
    import lightning as L

    class Classifier(L.LightningModule):
        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            self.log("loss", loss.item())
            self.log("train_loss", loss, prog_bar=True)
            self.log("quiet", loss)
            self.log("epoch_loss", loss, prog_bar=True, on_step=False)
            if batch_idx % 50 == 0:
                print(loss.item())
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            preds = self(x).argmax(-1)
            return preds.cpu()
"""


def test_lightning_hooks_are_step_code() -> None:
    hook = "training_step runs on every training batch (Lightning). "
    assert [(d.line, d.col + 1, d.code, d.message, d.help) for d in lint_source(textwrap.dedent(LIGHTNING))
            if d.code.startswith("XLA3")] == [
        (9, 26, "XLA303", "loss.item() copies to the host in training_step; read it every N steps",
         f"{hook}{CUT} {INSTEAD}"),
        (10, 9, "XLA303", "logging loss with prog_bar=True copies to the host in training_step; drop prog_bar=True",
         f"{hook}Lightning reads every progress-bar value (.item()) when the batch ends. Log it without "
         "prog_bar=True (the logger reads it every log_every_n_steps) or with on_step=False."),
        (20, 16, "XLA307", "preds.cpu() copies to the host in validation_step; accumulate on the device",
         f"validation_step runs on every batch (Lightning). {COPY}"),
    ]


def test_trainer_and_fastai_hooks() -> None:
    source = """\
        import torch_xla
        from transformers import Trainer
        from fastai.callback.core import Callback

        class MyTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False):
                outputs = model(**inputs)
                if outputs.loss > 10:
                    print("large")
                return outputs.loss

        class Smooth(Callback):
            def after_batch(self):
                self.history.append(self.smooth_loss.item())

            def after_fit(self):
                print(self.smooth_loss.item())
    """
    found = [(d.line, d.col + 1, d.code, d.message, d.help) for d in lint_source(textwrap.dedent(source))
             if d.code.startswith("XLA3")]
    assert [(line, col, code, message) for line, col, code, message, _ in found] == [
        (8, 12, "XLA304", "`if outputs.loss > 10` branches on a tensor in compute_loss; use torch.where"),
        (14, 29, "XLA303", "self.smooth_loss.item() copies to the host in after_batch; read it every N steps")]
    assert found[0][4].startswith("compute_loss runs on every training batch (the Trainer). ")
    assert found[1][4].startswith("after_batch runs on every training batch (fastai's Learner). ")


def test_ignite_process_function() -> None:
    source = """\
        import torch_xla
        from ignite.engine import Engine

        def train_step(engine, batch):
            x, y = batch
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        trainer = Engine(train_step)
    """
    assert [(line, col, code) for line, col, code, *_ in graph(source)] == [(10, 12, "XLA303")]


def test_a_method_named_like_a_hook_elsewhere_is_not_one() -> None:
    source = """\
        import torch_xla

        class Report:
            def training_step(self, batch, batch_idx):
                return batch.item()
    """
    assert graph(source) == []


# -- evaluation loops (XLA307) ----------------------------------------------------------------------

EVAL = """\
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.distributed.parallel_loader as pl

    device = torch_xla.device()
    model = torch.nn.Linear(8, 2).to(device)

    def evaluate(loader):
        preds, labels, first = [], [], None
        for batch in pl.MpDeviceLoader(loader, device):
            inputs = {"x": batch[0], "y": batch[1]}
            out = model(inputs["x"])
            preds.append(out.detach().cpu().numpy())
            labels.append(inputs["y"].cpu())
            if first is None:
                first = out.cpu()
        return np.concatenate(preds)

    for _ in range(8):
        tokens = model(tokens).argmax(-1).cpu()
"""


def test_per_batch_copies_in_an_evaluation_loop() -> None:
    assert graph(EVAL) == [
        (14, 22, "XLA307", f"out.detach().cpu() {EVALUATION}"),
    ]


def test_blocking_reduce_in_an_evaluation_loop() -> None:
    source = """\
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.parallel_loader as pl

        for data, target in pl.MpDeviceLoader(val_loader, xm.xla_device()):
            loss = criterion(model(data), target)
            total = xm.mesh_reduce("val_loss", loss, sum)
    """
    found = [d for d in graph(source) if d[2] == "XLA302"]
    assert found == [(7, 13, "XLA302", "xm.mesh_reduce() blocks the host on every evaluation batch; reduce once after "
                                       "the loop")]
    assert [d.help for d in lint_source(textwrap.dedent(source)) if d.code == "XLA302"] == [
        "It syncs, copies the data to the host and waits for every replica: each batch waits for the device and the "
        "other replicas. Accumulate on the device and reduce once after the loop."]


# -- helpers in other modules (the CLI's project view) ------------------------------------------

PROJECT = {
    "pkg/__init__.py": "from .metrics import accuracy\n",
    "pkg/metrics.py": """\
        import numpy as np

        def accuracy(logits, labels):
            preds = logits.argmax(-1)
            return float((preds.cpu() == labels.cpu()).float().mean())

        def log_value(value, step):
            print(step, value.item())

        class Meter:
            def update(self, value, n=1):
                value = value.detach().cpu().numpy()
                self.total += value * n

        def shape_of(x):
            return x.shape[0]
    """,
    "train.py": """\
        import torch
        import torch_xla
        import torch_xla.distributed.parallel_loader as pl
        from pkg import accuracy
        from pkg.metrics import Meter, log_value, shape_of

        device = torch_xla.device()
        model = torch.nn.Linear(8, 2).to(device)
        meter = Meter()
        for step, (data, target) in enumerate(pl.MpDeviceLoader(loader, device)):
            optimizer.zero_grad()
            out = model(data)
            loss = loss_fn(out, target)
            loss.backward()
            optimizer.step()
            log_value(loss, step)
            meter.update(loss)
            n = shape_of(out)
            if step % 100 == 0:
                log_value(loss, step)

        for data, target in pl.MpDeviceLoader(val_loader, device):
            acc = accuracy(model(data), target)
    """,
}


def test_helpers_in_other_modules_are_reported_at_their_call(tmp_path, capsys) -> None:
    write_tree(tmp_path, PROJECT)
    assert [f for f in check(capsys, tmp_path, "--select", "XLA3") if f[0] == "train.py"] == [
        ("train.py", 16, 5, "XLA303", f"log_value(loss) {STEP}"),
        ("train.py", 17, 5, "XLA303", f"update(loss) {STEP}"),
        ("train.py", 23, 11, "XLA307", f"accuracy(model(data)) {EVALUATION}"),
    ]
    assert [f["help"] for f in findings(capsys, tmp_path, "--select", "XLA3")
            if os.path.basename(f["filename"]) == "train.py"] == [
        f"log_value() calls .item() on its value at metrics.py:8. {CUT} {INSTEAD}",
        f"update() calls .cpu() on its value at metrics.py:12. {CUT} {INSTEAD}",
        f"accuracy() calls .cpu() on its logits at metrics.py:5. {COPY}",
    ]


def test_the_flake8_plugin_lints_one_file_at_a_time(tmp_path) -> None:
    write_tree(tmp_path, PROJECT)
    source = (tmp_path / "train.py").read_text()
    assert graph(source) == []  # the engine without a project: the helpers are not seen


def test_a_changed_helper_invalidates_the_cached_result(tmp_path, capsys) -> None:
    write_tree(tmp_path, PROJECT)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        args = ("check", "--isolated", "--select", "XLA303", "--format", "json", "train.py")
        first = json.loads(run(capsys, *args)[1])
        assert [f["line"] for f in first] == [16, 17]
        helper = textwrap.dedent(PROJECT["pkg/metrics.py"]).replace("value.item()", "value")
        (tmp_path / "pkg" / "metrics.py").write_text(helper)
        second = json.loads(run(capsys, *args)[1])
        assert [f["line"] for f in second] == [17]
    finally:
        os.chdir(old)


def test_a_lightning_module_of_a_project_that_trains_on_tpu(tmp_path, capsys) -> None:
    write_tree(tmp_path, {
        "model.py": """\
            import pytorch_lightning as pl

            class Autoencoder(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    x = batch[0]
                    recon, aux = self(x)
                    loss = ((x - recon) ** 2).mean() + aux
                    self.log("train/loss", loss, prog_bar=True)
                    return loss

            def pick(losses):
                for loss in losses:
                    print(loss.item())
        """,
        "train.py": """\
            import pytorch_lightning as pl
            from model import Autoencoder

            trainer = pl.Trainer(accelerator="tpu", devices=8)
            trainer.fit(Autoencoder())
        """,
    })
    assert [f[:4] for f in check(capsys, tmp_path)] == [("model.py", 8, 9, "XLA303")]
    (tmp_path / "train.py").write_text("import pytorch_lightning as pl\ntrainer = pl.Trainer(accelerator='gpu')\n")
    assert check(capsys, tmp_path) == []


def test_a_hooks_only_result_is_not_served_to_a_whole_file_lint(tmp_path, capsys) -> None:
    write_tree(tmp_path, {
        "model.py": """\
            import pytorch_lightning as pl

            class Scaler(pl.LightningModule):
                def forward(self, x):
                    return x / x.max().item()

                def training_step(self, batch, batch_idx):
                    return self(batch).item()
        """,
        "train.py": "import pytorch_lightning as pl\ntrainer = pl.Trainer(accelerator='tpu')\n",
    })
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        args = ("check", "--isolated", "--select", "XLA303", "--format", "json")
        assert [f["line"] for f in json.loads(run(capsys, *args, "model.py")[1])] == [8]
        # the same content and target, now linted whole: the cached hooks-only result must not be used
        assert [f["line"] for f in json.loads(run(capsys, *args, "--assume-torch-xla", "model.py")[1])] == [5, 8]
    finally:
        os.chdir(old)


@pytest.mark.parametrize("broken", ["def f(:\n", "\0\0\0", "x = 1\n" * 3])
def test_a_broken_or_plain_helper_module_changes_nothing(tmp_path, capsys, broken) -> None:
    files = dict(PROJECT)
    files["pkg/metrics.py"] = broken
    write_tree(tmp_path, files)
    found = check(capsys, tmp_path, "--select", "XLA3")
    assert [f for f in found if f[0] == "train.py"] == []
