"""Issue 33: a value is known wherever the program put it. The device, the model and the loader
reach the training code through parameters of functions in other modules, constructor arguments
kept in ``self`` attributes, assignments on a backend flag, and helpers that return torch_xla's
modules with a ``None`` fallback. Each test is a shape seen in real code nobody on the team wrote,
in our own words, with exact diagnostics (or exact silence)."""
import json
import os
import textwrap
from typing import List, Tuple

from flake8_xla.engine import lint_source

from cli_helpers import run
from test_project import EVALUATION, STEP, check, findings, write_tree

ENGINE = """\
    import torch


    def train_one_epoch(model, loader, optimizer, device):
        model.train()
        total = 0.0
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
        return total


    def validate(model, loader, device):
        preds = []
        with torch.no_grad():
            for images, _ in loader:
                output = model(images.to(device))
                preds.append(output.detach().cpu().numpy())
        return preds


    def train_on_gpu(model, loader, optimizer):
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
            loss.backward()
            optimizer.step()
            print(loss.item())
"""

MAIN = """\
    import torch
    import torch_xla
    import torch_xla.distributed.xla_multiprocessing as xmp

    from engine import train_one_epoch, validate


    def _mp_fn(index, flags):
        device = torch_xla.device()
        model = flags["model"].to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            train_one_epoch(model, flags["loader"], optimizer, device)
            validate(model, flags["loader"], device)
"""


def test_parameters_take_what_the_xla_callers_in_another_module_pass(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"engine.py": ENGINE, "main.py": MAIN})
    assert check(capsys, tmp_path, "--select", "XLA3") == [
        ("engine.py", 13, 18, "XLA303", f"loss.item() {STEP}"),
        ("engine.py", 22, 26, "XLA307", f"output.detach().cpu() {EVALUATION}"),
    ]


def test_a_module_only_cuda_code_calls_is_not_linted(tmp_path, capsys) -> None:
    cuda_main = MAIN.replace("import torch_xla\n", "").replace(
        "    import torch_xla.distributed.xla_multiprocessing as xmp\n", "").replace("torch_xla.device()", "'cuda'")
    write_tree(tmp_path, {"engine.py": ENGINE, "main.py": cuda_main})
    assert check(capsys, tmp_path) == []


def test_a_helper_the_xla_code_calls_with_nothing_on_the_device_is_not_linted(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"engine.py": ENGINE, "main.py": MAIN.replace(
        "train_one_epoch(model, flags[\"loader\"], optimizer, device)", "train_one_epoch(None, [], None, 'cpu')"
    ).replace("validate(model, flags[\"loader\"], device)", "pass")})
    assert check(capsys, tmp_path, "--select", "XLA3") == []


TRAINER = """\
    import torch


    class Trainer:
        def __init__(self, model, loader, device):
            self.device = device
            self.model = model
            self.loader = loader
            self.optimizer = torch.optim.Adam(self.model.parameters())

        def train_epoch(self):
            running = 0.0
            for x, y in self.loader:
                x, y = x.to(self.device), y.to(self.device)
                self.optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                running += loss.item()
            return running
"""


def test_a_constructor_argument_kept_in_self_is_known_in_the_other_methods(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"trainer.py": TRAINER, "run.py": """\
        import torch_xla
        from trainer import Trainer


        def run(model, loader):
            device = torch_xla.device()
            trainer = Trainer(model.to(device), loader, device)
            for epoch in range(2):
                trainer.train_epoch()
    """})
    assert check(capsys, tmp_path, "--select", "XLA3") == [
        ("trainer.py", 19, 24, "XLA303", f"loss.item() {STEP}"),
    ]


def test_the_device_of_the_xla_branch_of_a_backend_flag(tmp_path, capsys) -> None:
    # the test names no backend word the branch analysis knows: every assignment that reaches the use
    # counts, and on a TPU the XLA one runs
    write_tree(tmp_path, {"train.py": """\
        import torch
        import torch_xla.core.xla_model as xm


        def train(args, model, loader, optimizer):
            if args.tpu_cores > 0:
                device = xm.xla_device()
            elif args.gpus:
                device = torch.device("cuda")
            else:
                device = torch.device("cpu")
            model.to(device)
            for batch, target in loader:
                batch = batch.to(device)
                loss = torch.nn.functional.cross_entropy(model(batch), target.to(device))
                loss.backward()
                optimizer.step()
                xm.mark_step()
                print(batch.sum().item())
    """})
    assert check(capsys, tmp_path, "--select", "XLA303") == [
        ("train.py", 19, 15, "XLA303", f"batch.sum().item() {STEP}"),
    ]


UTIL = """\
    def safe_import_xla():
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.distributed.parallel_loader as pl
            return xm, pl, True
        except ImportError:
            return None, None, False
"""

RUN = """\
    from util import safe_import_xla

    tpu_available = True
    if tpu_available:
        xm, pl, ok = safe_import_xla()


    def world():
        return xm.xrt_world_size()
"""


def test_modules_from_a_helper_with_a_none_fallback(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"util.py": UTIL, "run.py": RUN})
    assert check(capsys, tmp_path, "--select", "XLA101") == [
        ("run.py", 9, 12, "XLA101", "xm.xrt_world_size() was removed in torch_xla 2.7; use "
                                    "torch_xla.runtime.world_size() (2.1+)"),
    ]


def test_a_changed_caller_invalidates_the_cached_result_of_the_callee(tmp_path, capsys) -> None:
    # engine.py names torch_xla itself, so its cache key does not change with its callers: only the
    # callers' digests kept with the result can tell it is stale
    write_tree(tmp_path, {"engine.py": "import torch_xla  # noqa: F401\n" + textwrap.dedent(ENGINE), "main.py": MAIN})
    assert _check_cached(capsys, tmp_path) == [("engine.py", 14, 18, "XLA303"), ("engine.py", 23, 26, "XLA307")]
    (tmp_path / "main.py").write_text((tmp_path / "main.py").read_text().replace("torch_xla.device()", "'cpu'"))
    # the loss of a training loop in a file that names torch_xla stays a device tensor; the model's
    # output, known only from the caller, is no longer one
    assert _check_cached(capsys, tmp_path) == [("engine.py", 14, 18, "XLA303")]


def _check_cached(capsys, root) -> List[Tuple[str, int, int, str]]:
    old = os.getcwd()
    os.chdir(root)
    try:
        code, out, err = run(capsys, "check", "--isolated", "--format", "json", "--select", "XLA3", ".")
    finally:
        os.chdir(old)
    assert code in (0, 1), err
    return [(f["filename"].removeprefix("./"), f["line"], f["column"], f["code"]) for f in json.loads(out)]


def test_the_cuda_copy_of_a_training_loop_beside_the_xla_one() -> None:
    source = "import torch_xla\n" + textwrap.dedent(ENGINE)
    assert [(d.line, d.code) for d in lint_source(source) if d.code.startswith("XLA3")] == [(14, "XLA303")]


def test_the_cuda_copy_moves_through_a_device_name_and_the_flag_branch_stays_xla() -> None:
    source = textwrap.dedent("""\
        import torch
        import torch_xla


        def train_cuda(model, loader, optimizer):
            device = torch.device("cuda")
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                print(loss.item())


        def train_either(model, loader, optimizer, tpu):
            device = torch_xla.device() if tpu else torch.device("cuda")
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                print(loss.item())
    """)
    assert [(d.line, d.col, d.code) for d in lint_source(source) if d.code.startswith("XLA3")] == [(20, 14, "XLA303")]


def test_a_loop_that_leaves_after_its_first_batch_is_no_step() -> None:
    source = textwrap.dedent("""\
        import torch
        import torch_xla


        def probe(model, loader, optimizer):
            device = torch_xla.device()
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                print("first loss", loss.item())
                break
            for x, y in loader:
                out = model(x.to(device))
                if out.sum() > 0:
                    break
                print(out.cpu())
    """)
    # the second loop leaves only on a condition: it may run for many batches, its copy is per batch
    assert [(d.line, d.code) for d in lint_source(source) if d.code in ("XLA303", "XLA307")] == [(17, "XLA307")]


def test_the_cached_result_of_a_module_linted_for_its_callers_follows_them(tmp_path, capsys) -> None:
    # engine.py never names torch_xla: whether it is linted at all depends on main.py
    write_tree(tmp_path, {"engine.py": ENGINE, "main.py": MAIN})
    assert _check_cached(capsys, tmp_path) == [("engine.py", 13, 18, "XLA303"), ("engine.py", 22, 26, "XLA307")]
    assert _check_cached(capsys, tmp_path) == [("engine.py", 13, 18, "XLA303"), ("engine.py", 22, 26, "XLA307")]
    (tmp_path / "main.py").write_text((tmp_path / "main.py").read_text().replace("torch_xla.device()", "'cpu'"))
    assert _check_cached(capsys, tmp_path) == []


def test_a_value_read_again_in_the_same_step_is_one_transfer() -> None:
    source = textwrap.dedent("""\
        import torch
        import torch_xla


        def train(model, loader, optimizer):
            device = torch_xla.device()
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                running = loss.item()
                loss.backward()
                optimizer.step()
                print(f"loss {loss:.4f}")
                loss = loss * 2
                print(f"doubled {loss:.4f}")
    """)
    # line 12 formats the tensor line 9 already read; line 14 formats a new one
    assert [(d.line, d.code) for d in lint_source(source) if d.code == "XLA303"] == [(9, "XLA303"), (14, "XLA303")]


def test_the_inner_loops_of_a_step_function_its_caller_runs_per_batch() -> None:
    source = textwrap.dedent("""\
        import torch
        import torch_xla.core.xla_model as xm


        def make_step(G, D, config):
            def step(x, y):
                chunks = torch.split(x, config["batch_size"])
                for index in range(config["num_D_steps"]):
                    loss = D(chunks[index], y).mean()
                    loss.backward()
                    xm.optimizer_step(D.optim)
                return loss
            return step


        def pretrain(model, optimizer):
            for i in range(100):
                loss = model(torch.randn(4, 8, device=xm.xla_device())).sum()
                loss.backward()
                optimizer.step()
    """)
    # step's loop works on the batch its caller gives it; pretrain's loop makes its own data and never syncs
    assert [(d.line, d.code) for d in lint_source(source) if d.code == "XLA305"] == [(17, "XLA305")]


def test_a_dump_of_the_first_batches_under_a_debug_switch() -> None:
    source = textwrap.dedent("""\
        import torch_xla.distributed.parallel_loader as pl


        def show(args, loader, device):
            if args.debug_mode:
                for j, (x, y) in enumerate(pl.MpDeviceLoader(loader, device)):
                    print(x.detach().cpu().numpy())
                    print(y.sum().item())
    """)
    assert [d for d in lint_source(source) if d.code.startswith("XLA3")] == []


AUGMENT = """\
    import torch


    def mixup(x, y, device):
        index = torch.randperm(x.size(0)).to(device)
        if x.sum() > 0:
            x = x * 2
        return x[index], y[index]
"""


def test_a_helper_of_another_module_called_every_step_is_step_code(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"augment.py": AUGMENT, "train.py": """\
        import torch
        import torch_xla
        import torch_xla.distributed.parallel_loader as pl

        from augment import mixup


        def train(model, loader, optimizer):
            device = torch_xla.device()
            for x, y in pl.MpDeviceLoader(loader, device):
                x, y = mixup(x, y, device)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
    """})
    assert _check_with_help(capsys, tmp_path, "--select", "XLA3") == [
        ("augment.py", 5, 13, "XLA308", "torch.randperm(...) is copied from the host on every step of its caller; draw "
                                        "it with device=device",
         "It is drawn on the host and copied to the device on every step of its caller (train.py:11) (a "
         "host-to-device transfer each time). Draw it there: torch.randperm(..., device=device) (the device's "
         "generator gives other numbers; torch_xla.manual_seed seeds it)."),
        ("augment.py", 6, 8, "XLA304", "`if x.sum() > 0` branches on a tensor on every step of its caller; use "
                                       "torch.where",
         "It runs on every step of its caller (train.py:11). Python needs the value, so the pending graph is cut and "
         "run there and the value copied to the host, and each outcome traces a different graph. Compute both sides "
         "and choose with torch.where(cond, a, b)."),
    ]


def test_a_helper_called_once_after_the_loop_is_not_step_code(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"augment.py": AUGMENT, "train.py": """\
        import torch_xla

        from augment import mixup


        def finish(x, y):
            return mixup(x, y, torch_xla.device())
    """})
    assert check(capsys, tmp_path, "--select", "XLA3") == []


UTILS = """\
    import torch


    def is_xla():
        return True


    def get_device():
        if is_xla():
            import torch_xla.core.xla_model as xm
            return xm.xla_device()
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("cpu")
"""


def test_the_device_a_helper_of_another_module_returns(tmp_path, capsys) -> None:
    # on XLA the helper returns in its first branch: what follows is the other backends' code
    write_tree(tmp_path, {"utils.py": UTILS, "train.py": """\
        import torch
        import torch_xla
        from utils import get_device


        def train(model, loader):
            device = get_device()
            model = model.to(device)
            for x, y in loader:
                torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
                torch_xla.sync()
            torch.save(model.state_dict(), "model.pt")
    """})
    assert [f[:4] for f in check(capsys, tmp_path, "--select", "XLA403")] == [("train.py", 12, 5, "XLA403")]


def test_the_device_a_helper_returns_only_on_one_branch_is_not_sure() -> None:
    source = textwrap.dedent("""\
        import torch
        import torch_xla


        def pick(accelerated):
            if accelerated:
                return torch_xla.device()
            return torch.device("cuda")


        def train(model, accelerated):
            model = model.to(pick(accelerated))
            torch.save(model.state_dict(), "model.pt")
    """)
    # `accelerated` names no backend: the helper may return CUDA's device, and XLA403 needs it sure
    assert [d for d in lint_source(source) if d.code == "XLA403"] == []


def test_a_remainder_kept_in_a_name_and_compared_later_is_periodic() -> None:
    source = textwrap.dedent("""\
        import torch_xla.core.xla_model as xm


        def train(run, loader, R):
            for batch in loader:
                report = run.step % R
                loss = run.model(batch).mean()
                loss.backward()
                run.optimizer.step()
                if run.step > 0 and report == R - 1:
                    xm.mesh_reduce("loss", loss.item(), sum)
                index = run.step % len(run.buffer)
                if run.buffer[index] > 0:
                    print(loss.item())
    """)
    # line 13 compares a tensor picked by the remainder, not the remainder: it runs every step
    assert [(d.line, d.code) for d in lint_source(source) if d.code.startswith("XLA30")] == [(14, "XLA303")]


def test_a_parameter_with_a_constant_default_takes_what_the_calls_pass(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"penalty.py": """\
        import torch


        def gradient_penalty(real, device="cpu"):
            alpha = torch.rand(real.shape[0], 1).to(device)
            return (alpha * real).sum()
    """, "train.py": """\
        import torch_xla
        import torch_xla.distributed.parallel_loader as pl

        from penalty import gradient_penalty


        def train(loader, optimizer):
            device = torch_xla.device()
            for real in pl.MpDeviceLoader(loader, device):
                gradient_penalty(real, device).backward()
                optimizer.step()
    """})
    assert [f[:4] for f in check(capsys, tmp_path, "--select", "XLA3")] == [("penalty.py", 5, 13, "XLA308")]


def _check_with_help(capsys, root, *extra) -> List[Tuple[str, int, int, str, str, str]]:
    """check() with each finding's help: where the facts of the other modules are named."""
    return [(f["filename"].replace(os.sep, "/").removeprefix("./"), f["line"], f["column"], f["code"], f["message"],
             f["help"]) for f in findings(capsys, root, *extra)]


def test_an_fsdp_wrapper_and_a_reduction_from_helpers_of_another_module(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"xla_utils.py": """\
        import torch_xla.core.xla_model as xm


        def is_xla():
            return True


        def shard_module_fsdp(module):
            if not is_xla():
                return module
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            return FSDP(module)


        def optimizer_step(optimizer):
            if not is_xla():
                optimizer.step()
                return
            xm.optimizer_step(optimizer, barrier=True)
    """, "train.py": """\
        import torch
        import torch_xla
        from utils import xla_utils


        def train(net, loader):
            student = net.to(torch_xla.device())
            student = xla_utils.shard_module_fsdp(student)
            optim = torch.optim.AdamW(student.parameters())
            for batch in loader:
                student(batch).sum().backward()
                torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
                xla_utils.optimizer_step(optim)
    """})
    (tmp_path / "utils").mkdir()
    (tmp_path / "xla_utils.py").rename(tmp_path / "utils" / "xla_utils.py")
    assert _check_with_help(capsys, tmp_path, "--select", "XLA2") == [
        ("train.py", 12, 9, "XLA203", "clip_grad_norm_ clips each FSDP shard by its own norm; call "
                                       "student.clip_grad_norm_(max_norm)",
         "torch.nn.utils.clip_grad_norm_ gets the parameters of `student`, FSDP-wrapped at line 8: each rank clips "
         "its gradient shard by a different factor. Call the root FSDP wrapper's clip_grad_norm_, on every rank."),
        ("train.py", 13, 9, "XLA202", "xla_utils.optimizer_step() all-reduces FSDP gradients again; call "
                                       "optimizer.step() directly",
         "`optim` holds the parameters of the FSDP-wrapped `student` (line 8), which FSDP already reduce-scatters: "
         "they are reduced twice and the update is wrong. xla_utils.optimizer_step() calls optimizer_step or "
         "reduce_gradients."),
    ]


WRAPPER = """\
    import torch_xla
    import torch_xla.core.xla_model as xm


    def get_device():
        return torch_xla.device()


    def is_master():
        return xm.is_master_ordinal()
"""


def test_a_script_written_against_the_project_s_wrapper_of_torch_xla_is_xla_code(tmp_path, capsys) -> None:
    script = """\
        import torch
        from common import xla_utils


        def evaluate(model, loader):
            device = xla_utils.get_device()
            total = []
            with torch.no_grad():
                for x, y in loader:
                    out = model(x.to(device))
                    total.append(out.detach().cpu())
            return total
    """
    write_tree(tmp_path, {"common/__init__.py": "", "common/xla_utils.py": WRAPPER, "evaluate.py": script,
                          "report.py": script.replace("xla_utils.get_device()", "'cpu' if xla_utils.is_master() "
                                                      "else 'cpu'")})
    assert check(capsys, tmp_path, "--select", "XLA3") == [
        ("evaluate.py", 11, 26, "XLA307", f"out.detach().cpu() {EVALUATION}"),
    ]


def test_the_state_dict_of_a_model_the_xla_caller_passes_on_the_device(tmp_path, capsys) -> None:
    save = "torch.save({'gen': gen.state_dict()}, f'ckpt_{epoch}.pt')"
    train = """\
        import torch
        import torch_xla
        from models import Generator
        from utils import checkpoint


        def main(use_tpu):
            device = torch_xla.device() if use_tpu else "cpu"
            gen = Generator().to(device)
            for epoch in range(3):
                checkpoint(epoch, gen)
    """
    write_tree(tmp_path, {"models.py": "import torch\n\n\nclass Generator(torch.nn.Module):\n    pass\n",
                          "utils.py": f"import torch\n\n\ndef checkpoint(epoch, gen):\n    {save}\n",
                          "train.py": train.replace("Generator().to(device)", "Generator()")})
    assert check(capsys, tmp_path, "--select", "XLA403") == []  # a model never moved: on the CPU
    write_tree(tmp_path, {"train.py": train})
    found = _check_with_help(capsys, tmp_path, "--select", "XLA403")
    assert [f[:5] for f in found] == [("utils.py", 5, 5, "XLA403", "torch.save() of `gen.state_dict()` writes XLA "
                                       "tensors; save CPU copies (xla_compat.save)")]
    assert found[0][5].startswith("`gen` is on the XLA device as train.py:11 passes it: torch.load of the file fails")


def test_an_optimizer_built_before_a_helper_of_another_module_wraps_the_model(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"model.py": """\
        import torch
        from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP


        def wrap_model(module):
            return FSDP(module)
    """, "train.py": """\
        import torch
        import torch_xla
        from model import wrap_model


        def main(net):
            model = net.to(torch_xla.device())
            optimizer = torch.optim.AdamW(model.parameters())
            model = wrap_model(model)
            return model, optimizer
    """})
    assert _check_with_help(capsys, tmp_path, "--select", "XLA201") == [
        ("train.py", 8, 17, "XLA201", "optimizer built from model.parameters() before the FSDP wrap; build it after "
                                      "wrapping",
         "`model` is wrapped with FSDP at line 9: FSDP replaces its parameters, so this optimizer never updates the "
         "model.")]


def test_an_fsdp_shard_saved_by_a_master_only_helper_of_another_module(tmp_path, capsys) -> None:
    write_tree(tmp_path, {"xla_utils.py": """\
        import torch
        import torch_xla.core.xla_model as xm


        def shard_module_fsdp(module):
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            return FSDP(module)


        def save_checkpoint(state, path):
            cpu_state = {k: v.cpu() for k, v in state.items()}
            if xm.is_master_ordinal():
                torch.save(cpu_state, path)
            xm.rendezvous("save")


        def save_per_rank(state, path):
            torch.save(state, f"{path}.{xm.get_ordinal()}")
    """, "train.py": """\
        import torch_xla
        import xla_utils


        def _save(model, step):
            state = {"model": model.state_dict(), "step": step}
            xla_utils.save_checkpoint(state, f"/ckpt/step-{step}.pt")


        def train(net, loader, use_fsdp):
            student = net.to(torch_xla.device())
            if use_fsdp:
                student = xla_utils.shard_module_fsdp(student)
            for step, batch in enumerate(loader):
                _save(student, step)
            xla_utils.save_checkpoint({"model": student.state_dict()}, "/ckpt/final.pt")
            xla_utils.save_per_rank({"model": student.state_dict()}, "/ckpt/final.pt")
    """})
    assert _check_with_help(capsys, tmp_path, "--select", "XLA205") == [
        ("train.py", 7, 5, "XLA205", "xla_utils.save_checkpoint() saves only the master's shard of `model`; save "
                                     "every rank's shard",
         "`model` is FSDP-wrapped at line 13 (passed on line 15), and xla_utils.save_checkpoint() saves on the "
         "master only (xla_utils.py:13). Save every rank's shard, with a rank-suffixed path and "
         "model.get_shard_metadata()."),
        ("train.py", 16, 5, "XLA205", "xla_utils.save_checkpoint() saves only the master's shard of `student`; save "
                                      "every rank's shard",
         "`student` is FSDP-wrapped at line 13, and xla_utils.save_checkpoint() saves on the master only "
         "(xla_utils.py:13). Save every rank's shard, with a rank-suffixed path and student.get_shard_metadata()."),
    ]
