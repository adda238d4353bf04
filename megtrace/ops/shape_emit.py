"""Writer helpers for shape arithmetic computed in the .mge file, as MegEngine's traced
dumps compute it (GetVarShape -> Subtensor -> Elemwise -> Concat, Linspace for aranges
of a run-time length), so that a composite writer's index grids and output shapes
follow the input's batch size instead of being baked at the traced one.

Every helper takes the writer's emitter `em` and value ids and returns a value id.
"""
from __future__ import annotations

import numpy as np

from .registry import MgeOpr
from .shape import BROADCAST, CONCAT, GET_VAR_SHAPE, SUBTENSOR, TYPE_CVT, emit_reshape

ELEMWISE = MgeOpr("Elemwise", "Elemwise")
LINSPACE = MgeOpr("Linspace", "Linspace")


def ints(em, *values: int) -> int:
    return em.const(np.array(values, np.int32))


def shape_of(em, x: int) -> int:
    return em.opr(GET_VAR_SHAPE, {}, [x])


def shape_slice(em, shape: int, begin: int | None = None, end: int | None = None) -> int:
    """shape[begin:end] (a 1-element slice for one dim: MegEngine has no 0-d values)."""
    item = {"axis": 0, "begin": begin is not None, "end": end is not None, "step": False,
            "idx": False}
    bounds = [ints(em, v) for v in (begin, end) if v is not None]
    return em.opr(SUBTENSOR, {"items": [item]}, [shape, *bounds])


def dim(em, shape: int, axis: int) -> int:
    return shape_slice(em, shape, axis, axis + 1)


def elemwise(em, mode: str, a: int, b: int) -> int:
    return em.opr(ELEMWISE, {"mode": mode}, [a, b])


def concat(em, parts: list[int]) -> int:
    return parts[0] if len(parts) == 1 else em.opr(CONCAT, {"axis": 0}, parts)


def arange(em, n: int) -> int:
    """float32 [0, 1, ..., n - 1] for a run-time length `n` (int32[1]): MegEngine's
    linspace(0, n - 1, n)."""
    return em.opr(LINSPACE, {"endpoint": True},
                  [em.const(np.zeros((1,), np.float32)),
                   elemwise(em, "SUB", n, ints(em, 1)), n])


def axis_grid(em, shape: int, ndim: int, axis: int) -> int:
    """The flat int32 position along `axis` of every element of a tensor of run-time
    `shape` (rank `ndim`), in C order: arange(shape[axis]) broadcast over the shape."""
    column = emit_reshape(em, arange(em, dim(em, shape, axis)),
                          (1,) * axis + (-1,) + (1,) * (ndim - axis - 1))
    spread = em.opr(BROADCAST, {}, [column, shape])
    return em.opr(TYPE_CVT, TYPE_CVT.fields({"dtype": "int32"}), [emit_reshape(em, spread, (-1,))])
