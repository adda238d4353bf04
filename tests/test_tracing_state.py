"""MegEngine's `jit.tracing.is_tracing` and `functional.debug_param`: what they report as a
traced function records, replays and excludes code, and how strategies are parsed
(checked against real MegEngine 1.13's behaviour and wording)."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace import config
from megtrace.functional.debug_param import (Strategy, get_execution_strategy,
                                             set_execution_strategy)
from megtrace.jit import exclude_from_trace, trace
from megtrace.jit.tracing import is_tracing


@pytest.mark.parametrize("symbolic", [False, True])
def test_is_tracing_inside_recorded_and_replayed_calls_only(symbolic):
    seen = []

    @trace(symbolic=symbolic)
    def f(x):
        seen.append(is_tracing())
        with exclude_from_trace():
            seen.append(is_tracing())
        return x * 2

    assert not is_tracing()
    for _ in range(3):
        np.testing.assert_array_equal(f(mge.tensor([1.0, 2.0])).numpy(), [2.0, 4.0])
    assert seen == [True, False] * 3
    assert not is_tracing()


def test_execution_strategy_strings_and_flags():
    saved = config.benchmark_kernel, config.deterministic_kernel
    try:
        assert get_execution_strategy() == Strategy.HEURISTIC
        set_execution_strategy("PROFILE_REPRODUCIBLE")
        assert (config.benchmark_kernel, config.deterministic_kernel) == (True, True)
        assert get_execution_strategy() == Strategy.PROFILE | Strategy.REPRODUCIBLE
        set_execution_strategy(Strategy.HEURISTIC)
        assert (config.benchmark_kernel, config.deterministic_kernel) == (False, False)
        with pytest.raises(ValueError, match="Valid option can only be one of"):
            set_execution_strategy("FAST")
        assert F.debug_param.get_execution_strategy is get_execution_strategy
    finally:
        config.benchmark_kernel, config.deterministic_kernel = saved


def test_megengines_subpackages_are_attributes_of_the_package():
    """`import megengine as mge; mge.amp.autocast()` (MegEngine imports amp, traced_module
    and cgtools with the package; megtrace on first use)."""
    import megtrace.module as M
    assert mge.amp.autocast is __import__("megtrace.amp", fromlist=["autocast"]).autocast
    assert callable(mge.traced_module.trace_module)
    assert mge.cgtools.GraphInference is not None
    assert M.linear.Linear is M.Linear and M.qat.linear.Linear is M.qat.Linear
    assert M.quantized.conv_bn.ConvBn2d is M.quantized.ConvBn2d
    assert F.tensor.concat is F.concat and F.elemwise.clip is F.clip
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        mge.no_such_name
