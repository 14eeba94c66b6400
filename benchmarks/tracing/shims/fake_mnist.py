"""torchvision's MNIST (and FashionMNIST, KMNIST, which share its loader) read from small synthetic data
instead of a download: the harness has no internet. ``download`` does nothing, the files are "there",
and ``_load_data`` returns ``FAKE_MNIST_COUNT`` (default 512) random 28x28 uint8 images with labels
0-9, the dtypes and shapes the real files give. Everything else is torchvision's own class: its
``__getitem__`` makes the same PIL image, and the script's transforms run on it unchanged."""
import os

import torch
from torchvision.datasets import mnist

_COUNT = int(os.environ.get("FAKE_MNIST_COUNT", "512"))


def _load_data(self):
    generator = torch.Generator().manual_seed(0 if self.train else 1)
    data = torch.randint(0, 256, (_COUNT, 28, 28), dtype=torch.uint8, generator=generator)
    targets = torch.randint(0, 10, (_COUNT,), dtype=torch.int64, generator=generator)
    return data, targets


mnist.MNIST.download = lambda self: None
mnist.MNIST._check_exists = lambda self: True
mnist.MNIST._load_data = _load_data
