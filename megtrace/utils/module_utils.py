"""Reading and replacing a module's attributes by dotted key ("a.1.x", "seq.0.bn"),
as MegEngine's `megengine.utils.module_utils` does."""
from __future__ import annotations

import contextlib
from typing import Any

from ..module import Sequential
from ..module.module import Module, _access_structure
from ..tensor import Tensor


def get_expand_structure(obj: Module, key: str) -> Any:
    """The object at dotted `key` inside `obj` (attributes, list indices, dict keys)."""
    return _access_structure(obj, key, lambda parent, k, cur: cur)


def set_expand_structure(obj: Module, key: str, value: Any) -> None:
    """Replace the object at dotted `key` inside `obj` by `value`."""
    def put(parent, k, cur):
        if isinstance(parent, (Tensor, Module)):
            if isinstance(cur, Sequential):
                parent[int(k)] = value
            else:
                setattr(parent, k, value)
        else:
            parent[k] = value
    _access_structure(obj, key, put)


@contextlib.contextmanager
def set_module_mode_safe(module: Module, training: bool = False):
    """Run with every submodule in `training` mode, restoring each one's mode after."""
    saved = {m: m.training for m in module.modules()}
    for m in saved:
        m.train(training, recursive=False)
    try:
        yield module
    finally:
        for m, mode in saved.items():
            m.training = mode
