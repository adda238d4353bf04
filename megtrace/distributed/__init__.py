"""megtrace.distributed: MegEngine's distributed API answered for a single process
(rank 0 of a world of 1; see group.py)."""
from . import group
from .group import (WORLD, Group, get_backend, get_client, get_mm_server_addr,
                    get_py_server_addr, get_rank, get_world_size, group_barrier,
                    init_process_group, is_distributed, new_group, override_backend)
from . import helper
from .helper import synchronized

__all__ = ["WORLD", "Group", "get_backend", "get_client", "get_mm_server_addr",
           "get_py_server_addr", "get_rank", "get_world_size", "group", "group_barrier",
           "init_process_group", "is_distributed", "new_group", "override_backend",
           "synchronized", "helper"]
