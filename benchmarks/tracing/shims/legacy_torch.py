"""torch APIs that scripts written for torch 2.1-2.5 call and that torch 2.9 removed, restored with the value
they had:

- the ``verbose=`` argument of the ``torch.optim.lr_scheduler`` classes (deprecated in 2.2, removed):
  ``verbose=False``, the old default, printed nothing, so it is accepted and dropped. ``verbose=True``
  printed the learning rate on every ``step()``; it is refused rather than silently changed.
"""
import functools
import inspect

import torch.optim.lr_scheduler as schedulers


def _accept_verbose(cls):
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, verbose=False, **kwargs):
        if verbose not in (False, "deprecated"):
            raise NotImplementedError(f"legacy_torch: {cls.__name__}(verbose={verbose!r}) is not restored")
        init(self, *args, **kwargs)

    cls.__init__ = __init__


for _name, _cls in list(vars(schedulers).items()):
    if (inspect.isclass(_cls) and (issubclass(_cls, schedulers.LRScheduler) or _cls is schedulers.ReduceLROnPlateau)
            and "__init__" in vars(_cls) and "verbose" not in inspect.signature(_cls.__init__).parameters):
        _accept_verbose(_cls)
