"""timm APIs that timm 0.6-0.9 renamed or removed, restored with their old behaviour, for code written
against timm 0.4/0.5 (model files copied from those releases, scripts that build models from timm's
parts). None of them changes what a model computes; each only lets the old call build the same model:

- ``build_model_with_cfg(cls, variant, pretrained, default_cfg=..., pretrained_custom_load=...)``:
  ``default_cfg`` is now ``pretrained_cfg``, and ``pretrained_custom_load`` (a flag for loading ``.npz``
  weights, never read with ``pretrained=False``) is gone; the old call raised
  ``TypeError: unexpected keyword argument 'default_cfg'`` in the model's constructor.
- ``timm.models.vision_transformer.Block(..., drop=p)``: the argument is now ``proj_drop``.
- ``timm.models.vision_transformer._init_vit_weights(module, name, head_bias, jax_impl)``: now
  ``init_weights_vit_timm`` / ``init_weights_vit_jax``; the old one set a ``head*`` Linear to zeros
  (bias ``head_bias``) and a LayerNorm/GroupNorm/BatchNorm2d to ones/zeros, and left other modules
  (a Block, a PatchEmbed: it was not applied recursively) as they were."""
import functools

import timm.models
import timm.models._builder as _builder
import timm.models.vision_transformer as _vit
from torch import nn

_build = _builder.build_model_with_cfg


@functools.wraps(_build)
def build_model_with_cfg(model_cls, variant, pretrained, *args, **kwargs):
    if "default_cfg" in kwargs:
        kwargs.setdefault("pretrained_cfg", kwargs.pop("default_cfg"))
    kwargs.pop("pretrained_custom_load", None)
    return _build(model_cls, variant, pretrained, *args, **kwargs)


for _module in (_builder, timm.models):
    _module.build_model_with_cfg = build_model_with_cfg
try:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import timm.models.helpers as _helpers
    _helpers.build_model_with_cfg = build_model_with_cfg
except ImportError:
    pass


class Block(_vit.Block):
    """timm's ViT block, also accepting the old name ``drop`` of ``proj_drop``."""

    def __init__(self, *args, drop=None, **kwargs):
        if drop is not None:
            kwargs.setdefault("proj_drop", drop)
        super().__init__(*args, **kwargs)


if "drop" not in _vit.Block.__init__.__code__.co_varnames:
    _vit.Block = Block


def _init_vit_weights(module, name="", head_bias=0.0, jax_impl=False):
    if isinstance(module, nn.Linear) and name.startswith("head"):
        nn.init.zeros_(module.weight)
        nn.init.constant_(module.bias, head_bias)
    elif isinstance(module, nn.Linear):
        (_vit.init_weights_vit_jax if jax_impl else _vit.init_weights_vit_timm)(module, name)
    elif jax_impl and isinstance(module, nn.Conv2d):
        _vit.init_weights_vit_jax(module, name)
    elif isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm2d)):
        nn.init.zeros_(module.bias)
        nn.init.ones_(module.weight)


if not hasattr(_vit, "_init_vit_weights"):
    _vit._init_vit_weights = _init_vit_weights
