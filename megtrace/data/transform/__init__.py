"""megengine.data.transform."""
from .meta_transform import PseudoTransform, Transform

__all__ = ["PseudoTransform", "Transform"]
