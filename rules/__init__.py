"""flake8-xla's rules: one module per code, plus the declarative rule data (YAML) beside them."""
from .xla101_removed_api import RemovedApi
from .xla102_deprecated_api import DeprecatedApi
from .xla103_planned_api_removal import PlannedApiRemoval
from .xla104_moved_module import MovedModule
from .xla105_changed_argument import ChangedArgument
from .xla106_deprecated_env_var import DeprecatedEnvVar
from .xla201_optimizer_before_fsdp_wrap import OptimizerBeforeFsdpWrap

RULES = (
    RemovedApi, DeprecatedApi, PlannedApiRemoval, MovedModule, ChangedArgument, DeprecatedEnvVar,
    OptimizerBeforeFsdpWrap,
)
