"""`QuantStub`/`DequantStub`: mark where quantization starts and ends; identity in a
float model (megtrace does not quantize)."""
from __future__ import annotations

from .module import Module


class QuantStub(Module):
    def forward(self, inp):
        return inp


class DequantStub(Module):
    def forward(self, inp):
        return inp
