"""Runtime tests run on the real torch_xla, on the CPU. They never skip: a missing torch_xla fails."""
import os

os.environ.setdefault("PJRT_DEVICE", "CPU")
