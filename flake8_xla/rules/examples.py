"""Import headers the rule examples share (the examples are the rules' tests and their pages)."""
EXAMPLE_FSDP = "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
EXAMPLE_FSDPV2 = ("from torch_xla.experimental.spmd_fully_sharded_data_parallel import (\n"
                  "    SpmdFullyShardedDataParallel as FSDPv2,\n)\n")
EXAMPLE_XM = "import torch_xla.core.xla_model as xm\n"
EXAMPLE_XR = "import torch_xla.runtime as xr\n"
EXAMPLE_SPMD = "import torch_xla.distributed.spmd as xs\n" + EXAMPLE_XR
EXAMPLE_CHECKPOINT = EXAMPLE_XR + "import xla_compat\n" + EXAMPLE_FSDP  # XLA205-XLA207
EXAMPLE_MANAGER = "from torch_xla.experimental.distributed_checkpoint import CheckpointManager\n"
