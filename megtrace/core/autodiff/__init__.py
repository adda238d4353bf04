"""megengine.core.autodiff: the Grad engine under GradManager."""
