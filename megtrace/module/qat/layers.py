"""QAT versions of the weightless modules and of Linear: Elemwise, Concat, QuantStub,
DequantStub, Linear, LinearRelu."""
from __future__ import annotations

from typing import Iterable

from ... import functional as F
from ...tensor import Tensor
from .. import concat as FloatConcat
from .. import elemwise as FloatElemwise
from .. import layers as FloatLayers
from .. import quant_dequant as FloatStub
from .module import QATModule


class Elemwise(FloatElemwise.Elemwise, QATModule):
    """Elemwise whose result is fake-quantized."""

    with_weight = False

    def forward(self, *inps):
        return self.apply_quant_activation(super().forward(*inps))

    @classmethod
    def from_float_module(cls, float_module):
        return cls(float_module.method, name=float_module.name)


class Concat(FloatConcat.Concat, QATModule):
    """Concat whose result is fake-quantized. Like MegEngine's, it keeps the (unused)
    weight observer and fake quantizer, so QAT state dicts have the same keys."""

    def forward(self, inps: Iterable[Tensor], axis: int = 0):
        return self.apply_quant_activation(super().forward(inps, axis))

    @classmethod
    def from_float_module(cls, float_module):
        return cls(name=float_module.name)


class QuantStub(FloatStub.QuantStub, QATModule):
    """Fake-quantizes its input (a real quantization once converted)."""

    with_weight = False

    def forward(self, inp):
        return self.apply_quant_activation(inp)

    @classmethod
    def from_float_module(cls, float_module):
        return cls(name=float_module.name)


class DequantStub(FloatStub.DequantStub, QATModule):
    """Returns its input (a dequantization once converted)."""

    with_weight = False
    with_act = False

    def forward(self, inp):
        return inp

    @classmethod
    def from_float_module(cls, float_module):
        return cls(name=float_module.name)


class Linear(FloatLayers.Linear, QATModule):
    """Linear with fake-quantized weight, bias (qint32) and result."""

    def calc_linear_qat(self, inp):
        w_qat = self.apply_quant_weight(self.weight)
        b_qat = self.apply_quant_bias(self.bias, inp, w_qat)
        return self.calc_linear(inp, w_qat, b_qat)

    def forward(self, inp):
        return self.apply_quant_activation(self.calc_linear_qat(inp))

    @classmethod
    def from_float_module(cls, float_module):
        qmod = cls(float_module.in_features, float_module.out_features,
                   name=float_module.name)
        qmod.weight = float_module.weight
        qmod.bias = float_module.bias
        return qmod


class LinearRelu(Linear):
    def forward(self, inp):
        return self.apply_quant_activation(F.relu(self.calc_linear_qat(inp)))
