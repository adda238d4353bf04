"""MegEngine's module path `megengine.module.deformable_psroi_pooling` (the class is in image_layers.py)."""
from .image_layers import DeformablePSROIPooling

__all__ = ["DeformablePSROIPooling"]
