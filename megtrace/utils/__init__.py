"""`megtrace.utils`: MegEngine's user-facing helpers under `megengine.utils`."""
