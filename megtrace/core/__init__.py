"""MegEngine's `megengine.core` names that user code imports (its internals are not
part of megtrace). `megtrace.core._config` is `megtrace.config`: MegEngine keeps its
settings in `megengine.core._config` and re-exports them as `megengine.config`."""
import sys

from .. import config as _config

sys.modules[f"{__name__}._config"] = _config
