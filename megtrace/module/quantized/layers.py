"""Converted weightless modules and Linear layers: QuantStub, DequantStub, Elemwise,
Concat, Linear, LinearRelu, LinearBn1d, LinearBnRelu1d."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ... import functional as F
from ...core.tensor import dtype as qdtype
from ...functional.elemwise import _elemwise_multi_type
from ...tensor import Parameter, Tensor
from .module import QuantizedModule, quantized_weight


class QuantStub(QuantizedModule):
    """Converts its input to the quantized dtype `output_dtype`."""

    def __init__(self, dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.output_dtype = dtype

    def forward(self, inp):
        return inp.astype(self.output_dtype)

    @classmethod
    def from_qat_module(cls, qat_module):
        return cls(qat_module.get_activation_dtype(), name=qat_module.name)


class DequantStub(QuantizedModule):
    """Converts a quantized input back to float32."""

    def forward(self, inp):
        return inp.astype("float32")

    @classmethod
    def from_qat_module(cls, qat_module):
        return cls(name=qat_module.name)


class Elemwise(QuantizedModule):
    """A quantized Elemwise mode ("q" + the float mode)."""

    def __init__(self, method, dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.method = "q" + method
        self.output_dtype = dtype

    def forward(self, *inps):
        if self.training:
            raise ValueError("quantized module only support inference.")
        return _elemwise_multi_type(*inps, mode=self.method, dtype=self.output_dtype)

    @classmethod
    def from_qat_module(cls, qat_module):
        return cls(qat_module.method, qat_module.get_activation_dtype(), name=qat_module.name)


class Concat(QuantizedModule):
    """Requantizes every input to `output_dtype`, then concatenates."""

    def __init__(self, dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.output_dtype = dtype

    def forward(self, inps: Iterable[Tensor], axis: int = 0):
        return F.concat(tuple(x.astype(self.output_dtype) for x in inps), axis)

    @classmethod
    def from_qat_module(cls, qat_module):
        return cls(qat_module.get_activation_dtype(), name=qat_module.name)


class Linear(QuantizedModule):
    """int8 weight, float bias (qint32 at run time), result in `output_dtype`."""

    def __init__(self, dtype: np.dtype = None, **kwargs):
        super().__init__(**kwargs)
        self.weight = None
        self.bias = None
        self.output_dtype = dtype
        self.weight_dtype = None

    def calc_linear_quantized(self, inp, nonlinear_mode="identity"):
        """int8 x int8 -> qint32 (+ the bias as qint32), converted to `output_dtype`."""
        if self.training:
            raise ValueError("quantized module only support inference.")
        assert nonlinear_mode in ["identity", "relu"]
        bias_dtype = qdtype.qint32(qdtype.get_scale(inp.dtype) *
                                   qdtype.get_scale(self.weight.dtype))
        ret = F.linear(inp, self.weight,
                       None if self.bias is None else self.bias.astype(bias_dtype))
        ret = ret if self.output_dtype is None else ret.astype(self.output_dtype)
        return F.relu(ret) if nonlinear_mode == "relu" else ret

    def forward(self, inp):
        return self.calc_linear_quantized(inp)

    @classmethod
    def from_qat_module(cls, qat_module):
        qmod = cls(dtype=qat_module.get_activation_dtype(), name=qat_module.name)
        qmod.weight_dtype = qat_module.get_weight_dtype()
        qmod.weight = quantized_weight(qat_module.weight.numpy(), qmod.weight_dtype,
                                       qat_module.weight.name)
        if qat_module.bias is not None:
            qmod.bias = Parameter(qat_module.bias.numpy())
            qmod.bias.name = qat_module.bias.name
        return qmod


class LinearRelu(Linear):
    def forward(self, inp):
        return self.calc_linear_quantized(inp, nonlinear_mode="relu")


class _LinearBnActivation1d(Linear):
    @classmethod
    def from_qat_module(cls, qat_module):
        qlinear = cls(dtype=qat_module.get_activation_dtype(), name=qat_module.name)
        w_fold, b_fold = qat_module.fold_weight_bias(qat_module.bn.running_mean,
                                                     qat_module.bn.running_var)
        qlinear.weight_dtype = qat_module.get_weight_dtype()
        qlinear.weight = quantized_weight(w_fold.numpy(), qlinear.weight_dtype,
                                          qat_module.linear.weight.name)
        qlinear.bias = Parameter(b_fold.numpy())
        if qat_module.linear.bias is not None:
            qlinear.bias.name = qat_module.linear.bias.name
        return qlinear


class LinearBn1d(_LinearBnActivation1d):
    pass


class LinearBnRelu1d(_LinearBnActivation1d):
    def forward(self, inp):
        return self.calc_linear_quantized(inp, nonlinear_mode="relu")
