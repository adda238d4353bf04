"""MegEngine's module path `megengine.module.quantized.quant_dequant` (the classes are in quantized/layers.py)."""
from .layers import DequantStub, QuantStub

__all__ = ["QuantStub", "DequantStub"]
