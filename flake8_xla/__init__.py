"""flake8-xla: find deprecated/removed torch_xla APIs, FSDP misuse and graph breaks."""
import os as _os

__version__ = "0.1.0"

# The wheel installs the top-level rules/ directory as flake8_xla/rules. In a source checkout
# whose root is on sys.path (python -m flake8 run from the repo), let flake8_xla.rules resolve
# to ../rules as well.
_package_dir = _os.path.dirname(__file__)
_checkout_root = _os.path.dirname(_package_dir)
if not _os.path.isdir(_os.path.join(_package_dir, "rules")) and _os.path.isfile(
        _os.path.join(_checkout_root, "rules", "api_lifecycle.yaml")):
    __path__.append(_checkout_root)  # type: ignore[name-defined]
