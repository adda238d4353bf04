"""MegEngine device strings ("xpux", "cpu0", "gpu0:1", ...), the default device, and
`CompNode`: what `Tensor.device` returns.

"xpu" means "whatever is best here": the CPU on this machine unless a GPU target is asked
for. A device picks the TVM target of a trace that was given no `target=`.
"""
from __future__ import annotations

import re

_PATTERN = re.compile(r"^(xpu|cpu|gpu|multithread)(x|\d+)?(:\d+)?$")
_default = "xpux"


def _valid(device: str) -> bool:
    return bool(_PATTERN.match(device))


def check(device) -> str:
    """Validate a device (string or CompNode); None means the default device."""
    if device is None:
        return _default
    if isinstance(device, CompNode):
        return device.logical_name
    device = str(device)
    if not _valid(device):
        raise ValueError(f"invalid device name {device}. For the correct format of the device "
                         "name, please refer to the instruction of "
                         "megengine.device.set_default_device()")
    return device


class CompNode(str):
    """A device as MegEngine's `CompNode`: prints as its logical name ("cpu0:0",
    "xpux:0"), has `logical_name`, `physical_name` and `physical_locator`, and equals
    another device or device string naming the same logical device ("cpu0" == "cpu0:0").
    It is a str so that code treating devices as names keeps working."""

    def __new__(cls, name="xpux"):
        logical = _logical(check(name))
        self = super().__new__(cls, logical)
        return self

    @property
    def logical_name(self) -> str:
        return str.__str__(self)

    @property
    def physical_locator(self) -> list:
        kind, number, stream = _parts(self.logical_name)
        if kind == "multithread":   # MegEngine: multithread<threads>:<id>
            return ["multithread", stream, number]
        kind = "cpu" if kind == "xpu" else kind
        return [kind, 0 if number == "x" else int(number), stream]

    @property
    def physical_name(self) -> str:
        kind, number, stream = _parts(self.logical_name)
        if kind == "multithread":
            return self.logical_name
        kind = "cpu" if kind == "xpu" else kind
        return f"{kind}{0 if number == 'x' else number}:{stream}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                return self.logical_name == _logical(check(other))
            except ValueError:
                return False
        return False

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return f'CompNode("{self.physical_name}" from "{self.logical_name}")'

    def __reduce__(self):
        return CompNode, (self.logical_name,)


def _parts(logical: str) -> tuple[str, str, int]:
    m = _PATTERN.match(logical)
    return m.group(1), m.group(2) or "x", int((m.group(3) or ":0")[1:])


def _logical(device: str) -> str:
    kind, number, stream = _parts(device)
    return f"{kind}{number}:{stream}"


_NODES: dict[str, CompNode] = {}


def as_device(device) -> CompNode:
    """The CompNode for a device string (None: the default device); cached."""
    key = _default if device is None else device
    node = _NODES.get(key) if isinstance(key, str) and type(key) is str else None
    if node is None:
        node = key if isinstance(key, CompNode) else CompNode(key)
        if type(key) is str:
            _NODES[key] = node
    return node


def set_default_device(device: str = "xpux") -> None:
    """Like megengine.set_default_device: tensors created later live on `device`."""
    global _default
    _default = check(device)


def get_default_device() -> str:
    return _default


def is_cuda_available() -> bool:
    """Whether a CUDA device is there to run compiled graphs on (MegEngine's
    megengine.is_cuda_available); asks TVM's runtime, so it loads TVM."""
    try:
        from relay_bridge._tvm import tvm
        return bool(tvm().cuda(0).exist)
    except Exception:       # no TVM CUDA runtime at all
        return False


def target_for(device) -> str | None:
    """The relay_bridge target for a device: "cuda-sm80" for GPUs, None (host) otherwise."""
    return "cuda-sm80" if check(device).startswith("gpu") else None
