"""MegEngine's `megengine.core` names that user code imports (its internals are not
part of megtrace)."""
