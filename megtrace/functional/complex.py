"""Complex tensors (MegEngine 1.13's `F.polar`, `F.complex`, `F.real`, `F.imag`):
complex64, eager only (a trace refuses complex values; see megtrace/ops/complex.py)."""
from __future__ import annotations

from ..dispatch import apply
from ..tensor import Tensor
from ._convert import cast, require_tensor
from .elemwise import cos, mul, sin

__all__ = ["polar", "complex", "real", "imag"]


def _float32(name: str, x) -> Tensor:
    return cast(require_tensor(name, x if isinstance(x, Tensor) else Tensor(x)), "float32")


def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A001  (MegEngine's name)
    """`real + imag * 1j` as complex64."""
    return apply("create_complex", _float32("complex", real), _float32("complex", imag))


def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002  (MegEngine's names)
    """The complex number with modulus `abs` and argument `angle`:
    `abs * cos(angle) + abs * sin(angle) * 1j`."""
    r, a = _float32("polar", abs), _float32("polar", angle)
    return apply("create_complex", mul(r, cos(a)), mul(r, sin(a)))


def real(complex: Tensor) -> Tensor:  # noqa: A002
    """The real part (float32) of a complex64 tensor."""
    return apply("get_real", require_tensor("real", complex))


def imag(complex: Tensor) -> Tensor:  # noqa: A002
    """The imaginary part (float32) of a complex64 tensor."""
    return apply("get_imag", require_tensor("imag", complex))
