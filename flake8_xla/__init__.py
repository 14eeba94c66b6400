"""flake8-xla: find deprecated/removed torch_xla APIs, FSDP misuse and graph breaks."""

__version__ = "0.1.0"
