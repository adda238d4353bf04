"""MegEngine's module path `megengine.module.qat.quant_dequant` (the classes are in qat/layers.py)."""
from .layers import DequantStub, QuantStub

__all__ = ["QuantStub", "DequantStub"]
