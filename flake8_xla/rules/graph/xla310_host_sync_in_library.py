"""XLA310 host-sync-in-library (reported by the run-time trace)."""
from flake8_xla.rule import Example, Rule

PROGRAM = ("import torch\nimport torch_xla\n\ntorch.manual_seed(0)\ndevice = torch_xla.device()\n"
           "model = torch.nn.Linear(16, 4).to(device)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
           "dataset = torch.randn(48, 16)\nfor start in range(0, 48, 8):\n"
           "    loss = model(dataset[start:start + 8].to(device)).pow(2).mean()\n"
           "    loss.backward()\n{clip}    optimizer.step()\n    optimizer.zero_grad()\n    torch_xla.sync()\n")


class HostSyncInLibrary(Rule):
    code = "XLA310"
    name = "host-sync-in-library"
    summary = "A library call that reads device values to the host inside the step (seen at run time)"
    run_only = True
    what_it_does = (
        "Reported by the run-time trace (`python -m xla_compat.trace`), never by the linter: a call in your code "
        "into an installed library (Hugging Face `generate`, a Trainer's metric gathering, a torch utility with a "
        "check that reads a value) that read a device value or copied device data to the host while it ran. The "
        "finding is on your line and names the library; its help names the library's line that did it and how "
        "often per step. What your own lines read is XLA303 (a training step), XLA304 (a truth test) or XLA307 "
        "(an evaluation loop); an op of a library that falls back to the CPU is XLA301."
    )
    why_bad = (
        "Each read waits for the device to run everything traced so far, then the step goes on with a new graph: "
        "the step is cut into pieces, and tracing stops overlapping execution. A library call can do that many "
        "times per call (one read per generated token), and no static rule can see inside it. torch_xla itself "
        "replaces `torch.nn.utils.clip_grad_norm_` with a version whose `error_if_nonfinite=True` check reads "
        "the norm twice per call (measured on torch_xla 2.9)."
    )
    fix_safety = ("No automatic fix: use the library's option that keeps values on the device, call it less often, "
                  "or move it out of the step.")
    references = ("https://github.com/pytorch/xla/blob/master/docs/source/learn/troubleshoot.md",)
    valid = (
        Example(PROGRAM.format(clip="    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"),
                title="the check off: clipping stays in the graph"),
    )
    invalid = (
        Example(PROGRAM.format(clip="    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, "
                                    "error_if_nonfinite=True)\n"),
                expect=((12, 1, "a truth test on a tensor inside torch_xla read its value to the host on every step",
                         "At torch_xla/_patched_functions.py:51, on 5 of 5 steps, 2 per step."),),
                title="a check that reads the gradient norm on every step"),
    )
