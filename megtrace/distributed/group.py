"""Process groups, answered for the one process megtrace runs in.

megtrace has no collective-communication backend, so no process group is ever initialised:
get_rank() is 0, get_world_size() is 1, is_distributed() is False, barriers return at once,
and the getters MegEngine guards with "please call init_process_group first" fail the same
way. init_process_group validates its arguments like MegEngine 1.13, then says why it cannot
go on."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, List, Optional, Tuple

from ..device import what_is_xpu

_NOT_INITIALISED = "please call init_process_group first"
_devices = {"gpu", "cuda", "rocm"}
_backends = {"nccl", "rccl", "auto"}


class Group:
    """Ranked processes taking part in a collective; WORLD (all processes) by default.

    Args:
        proc_ranks: ranks of the group, the first one is the root.
    """

    def __init__(self, proc_ranks: List[int]):
        self.proc_ranks = None
        self.stream = None
        if len(proc_ranks):
            self.reset(proc_ranks)

    def reset(self, proc_ranks: List[int]) -> None:
        self.check(proc_ranks)

    def check(self, proc_ranks: List[int]) -> None:
        raise AssertionError(_NOT_INITIALISED)

    @property
    def size(self) -> int:
        assert self.proc_ranks, "invalid group"
        return len(self.proc_ranks)

    @property
    def key(self) -> str:
        assert self.proc_ranks, "invalid group"
        return ",".join(map(str, self.proc_ranks))

    @property
    def rank(self) -> int:
        assert self.proc_ranks, "invalid group"
        return 0


WORLD = Group([])


def init_process_group(master_ip: str, port: int, world_size: int, rank: int, device: int,
                       backend: Optional[str] = "auto", device_type: str = "xpu") -> None:
    """MegEngine's multi-process setup. megtrace runs in a single process without NCCL/RCCL,
    so after MegEngine's argument checks this raises NotImplementedError."""
    for value, kind in ((master_ip, str), (port, int), (world_size, int), (rank, int),
                        (device, int)):
        if not isinstance(value, kind):
            raise TypeError("Expect type {} but got {}".format(kind.__name__, type(value)))
    if backend not in _backends:
        raise ValueError("backend should be one of {} but got {}".format(_backends, backend))
    physical_device_type = what_is_xpu() if device_type == "xpu" else device_type
    if physical_device_type not in _devices:
        raise ValueError("{} is not a valid distributed device type".format(device_type))
    raise NotImplementedError(
        "megtrace runs in a single process: it has no collective-communication backend "
        "(nccl/rccl), so init_process_group cannot join a process group")


def _uninitialised():
    raise AssertionError(_NOT_INITIALISED)


def is_distributed() -> bool:
    """Whether a process group has been initialised: never, in megtrace."""
    return False


def get_rank() -> int:
    """Rank of this process: 0."""
    return 0


def get_world_size() -> int:
    """Number of processes in the job: 1."""
    return 1


def get_backend() -> str:
    _uninitialised()


def get_py_server_addr() -> Tuple[str, int]:
    _uninitialised()


def get_mm_server_addr() -> Tuple[str, int]:
    _uninitialised()


def get_client():
    _uninitialised()


def new_group(proc_ranks: List[int]) -> Group:
    """A subgroup of ranks (only the empty group exists without init_process_group)."""
    return Group(proc_ranks)


def group_barrier(group: Group = WORLD) -> None:
    """Wait for every rank of `group`: returns at once in a single process."""
    assert isinstance(group, Group)


@contextmanager
def override_backend(new_backend: str) -> Iterator[None]:
    _uninitialised()
    yield
