"""MegEngine's module path `megengine.quantization.internal_fake_quant`: it defines nothing of
its own in 1.13; code star-imports it for the names it gathers (F, Function, the observer,
QConfig, QParams), which megtrace keeps in these modules."""
from functools import partial  # noqa: F401

from .. import functional as F  # noqa: F401
from ..autodiff import Function  # noqa: F401
from .fake_quant import _FakeQuantize  # noqa: F401
from .observer import MinMaxObserver  # noqa: F401
from .qconfig import QConfig  # noqa: F401
from .utils import QParams  # noqa: F401
