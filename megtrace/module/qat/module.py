"""`QATModule`: a float module that fake-quantizes its weight and activation with the
observers and fake quantizers of a QConfig (MegEngine's megengine.module.qat)."""
from __future__ import annotations

from abc import abstractmethod

from ...quantization.qconfig import QConfig
from ...quantization.utils import fake_quant_bias
from ...tensor import Tensor
from ..module import Module


class QATModule(Module):
    """Base class of QAT modules; `from_float_module` builds one from a float module
    (`quantize_qat` does it for a whole network)."""

    with_weight = True
    with_act = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.weight_observer = None
        self.act_observer = None
        self.weight_fake_quant = None
        self.act_fake_quant = None

    def __repr__(self):
        return "QAT." + super().__repr__()

    def set_qconfig(self, qconfig: QConfig):
        """Build the observers and fake quantizers of `qconfig`."""
        def make(factory):
            return factory() if factory is not None else None
        if self.with_act:
            self.act_observer = make(qconfig.act_observer)
            self.act_fake_quant = make(qconfig.act_fake_quant)
        if self.with_weight:
            self.weight_observer = make(qconfig.weight_observer)
            self.weight_fake_quant = make(qconfig.weight_fake_quant)

    @staticmethod
    def _enable_exec(with_module, func, enable):
        if not with_module or not func:
            return
        if enable:
            func.enable()
        else:
            func.disable()

    def set_fake_quant(self, enable):
        self._enable_exec(self.with_act, self.act_fake_quant, enable)
        self._enable_exec(self.with_weight, self.weight_fake_quant, enable)

    def set_observer(self, enable):
        self._enable_exec(self.with_act, self.act_observer, enable)
        self._enable_exec(self.with_weight, self.weight_observer, enable)

    def _apply_fakequant_with_observer(self, target: Tensor, fake_quant, observer):
        if observer is None:
            oup, qparams = target, None
        else:
            oup = observer(target)
            qparams = observer.get_qparams()
        if fake_quant is not None:
            oup = fake_quant(oup, qparams)
            if hasattr(fake_quant, "get_qparams"):
                qparams = fake_quant.get_qparams()
        if qparams is not None:
            oup.qparams.update(qparams)
        return oup

    def apply_quant_weight(self, target: Tensor):
        """Observe and fake-quantize a weight."""
        return self._apply_fakequant_with_observer(target, self.weight_fake_quant,
                                                   self.weight_observer)

    def apply_quant_activation(self, target: Tensor):
        """Observe and fake-quantize an activation."""
        return self._apply_fakequant_with_observer(target, self.act_fake_quant,
                                                   self.act_observer)

    def apply_quant_bias(self, target: Tensor, inp: Tensor, w_qat: Tensor):
        """Fake-quantize a bias to qint32 when both fake quantizers are enabled."""
        if self.act_fake_quant and self.act_fake_quant.enabled and \
                self.weight_fake_quant and self.weight_fake_quant.enabled:
            return fake_quant_bias(target, inp, w_qat)
        return target

    @staticmethod
    def _get_method_result(method: str, fake_quant, observer):
        if hasattr(fake_quant, method):
            return getattr(fake_quant, method)()
        if hasattr(observer, method):
            return getattr(observer, method)()
        return None

    def get_weight_dtype(self):
        return self._get_method_result("get_quantized_dtype", self.weight_fake_quant,
                                       self.weight_observer)

    def get_activation_dtype(self):
        return self._get_method_result("get_quantized_dtype", self.act_fake_quant,
                                       self.act_observer)

    def get_weight_qparams(self):
        return self._get_method_result("get_qparams", self.weight_fake_quant,
                                       self.weight_observer)

    def get_activation_qparams(self):
        return self._get_method_result("get_qparams", self.act_fake_quant, self.act_observer)

    @classmethod
    @abstractmethod
    def from_float_module(cls, float_module: Module):
        """A QAT module converted from `float_module` (sharing its parameters)."""
