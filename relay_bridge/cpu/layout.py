"""The blocked activation layout (NCHW16c) and the weight layouts the CPU rules read.

A blocked tensor is (N, ceil(C/16), H, W, 16): sixteen channels sit next to each other so
that one AVX-512 register holds one pixel's channel block. Channels past C are padding and
are always zero (every producer writes zeros there), so a consumer may read them freely:
the zero-padded weights of the next conv make them contribute nothing.

Weights are packed once, at build time, with NumPy (or by a small TIR function when the
weight is a runtime input): conv OIHW -> OIHW{icb}i16o, depthwise -> (C/16, KH, KW, 16),
dense -> (N/nr, K, nr).
"""
from __future__ import annotations

import numpy as np

BLOCK = 16          # channels per block: one zmm register of float32


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def blocks(c: int) -> int:
    """Number of 16-channel blocks that hold `c` channels."""
    return ceil_div(c, BLOCK)


def input_block(c: int, blocked: bool) -> int:
    """Channels per reduction block of a conv input.

    A blocked input has reduce_block(c): 16, or fewer when c is not a multiple of 16.
    A plain NCHW input is packed inside the conv; when it has fewer than 16 channels (an
    RGB image) the whole channel axis is one block, which avoids multiplying by 13 zero
    channels out of 16.
    """
    if blocked:
        return reduce_block(c)
    if c >= BLOCK:
        return BLOCK
    return c


def reduce_block(c: int) -> int:
    """Channels per reduction step over a blocked input of `c` channels: 16, or, when c
    is not a multiple of 16, gcd(c, 16) if that is at least 4, so that a 1x1 conv never
    multiplies the zero padding (MobileNetV2's 24-channel layers: 24 steps, not 32).
    Step j of reduction block b reads block b // (16 / icb), lane (b % (16 / icb)) *
    icb + j; the weight is packed with pack_conv_weight(w, icb)."""
    if c % BLOCK == 0:
        return BLOCK
    part = int(np.gcd(c, BLOCK))
    return part if part >= 4 else BLOCK


def pack_conv_weight(w: np.ndarray, icb: int) -> np.ndarray:
    """(OC, IC, KH, KW) -> (OC/16, IC/icb, KH, KW, icb, 16), zero-padded."""
    oc, ic, kh, kw = w.shape
    ocp, icp = blocks(oc) * BLOCK, ceil_div(ic, icb) * icb
    padded = np.zeros((ocp, icp, kh, kw), np.float32)
    padded[:oc, :ic] = w
    packed = padded.reshape(ocp // BLOCK, BLOCK, icp // icb, icb, kh, kw)
    return np.ascontiguousarray(packed.transpose(0, 2, 4, 5, 3, 1))


def pack_depthwise_weight(w: np.ndarray) -> np.ndarray:
    """(C, 1, 1, KH, KW) -> (C/16, KH, KW, 16), zero-padded."""
    c, kh, kw = w.shape[0], w.shape[-2], w.shape[-1]
    padded = np.zeros((blocks(c) * BLOCK, kh, kw), np.float32)
    padded[:c] = w.reshape(c, kh, kw)
    return np.ascontiguousarray(padded.reshape(-1, BLOCK, kh, kw).transpose(0, 2, 3, 1))


def pack_dense_weight(w: np.ndarray, transpose_b: bool, nr: int) -> np.ndarray:
    """B of `A @ B` ((K, N), or (N, K) when `transpose_b`) -> (N/nr, K, nr), zero-padded."""
    b = w if not transpose_b else w.T              # (K, N)
    k, n = b.shape
    padded = np.zeros((k, ceil_div(n, nr) * nr), np.float32)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, -1, nr).transpose(1, 0, 2))


def pack_channel_vector(v: np.ndarray) -> np.ndarray:
    """A per-channel vector (C,) -> (C/16, 16), zero-padded."""
    c = v.shape[0]
    out = np.zeros(blocks(c) * BLOCK, np.float32)
    out[:c] = v
    return out.reshape(-1, BLOCK)


def pack_activation(x: np.ndarray) -> np.ndarray:
    """NCHW -> NCHW16c in NumPy (tests and benchmarks)."""
    n, c, h, w = x.shape
    out = np.zeros((n, blocks(c) * BLOCK, h, w), x.dtype)
    out[:, :c] = x
    return np.ascontiguousarray(out.reshape(n, -1, BLOCK, h, w).transpose(0, 1, 3, 4, 2))


# -- the same transforms as TE computes, for values only known at run time -------------
# These functions are fused by Relax with legalized ops, whose shapes are int64, so
# their shapes are int64 too (FuseTIR rejects a buffer seen with two shape dtypes).
def i64(shape) -> tuple:
    """`shape` as int64 TIR constants."""
    from .._tvm import tvm
    return tuple(tvm().tirx.IntImm("int64", int(d)) for d in shape)


def te_pack(x, c: int):
    """NCHW te.Tensor -> NCHW16c te.Tensor (padded channels are zero)."""
    from .._tvm import tvm
    te, tirx = tvm().te, tvm().tirx
    n, _, h, w = (int(d) for d in x.shape)
    zero = tirx.const(0.0, x.dtype)

    def f(i, cb, y, z, ci):
        ch = cb * BLOCK + ci
        if c % BLOCK == 0:
            return x[i, ch, y, z]
        return te.if_then_else(ch < c, x[i, tirx.min(ch, c - 1), y, z], zero)
    return te.compute(i64((n, blocks(c), h, w, BLOCK)), f, name="pack_nchw16c")


def te_unpack(x, c: int):
    """NCHW16c te.Tensor -> NCHW te.Tensor with `c` channels."""
    from .._tvm import tvm
    te = tvm().te
    n, _, h, w, _ = (int(d) for d in x.shape)
    return te.compute(i64((n, c, h, w)), lambda i, ch, y, z: x[i, ch // BLOCK, y, z, ch % BLOCK],
                      name="unpack_nchw16c")


def te_pack_conv_weight(w, icb: int):
    """te version of `pack_conv_weight`, for weights that are graph inputs."""
    from .._tvm import tvm
    te, tirx = tvm().te, tvm().tirx
    oc, ic, kh, kw = (int(d) for d in w.shape)
    zero = tirx.const(0.0, w.dtype)

    def f(o, i, y, x, ii, oi):
        och, ich = o * BLOCK + oi, i * icb + ii
        ok = tirx.all(och < oc, ich < ic)
        return te.if_then_else(ok, w[tirx.min(och, oc - 1), tirx.min(ich, ic - 1), y, x], zero)
    return te.compute(i64((blocks(oc), ceil_div(ic, icb), kh, kw, icb, BLOCK)), f,
                      name="pack_oihw")


def te_pack_depthwise_weight(w):
    """te version of `pack_depthwise_weight` ((C, 1, 1, KH, KW) input)."""
    from .._tvm import tvm
    te, tirx = tvm().te, tvm().tirx
    c, kh, kw = int(w.shape[0]), int(w.shape[-2]), int(w.shape[-1])
    zero = tirx.const(0.0, w.dtype)

    def f(cb, y, x, ci):
        ch = cb * BLOCK + ci
        return te.if_then_else(ch < c, w[tirx.min(ch, c - 1), 0, 0, y, x], zero)
    return te.compute(i64((blocks(c), kh, kw, BLOCK)), f, name="pack_dw")
