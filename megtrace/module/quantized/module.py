"""`QuantizedModule`: the inference-only module `quantize` converts a QAT module into,
holding quantized weights (qint8 Parameters) and the quantized dtypes of its results
(MegEngine's megengine.module.quantized). It runs eagerly with MegEngine's integer
arithmetic (megtrace/ops/quantized_eager.py); megtrace cannot trace or dump quantized
dtypes yet."""
from __future__ import annotations

from abc import abstractmethod

import numpy as np

from ...core.tensor.dtype import is_quantize
from ...ops import quantized_eager
from ...tensor import Parameter
from ..module import Module


def quantized_weight(weight, dtype: np.dtype, name: str = "") -> Parameter:
    """`weight` (float) converted to quantized `dtype` as MegEngine's
    `weight.astype(dtype)` does (round half away, saturate), as a Parameter."""
    if not is_quantize(dtype):
        raise ValueError(f"weight dtype must be a quantized dtype; got {dtype!r}")
    param = Parameter(quantized_eager.quantize(np.asarray(weight, np.float32), dtype))
    param.name = name
    return param


class QuantizedModule(Module):
    """Base class of converted modules: inference only, built by `from_qat_module`."""

    def __call__(self, *inputs, **kwargs):
        if self.training:
            raise ValueError("quantized module only support inference.")
        return super().__call__(*inputs, **kwargs)

    def __repr__(self):
        return "Quantized." + super().__repr__()

    @classmethod
    @abstractmethod
    def from_qat_module(cls, qat_module):
        """The converted module of `qat_module`."""
