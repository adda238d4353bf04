"""MegEngine device strings ("xpux", "cpu0", "gpu0:1", ...), the default device, and
`CompNode`: what `Tensor.device` returns.

"xpu" means "whatever is best here": the CPU on this machine unless a GPU target is asked
for. A device picks the TVM target of a trace that was given no `target=`.
"""
from __future__ import annotations

import os
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


def target_for(device) -> str | None:
    """The relay_bridge target for a device: "cuda-sm80" for GPUs, None (host) otherwise."""
    return "cuda-sm80" if check(device).startswith("gpu") else None


# --- Facts about this machine's devices (megengine.device's single-process answers) ---------
# megtrace computes on the CPU with NumPy and runs traces wherever TVM can: CUDA devices are
# those TVM's runtime sees. There is no caching allocator, so the memory statistics are 0.

_DEVICE_TYPES = {"cpu", "gpu", "xpu", "rocm"}


def _cuda_count() -> int:
    import tvm  # lazily: `import megtrace` stays light
    if not tvm.runtime.enabled("cuda"):
        return 0
    count = 0
    while tvm.cuda(count).exist:
        count += 1
    return count


def get_device_count(device_type: str) -> int:
    """Number of devices of `device_type` ('cpu', 'gpu', 'xpu' or 'rocm') on this system."""
    assert device_type in _DEVICE_TYPES, "device must be one of {}".format(_DEVICE_TYPES)
    if device_type == "cpu":
        return os.cpu_count() or 1
    if device_type == "rocm":
        return 0
    gpus = _cuda_count()
    return gpus if device_type == "gpu" or gpus else os.cpu_count() or 1


def is_cuda_available() -> bool:
    """Whether a CUDA device is available to megtrace (through TVM's CUDA runtime)."""
    return _cuda_count() > 0


def is_cambricon_available() -> bool:
    return False


def is_atlas_available() -> bool:
    return False


def is_rocm_available() -> bool:
    return False


def what_is_xpu() -> str:
    """The device type "xpu" stands for: megtrace's eager tensors always live on the CPU."""
    return "cpu"


def _check_gpu(device: int) -> int:
    count = _cuda_count()
    if not 0 <= device < count:
        raise RuntimeError(f"request gpu {device} out of valid range [0, {count})")
    return device


def get_cuda_compute_capability(device: int, device_type=None) -> int:
    """SM version of CUDA device `device`, e.g. 80 for compute capability 8.0."""
    import tvm
    major, minor = tvm.cuda(_check_gpu(device)).compute_version.split(".")
    return int(major) * 10 + int(minor)


class DeviceProperties:
    """What MegEngine's get_cuda_device_property reports: name, total_memory, major, minor."""

    def __init__(self, name: str, total_memory: int, major: int, minor: int):
        self.name, self.total_memory, self.major, self.minor = name, total_memory, major, minor

    def __repr__(self) -> str:
        return (f"_DeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB)")


def get_cuda_device_property(device: int, device_type=None) -> DeviceProperties:
    import tvm
    dev = tvm.cuda(_check_gpu(device))
    major, minor = dev.compute_version.split(".")
    return DeviceProperties(dev.device_name, int(dev.total_global_memory), int(major),
                            int(minor))


def get_mem_status_bytes(device: str | None = None) -> tuple[int, int]:
    """(total, free) memory in bytes of `device` (default: the default device)."""
    device = check(device)
    if device.startswith("gpu"):
        import tvm
        index = int(re.match(r"gpu(\d*)", device).group(1) or 0)
        dev = tvm.cuda(_check_gpu(index))
        return int(dev.total_global_memory), int(dev.available_global_memory)
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_PHYS_PAGES") * page, os.sysconf("SC_AVPHYS_PAGES") * page


def get_allocated_memory(device: str | None = None) -> int:
    check(device)
    return 0


def get_reserved_memory(device: str | None = None) -> int:
    check(device)
    return 0


def get_max_reserved_memory(device: str | None = None) -> int:
    check(device)
    return 0


def get_max_allocated_memory(device: str | None = None) -> int:
    check(device)
    return 0


def reset_max_memory_stats(device: str | None = None) -> None:
    check(device)


def set_prealloc_config(alignment: int = 1, min_req: int = 32 * 1024 * 1024,
                        max_overhead: int = 0, growth_factor=2.0, device_type=None) -> None:
    """MegEngine's CUDA allocator tuning: checked like MegEngine, nothing to tune here."""
    assert alignment > 0
    assert min_req > 0
    assert max_overhead >= 0
    assert growth_factor >= 1


def coalesce_free_memory() -> None:
    """Nothing to coalesce: NumPy returns freed memory itself."""


def get_cuda_version() -> int:
    """CUDA version megtrace itself was built with: 0 (it ships no CUDA build of its own)."""
    return 0


def get_cudnn_version() -> int:
    return 0


def get_tensorrt_version() -> int:
    return 0


def get_cuda_driver_version() -> int:
    """Newest CUDA version the installed driver supports (0 without a driver)."""
    if not is_cuda_available():
        return 0
    import tvm
    version = tvm.get_global_func("runtime.GetCudaDriverVersion", allow_missing=True)
    return int(version()) if version is not None else 0
