"""MegEngine's dump-time compatibility rewrites (`no_change_graph=False`, the default).

Elemwise modes added after the FBS_V2 baseline (SQRT, SQUARE, RELU6, HSIGMOID, SOFTPLUS,
LOGSIGMOID, PRELU, CLIP, ...) are written as chains of older modes, so that older
runtimes load the file, as MegEngine 1.13 does -- except CLIP, which 1.13 lowers with the
lower bound twice (a bug); here it is MIN(MAX(x, lo), hi).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from megtrace.ops import MgeOpr

ELEMWISE = MgeOpr("Elemwise", "Elemwise")


class CompatEmitter:
    """Wraps an Emitter: Elemwise oprs with a new mode are expanded on the way in."""

    def __init__(self, em):
        self.em = em

    def __getattr__(self, name):
        return getattr(self.em, name)

    def opr(self, spec, fields, inputs, name="", output_dtype=None):
        mode = fields.get("mode") if spec.type == "Elemwise" else None
        if mode in CONVERTERS:
            self.em.requested_modes.add(mode)
            return CONVERTERS[mode](_Builder(self.em, inputs), *inputs)
        return self.em.opr(spec, fields, inputs, name, output_dtype)

    def opr_all(self, spec, fields, inputs, name=""):
        if spec.type == "Elemwise" and fields.get("mode") in CONVERTERS:
            return [self.opr(spec, fields, inputs, name)]
        return self.em.opr_all(spec, fields, inputs, name)


class _Builder:
    """Tiny helper to spell Elemwise chains: b("ADD", x, b.c(3))."""

    def __init__(self, em, inputs):
        self.em = em
        self.dtype = em.dtype_of(inputs[0])

    def __call__(self, mode: str, *inputs: int) -> int:
        return self.em.opr(ELEMWISE, {"mode": mode}, list(inputs))

    def c(self, value: float) -> int:
        return self.em.const(np.array([value], self.dtype))


def _softplus(b, x):
    return b("ADD", b("LOG1P", b("EXP", b("NEGATE", b("ABS", x)))), b("RELU", x))


CONVERTERS: dict[str, Callable[..., int]] = {
    "SQRT": lambda b, x: b("POW", x, b.c(0.5)),
    "SQUARE": lambda b, x: b("POW", x, b.c(2.0)),
    "RELU6": lambda b, x: b("MIN_", b("MAX_", x, b.c(0.0)), b.c(6.0)),
    "HSIGMOID": lambda b, x: b("TRUE_DIV", b("MIN_", b("MAX_", b("ADD", x, b.c(3.0)),
                                                       b.c(0.0)), b.c(6.0)), b.c(6.0)),
    "SOFTPLUS": _softplus,
    "LOGSIGMOID": lambda b, x: b("NEGATE", _softplus(b, b("NEGATE", x))),
    "PRELU": lambda b, x, slope: b("FUSE_MUL_ADD3", b("MIN_", x, b.c(0.0)), slope,
                                   b("MAX_", x, b.c(0.0))),
    "CLIP": lambda b, x, lo, hi: b("MIN_", b("MAX_", x, lo), hi),
}
