"""`Concat`: `F.concat` as a module, so that quantization can convert it."""
from __future__ import annotations

from typing import Iterable

from .. import functional as F
from ..tensor import Tensor
from .module import Module


class Concat(Module):
    def forward(self, inps: Iterable[Tensor], axis: int = 0):
        return F.concat(inps, axis)
