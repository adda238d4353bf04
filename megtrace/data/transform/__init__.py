"""megengine.data.transform: Transform bases and the vision transforms."""
from .meta_transform import PseudoTransform, Transform
from .vision import *  # noqa: F401,F403 - MegEngine exports the vision transforms here
from .vision import __all__ as _vision_all
# MegEngine's star import also leaves these submodules here (T.functional, T.transform)
from .vision import functional, transform  # noqa: F401

__all__ = ["PseudoTransform", "Transform", *_vision_all]
