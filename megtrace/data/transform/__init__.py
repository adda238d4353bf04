"""megengine.data.transform: Transform bases and the vision transforms."""
from .meta_transform import PseudoTransform, Transform
from .vision import *  # noqa: F401,F403 - MegEngine exports the vision transforms here
from .vision import __all__ as _vision_all

__all__ = ["PseudoTransform", "Transform", *_vision_all]
