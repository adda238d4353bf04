"""`megengine.core._config` is where MegEngine keeps its settings and `megengine.config`
re-exports them: code that sets `_config.__compute_mode` (MegEngine/Models' CLIP, around
float16 layers) changes `config._compute_mode`, and the other way round, as in real
MegEngine 1.13 (checked there: setting either name shows through the other)."""
import importlib

import megtrace
import megtrace.functional as F
from megtrace.core import _config


def test_core_config_is_megtrace_config_and_shares_compute_mode():
    assert importlib.import_module("megtrace.core._config") is megtrace.config
    try:
        setattr(_config, "__compute_mode", "float32")
        assert megtrace.config._compute_mode == "float32"
        megtrace.config._compute_mode = "default"
        assert getattr(_config, "__compute_mode") == "default"
        with megtrace.config._override(compute_mode="float32"):
            assert getattr(_config, "__compute_mode") == "float32"
        assert megtrace.config._compute_mode == "default"
    finally:
        megtrace.config._compute_mode = "default"


def test_module_level_compute_mode_reaches_convolutions():
    """A global compute mode other than "default" is checked by conv2d like its argument:
    an unknown one is refused (MegEngine: the config value replaces the argument)."""
    x = megtrace.tensor([[[[1.0]]]])
    try:
        setattr(_config, "__compute_mode", "no-such-mode")
        try:
            F.conv2d(x, x)
        except ValueError as e:
            assert "no-such-mode" in str(e) or "compute_mode" in str(e)
        else:
            raise AssertionError("conv2d accepted an unknown global compute mode")
    finally:
        setattr(_config, "__compute_mode", "default")
    assert F.conv2d(x, x).numpy().item() == 1.0
