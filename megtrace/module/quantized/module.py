"""`QuantizedModule`: the inference-only module `quantize` converts a QAT module into,
holding integer weights and the quantized dtypes of its results (MegEngine's
megengine.module.quantized).

megtrace's tensors have no quantized dtypes yet, so a converted module cannot run: calling
one raises `NotImplementedError` (nothing is traced or dumped with wrong dtypes). The
conversion itself is MegEngine's: weights rounded to their int8 grid, folded BN, the
output dtype of every layer, all readable from the converted modules."""
from __future__ import annotations

from abc import abstractmethod

import numpy as np

from ...core.tensor.dtype import get_scale, is_quantize
from ...ops.rounding import round_half_away
from ...tensor import Parameter
from ..module import Module

NOT_RUNNABLE = ("megtrace cannot run quantized (converted) modules yet: its tensors have no "
                "quantized dtypes (qint8/quint8/qint32). Run the QAT model (before "
                "`quantize`) instead; it computes the same fake-quantized values in float32.")


def quantized_weight(weight, dtype: np.dtype, name: str = "") -> Parameter:
    """`weight` (float) on the integer grid of quantized `dtype` (C rounding, saturated),
    as MegEngine's astype to that dtype stores it."""
    if not is_quantize(dtype):
        raise ValueError(f"weight dtype must be a quantized dtype; got {dtype!r}")
    meta = dtype.metadata["mgb_dtype"]
    info = np.iinfo(np.dtype(dtype.str))
    values = round_half_away(np.asarray(weight, np.float32) / np.float32(get_scale(dtype)))
    values = values + meta.get("zero_point", 0)
    param = Parameter(np.clip(values, info.min, info.max).astype(dtype.str))
    param.name = name
    return param


class QuantizedModule(Module):
    """Base class of converted modules: inference only, built by `from_qat_module`."""

    def __call__(self, *inputs, **kwargs):
        if self.training:
            raise ValueError("quantized module only support inference.")
        return super().__call__(*inputs, **kwargs)

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(NOT_RUNNABLE)

    def __repr__(self):
        return "Quantized." + super().__repr__()

    @classmethod
    @abstractmethod
    def from_qat_module(cls, qat_module):
        """The converted module of `qat_module`."""
