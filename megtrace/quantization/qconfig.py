"""`QConfig`: which observer and fake quantizer a QAT module builds for its weight and
its activation, and MegEngine's preset configurations."""
from __future__ import annotations

from collections import namedtuple
from functools import partial

from ..module import Module
from .fake_quant import TQT, FakeQuantize
from .observer import (ExponentialMovingAverageObserver, HistogramObserver, MinMaxObserver,
                       PassiveObserver, SyncExponentialMovingAverageObserver,
                       SyncMinMaxObserver)


class QConfig(namedtuple("QConfig", ["weight_observer", "act_observer", "weight_fake_quant",
                                     "act_fake_quant"])):
    """Four factories (classes or `functools.partial`s, not instances) of observers and
    fake quantizers; None leaves that part out. Weights usually use the narrow range
    (qint8_narrow: -127..127) so that sums of products cannot overflow."""

    def __new__(cls, weight_observer, act_observer, weight_fake_quant, act_fake_quant):
        if isinstance(act_observer, Module) or isinstance(weight_observer, Module):
            raise ValueError(
                "QConfig must not receive observer instance, please pass observer"
                " class generator using `partial(Observer, ...)` instead. Use"
                " partial(MyObserver, x=1) to override arguments to constructor if needed")
        return super().__new__(cls, weight_observer, act_observer, weight_fake_quant,
                               act_fake_quant)


def _preset(weight_observer, act_observer, fake_quant=FakeQuantize, weight_dtype="qint8_narrow",
            act_dtype="qint8"):
    def make(factory, dtype):
        return None if factory is None else partial(factory, dtype=dtype)
    return QConfig(weight_observer=make(weight_observer, weight_dtype),
                   act_observer=make(act_observer, act_dtype),
                   weight_fake_quant=make(fake_quant, weight_dtype),
                   act_fake_quant=make(fake_quant, act_dtype))


min_max_fakequant_qconfig = _preset(MinMaxObserver, MinMaxObserver)
ema_fakequant_qconfig = _preset(MinMaxObserver, ExponentialMovingAverageObserver)
sync_ema_fakequant_qconfig = _preset(SyncMinMaxObserver, SyncExponentialMovingAverageObserver)
ema_lowbit_fakequant_qconfig = _preset(MinMaxObserver, ExponentialMovingAverageObserver,
                                       weight_dtype="qint4", act_dtype="qint4")
calibration_qconfig = _preset(MinMaxObserver, HistogramObserver, fake_quant=None)
tqt_qconfig = _preset(None, None, fake_quant=TQT)
passive_qconfig = _preset(PassiveObserver, PassiveObserver)
easyquant_qconfig = passive_qconfig
