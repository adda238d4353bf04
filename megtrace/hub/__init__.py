"""megtrace.hub: MegEngine's model hub (see hub.py)."""
from .hub import help, import_module, list, load, load_serialized_obj_from_url, pretrained

__all__ = ["help", "import_module", "list", "load", "load_serialized_obj_from_url",
           "pretrained"]
