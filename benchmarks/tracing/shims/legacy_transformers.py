"""transformers APIs that scripts written for transformers 3.x-4.x import and that transformers 5 removed,
restored with the behaviour they had:

- ``transformers.AdamW`` (deprecated in 4.x, removed): Adam with decoupled weight decay. With its
  ``correct_bias=True`` (the default, bias-corrected moments) it is ``torch.optim.AdamW``, which its
  deprecation message pointed to; its defaults are kept (``eps=1e-6``, ``weight_decay=0.0``, where
  ``torch.optim.AdamW`` has 1e-8 and 0.01). ``correct_bias=False`` (BERT's original, uncorrected moments)
  has no torch equivalent and is refused rather than silently changed.
"""
import sys

import torch
import transformers.optimization  # first: importing it can replace sys.modules["transformers"] (the lazy module)

transformers = sys.modules["transformers"]

if not hasattr(transformers, "AdamW"):

    class AdamW(torch.optim.AdamW):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True,
                     no_deprecation_warning=False):
            if not correct_bias:
                raise NotImplementedError("legacy_transformers: AdamW(correct_bias=False) is not restored")
            super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    transformers.AdamW = AdamW
    transformers.optimization.AdamW = AdamW
