"""MegEngine's quantization namespace. Only the parameter container that every Tensor
carries (`Tensor.qparams`, part of MegEngine's tensor pickle format) exists here:
quantized dtypes, observers and fake-quant are not implemented."""
from .utils import QParams, QuantMode, create_qparams

__all__ = ["QParams", "QuantMode", "create_qparams"]
