"""MegEngine's quantization API: observers, fake quantizers and QConfigs for
quantization-aware training, and the float -> QAT -> quantized conversions.

QAT runs eagerly and traced (fake quantization is float math); converted (quantized)
modules run eagerly on quantized dtypes (megtrace/ops/quantized_eager.py)."""
from .fake_quant import LSQ, TQT, FakeQuantize
from .observer import (ExponentialMovingAverageObserver, HistogramObserver, MinMaxObserver,
                       Observer, PassiveObserver, SyncExponentialMovingAverageObserver,
                       SyncMinMaxObserver)
from .qconfig import (QConfig, calibration_qconfig, easyquant_qconfig, ema_fakequant_qconfig,
                      ema_lowbit_fakequant_qconfig, min_max_fakequant_qconfig, passive_qconfig,
                      sync_ema_fakequant_qconfig, tqt_qconfig)
from .quantize import (apply_easy_quant, disable_fake_quant, disable_observer,
                       enable_fake_quant, enable_observer, propagate_qconfig, quantize,
                       quantize_qat, reset_qconfig)
from .utils import QParams, QuantMode, create_qparams, fake_quant_bias, fake_quant_tensor

__all__ = ["ExponentialMovingAverageObserver", "FakeQuantize", "HistogramObserver", "LSQ",
           "MinMaxObserver", "Observer", "PassiveObserver", "QConfig", "QParams", "QuantMode",
           "SyncExponentialMovingAverageObserver", "SyncMinMaxObserver", "TQT",
           "apply_easy_quant", "calibration_qconfig", "create_qparams", "disable_fake_quant",
           "disable_observer", "easyquant_qconfig", "ema_fakequant_qconfig",
           "ema_lowbit_fakequant_qconfig", "enable_fake_quant", "enable_observer",
           "fake_quant_bias", "fake_quant_tensor", "min_max_fakequant_qconfig",
           "passive_qconfig", "propagate_qconfig", "quantize", "quantize_qat",
           "reset_qconfig", "sync_ema_fakequant_qconfig", "tqt_qconfig"]
