"""megengine.core.autodiff.grad: `Grad` and `Function`, where MegEngine defines them."""
from ...autodiff.function import Function
from ...autodiff.grad import Grad

__all__ = ["Function", "Grad"]
