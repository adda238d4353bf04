"""megtrace's version (MegEngine keeps its own in megengine.version too)."""
__version__ = "0.1.0"
