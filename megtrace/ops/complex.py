"""Complex numbers (MegEngine's CreateComplex, GetReal, GetImag): complex64 values made
from and taken apart into float32 ones, for `F.polar`, `F.complex`, `F.real`, `F.imag`.

Eager only: TVM has no complex dtype and no MegEngine opr writes these to a file, so a
trace refuses complex values (megtrace/jit/recorder.py) with a clear error.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ir import TensorType
from .registry import OpDef, register


def _create_infer(re, im):
    if re.dtype != "float32" or im.dtype != "float32":
        raise DTypeError(f"create_complex: real and imaginary parts must be float32; got "
                         f"{re.dtype} and {im.dtype}")
    if re.shape != im.shape:
        raise ShapeError(f"create_complex: real and imaginary parts must have one shape; "
                         f"got {re} and {im}")
    return TensorType(re.shape, "complex64")


def _part_infer(name):
    def infer(z):
        if z.dtype != "complex64":
            raise DTypeError(f"{name}: the input must be complex64; got {z.dtype}")
        return TensorType(z.shape, "float32")
    return infer


def _create_vjp(V, inputs, outputs, grads):
    """z = x + iy is real-linear in (x, y): dx = Re(dz), dy = Im(dz)."""
    (g,) = grads
    return V.apply("get_real", g), V.apply("get_imag", g)


def _real_vjp(V, inputs, outputs, grads):
    (g,) = grads
    return (V.apply("create_complex", g, V.zeros_like(g)),)


def _imag_vjp(V, inputs, outputs, grads):
    (g,) = grads
    return (V.apply("create_complex", V.zeros_like(g), g),)


register(OpDef(
    "create_complex", infer=_create_infer,
    eager=lambda re, im: (re.astype(np.complex64) + 1j * im.astype(np.complex64))
    .astype(np.complex64),
    vjp=_create_vjp))
register(OpDef("get_real", infer=_part_infer("get_real"),
               eager=lambda z: np.ascontiguousarray(z.real, np.float32), vjp=_real_vjp))
register(OpDef("get_imag", infer=_part_infer("get_imag"),
               eager=lambda z: np.ascontiguousarray(z.imag, np.float32), vjp=_imag_vjp))
