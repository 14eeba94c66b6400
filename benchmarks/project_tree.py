"""A synthetic project of many modules for the cross-module value analysis (issue 33): half the
files are XLA training scripts that import a helper module and call it every step with the XLA
device; the other half are those helpers, which never name torch_xla. Prints the tree's path.

    python benchmarks/project_tree.py /tmp/tree --files 5000
    /usr/bin/time -v flake8-xla check --no-cache -j 1 /tmp/tree   # peak RSS: "Maximum resident set size"
"""
from __future__ import annotations

import argparse
import os

HELPER = '''import torch


def train_step(model, batch, optimizer, device, scale=1.0):
    x = batch.to(device)
    index = torch.randperm(x.size(0)).to(device)
    loss = (model(x[index]) * scale).mean()
    loss.backward()
    optimizer.step()
    return loss


def evaluate(model, loader, device):
    total = 0.0
    for batch in loader:
        total += model(batch.to(device)).sum()
    return total
'''

SCRIPT = '''import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl

from helpers_{k}.steps import train_step, evaluate


def main(model, loader, optimizer):
    device = torch_xla.device()
    model = model.to(device)
    for batch in pl.MpDeviceLoader(loader, device):
        loss = train_step(model, batch, optimizer, device)
        print(loss.item())
    evaluate(model, loader, device)
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--files", type=int, default=5000)
    args = ap.parse_args()
    pairs = args.files // 2
    for k in range(pairs):
        package = os.path.join(args.root, f"helpers_{k}")
        os.makedirs(package, exist_ok=True)
        open(os.path.join(package, "__init__.py"), "w").close()
        with open(os.path.join(package, "steps.py"), "w") as f:
            f.write(HELPER)
        with open(os.path.join(args.root, f"train_{k}.py"), "w") as f:
            f.write(SCRIPT.format(k=k))
    open(os.path.join(args.root, "pyproject.toml"), "w").close()
    print(args.root)


if __name__ == "__main__":
    main()
