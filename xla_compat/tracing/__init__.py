"""The run-time trace behind ``python -m xla_compat.trace`` and ``xla_compat.trace()``: which
source line made each host sync, recompile and CPU fallback of a torch_xla program."""
