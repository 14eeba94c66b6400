"""The rule data: the API lifecycle and TorchTPU migration tables, the TorchTPU API lists and the
ast-grep rules. They are kept in the checkout's top-level ``rules/``; the wheel ships them as
``flake8_xla/rule_data/`` (setup.py copies them there), so an installed copy and a checkout (or an
editable install) each find theirs beside the package.

``read_data`` reads one file, from a marshal copy when it can."""
from __future__ import annotations

import os
import sys
from typing import List

from flake8_xla import stash

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_SHIPPED = os.path.join(_PACKAGE, "rule_data")
DATA_DIR = _SHIPPED if os.path.isdir(_SHIPPED) else os.path.join(os.path.dirname(_PACKAGE), "rules")


def data_path(name: str) -> str:
    return os.path.join(DATA_DIR, name)


def data_names(suffix: str) -> List[str]:
    """The names of the data files ending in ``suffix``, sorted."""
    return sorted(name for name in os.listdir(DATA_DIR) if name.endswith(suffix))


def read_data(path: str) -> object:
    """A YAML (or JSON) rule data file as Python data. A marshal copy named by a hash of the text spares
    the YAML parser (and importing it) on later runs, the way .pyc files spare the compiler: kept in
    ``__pycache__`` beside the file, or in the user's cache where that cannot be written. A copy is
    used only when its checksum holds and it was made from this very text (see flake8_xla.stash)."""
    with open(path, "rb") as handle:
        raw = handle.read()
    folder, name = os.path.split(path)
    stem = f"{name}.{sys.implementation.cache_tag}."
    copy_name = f"{stem}{stash.digest(raw + _COPY_FORMAT, 12)}.marshal"
    # in the user's cache, named by the install too, so two installs do not prune each other's copies
    here = stash.digest(os.path.realpath(folder).encode("utf-8", "surrogateescape"), 6)
    copies = [(os.path.join(folder, "__pycache__", copy_name), stem),
              (os.path.join(stash.user_stash_dir(), f"{here}-{copy_name}"), f"{here}-{stem}")]
    return stash.load_or_parse(copies, lambda: _parse_yaml(raw.decode("utf-8")))[0]


_COPY_FORMAT = b"\0marshal copy 2"  # part of a copy's name: a new layout never reads an old one


def _parse_yaml(text: str) -> object:
    import yaml  # only when no marshal copy can be used

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 10x faster
