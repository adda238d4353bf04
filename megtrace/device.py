"""MegEngine device strings ("xpux", "cpu0", "gpu0:1", ...) and the default device.

"xpu" means "whatever is best here": the CPU on this machine unless a GPU target is asked
for. A device picks the TVM target of a trace that was given no `target=`.
"""
from __future__ import annotations

import re

_PATTERN = re.compile(r"^(xpu|cpu|gpu|multithread)(x|\d+)?(:\d+)?$")
_default = "xpux"


def check(device: str | None) -> str:
    """Validate a device string; None means the default device."""
    if device is None:
        return _default
    device = str(device)
    if not _PATTERN.match(device):
        raise ValueError(f"invalid device {device!r}; expected MegEngine's form such as "
                         "'xpux', 'cpu0', 'gpu0' or 'cpu0:1'")
    return device


def set_default_device(device: str = "xpux") -> None:
    """Like megengine.set_default_device: tensors created later live on `device`."""
    global _default
    _default = check(device)


def get_default_device() -> str:
    return _default


def target_for(device: str) -> str | None:
    """The relay_bridge target for a device: "cuda-sm80" for GPUs, None (host) otherwise."""
    return "cuda-sm80" if check(device).startswith("gpu") else None
