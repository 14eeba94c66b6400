"""Keeps ``PJRT_DEVICE`` at the value the harness starts the script with (CPU) when a script written for a TPU
VM assigns it itself (``os.environ["PJRT_DEVICE"] = "TPU"`` at import, as optimum-tpu's examples do): that
assignment would make torch_xla look for a TPU that is not there. Only that one assignment is ignored
(with a line on stderr); every other environment variable is set as usual, and the script runs on the
device the harness chose, as every other entry does.
"""
import os
import sys

_PINNED = os.environ.get("PJRT_DEVICE")
_setitem = os._Environ.__setitem__


def _pinned_setitem(self, key, value):
    if self is os.environ and key == "PJRT_DEVICE" and _PINNED and value != _PINNED:
        print(f"pin_pjrt_device: kept PJRT_DEVICE={_PINNED} (the script set {value})", file=sys.stderr)
        return
    _setitem(self, key, value)


if _PINNED:
    os._Environ.__setitem__ = _pinned_setitem
