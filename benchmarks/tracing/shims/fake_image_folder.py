"""``torchvision.datasets.ImageFolder`` (and ``DatasetFolder``) replaced by a folder of small random RGB
images, so a script written for an ImageNet-style directory runs without one: the harness has no dataset.

Each sample is a PIL image (``FAKE_IMAGE_SIZE`` pixels square, default 64) with a label in
``range(FAKE_IMAGE_CLASSES)`` (default 10); ``FAKE_IMAGE_COUNT`` samples (default 64) per folder. The
script's own ``transform`` and ``target_transform`` are applied as ImageFolder applies them, so the
transforms (crops to the script's size, augmentations, ``ToTensor``, normalisation) and everything after
them run unchanged. Samples are a function of their index, so every epoch and every worker sees the same
data. The root path is not read."""
import os

import numpy as np
import torchvision.datasets
from PIL import Image
from torch.utils.data import Dataset

_SIZE = int(os.environ.get("FAKE_IMAGE_SIZE", "64"))
_CLASSES = int(os.environ.get("FAKE_IMAGE_CLASSES", "10"))
_COUNT = int(os.environ.get("FAKE_IMAGE_COUNT", "64"))


class FakeImageFolder(Dataset):
    def __init__(self, root, transform=None, target_transform=None, loader=None, is_valid_file=None,
                 **kwargs):
        self.root = root
        self.transform = transform
        self.target_transform = target_transform
        self.classes = [f"class{i:04d}" for i in range(_CLASSES)]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = [(os.path.join(str(root), self.classes[i % _CLASSES], f"{i:06d}.JPEG"), i % _CLASSES)
                        for i in range(_COUNT)]
        self.imgs = self.samples
        self.targets = [t for _, t in self.samples]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        rng = np.random.default_rng(index)
        image = Image.fromarray(rng.integers(0, 256, (_SIZE, _SIZE, 3), dtype=np.uint8), "RGB")
        target = self.targets[index]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


torchvision.datasets.ImageFolder = FakeImageFolder
torchvision.datasets.DatasetFolder = FakeImageFolder
torchvision.datasets.folder.ImageFolder = FakeImageFolder
