"""XLA309 recompile-after-warmup (reported by the run-time trace)."""
from flake8_xla.rule import Example, Rule

HEADER = ("import torch\nimport torch_xla\n\ntorch.manual_seed(0)\ndevice = torch_xla.device()\n"
          "model = torch.nn.Linear(16, 4).to(device)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
          "dataset = torch.randn(100, 16)\n")
STEP = ("    loss = model(batch.to(device)).pow(2).mean()\n    loss.backward()\n    optimizer.step()\n"
        "    optimizer.zero_grad()\n    torch_xla.sync()\n")


class RecompileAfterWarmup(Rule):
    code = "XLA309"
    name = "recompile-after-warmup"
    summary = "A graph compiled again after warm-up (seen at run time)"
    run_only = True
    what_it_does = (
        "Reported by the run-time trace (`python -m xla_compat.trace`), never by the linter: a step compiled a "
        "graph after warm-up, that is, once every line that built graph ops in it had done so in `--warmup` "
        "(default 2) earlier steps; compiles before the first step that ran `backward()` are set-up and not "
        "reported. The finding is on the first line whose traced torch calls changed since the step before: a "
        "call whose tensor arguments had other shapes (`(8, 16) -> (4, 16)`: a short last batch, a sequence length "
        "that follows the data), a Python number passed to a call that became or stopped being 0 or 1 (torch_xla "
        "compiles those two into the graph: a learning-rate schedule that makes `1 - lr * wd` round to 1.0), or a "
        "line that ran this time and not the step before, or the other way round (Python control flow on a "
        "value: `if epoch > 0:`, a branch on a tensor's value). When no traced call changed, the message says so "
        "and the finding is on the sync that compiled."
    )
    why_bad = (
        "XLA compiles one graph per distinct program and input shape, and a compile takes seconds to minutes "
        "on a TPU while the step waits. A program that compiles a new graph every few steps spends its time "
        "compiling; one that compiles once more at the end of each epoch (a short last batch) pays for it every "
        "epoch. The static rules see some causes (XLA901 for a loader without `drop_last`, XLA301 for an op "
        "whose output shape follows the data); only a run shows which shapes actually changed."
    )
    fix_safety = "No automatic fix: pad or bucket the shapes (`drop_last=True`, a fixed sequence length), or move the branch out of the step."
    references = ("https://github.com/pytorch/xla/blob/master/TROUBLESHOOTING.md#dynamic-shapes",)
    valid = (
        Example(HEADER + "for start in range(0, 96, 8):  # whole batches only\n    batch = dataset[start:start + 8]\n" + STEP,
                title="every step has the same shapes"),
    )
    invalid = (
        Example(HEADER + "for start in range(0, 100, 8):  # the last batch has 4 rows\n"
                "    batch = dataset[start:start + 8]\n" + STEP,
                expect=((11, 1, "a new graph compiled after warm-up: this call's input shapes changed",
                         "Input shapes (8, 16) -> (4, 16). 1 new graph, on 1 of 12 steps."),),
                title="a short last batch"),
    )
