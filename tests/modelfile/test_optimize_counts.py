"""Every optimize_for_inference option writes real MegEngine 1.13's oprs, opr for opr: the
same count of each signature (type, format, compute mode, data type, nonlinearity, output
dtype) as MegEngine's own dump of the same model with the same option
(tests/data/megengine_optimize_options.json). Among what this pins: BatchNorm folded into
every kind of convolution, constant biases redistributed as MegEngine's
ParamRedistributePass does (a ResNet downsample or a MobileNetV2 projection convolution
without a bias of its own), blocked layouts' relayouts with run-time shapes."""
import pytest

from .mge_summary import counts, golden_counts
from .optimize_models import GOLDEN, MODELS, dumped

CASES = [(name, option) for name in MODELS for option, entry in GOLDEN[name].items()
         if "error" not in entry and option != "enable_hwcd4"]


@pytest.mark.parametrize("name,option", CASES, ids=[f"{n}-{o}" for n, o in CASES])
def test_dump_has_megengines_oprs(name, option):
    ours, real = counts(dumped(name, option)), golden_counts(GOLDEN[name][option])
    assert ours == real
