"""Convolution family beyond conv2d: 3-D, transposed (2-D/3-D), locally connected and
deformable convolution, with MegEngine's weight layouts.

Weights: conv3d (OC, IC, kd, kh, kw) or grouped (G, OC/G, IC/G, kd, kh, kw); transposed
(IC, OC, *k) or grouped (G, IC/G, OC/G, *k); local_conv2d (G, OH, OW, IC/G, kh, kw, OC/G);
deformable_conv2d like conv2d. The eager kernels loop over kernel offsets and contract
channels with one matrix product per offset (no im2col copy of the whole input).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..errors import ShapeError
from ..ir import TensorType
from ._rules import same_dtype
from . import shape_emit
from ._sampling_grad import sample_grads, sample_values
from .registry import MgeChoice, MgeComposite, MgeOpr, OpDef, register
from .shape import BROADCAST


def _work_dtype(dtype) -> np.dtype:
    """Accumulate in float32 at least (MegEngine's float16 kernels do too)."""
    return np.promote_types(dtype, np.float32)


def _check_params(op: str, stride, padding, dilation) -> None:
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or min(padding) < 0:
        raise ValueError(f"{op}: stride/dilation must be positive and padding >= 0; got "
                         f"stride={stride}, padding={padding}, dilation={dilation}")


def _grouped(op: str, w: TensorType, nd: int) -> tuple[int, tuple[int, ...]]:
    """(groups, per-group weight shape (A, B, *k)) of a dense (nd+2)-d or grouped weight."""
    if w.ndim == nd + 2:
        return 1, w.shape
    if w.ndim == nd + 3:
        return w.shape[0], w.shape[1:]
    raise ShapeError(f"{op}: weight must be {nd + 2}-d or {nd + 3}-d (grouped); got {w}")


def _out_len(op: str, size: int, k: int, s: int, p: int, d: int) -> int:
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if out <= 0:
        raise ShapeError(f"{op}: kernel {k} (dilation {d}) does not fit input length {size} "
                         f"with padding {p}")
    return out


# -- forward convolution, any rank ------------------------------------------------------
def conv_nd_eager(x: np.ndarray, wg: np.ndarray, stride, padding, dilation) -> np.ndarray:
    """x (N, G*ICg, *S), wg (G, OCg, ICg, *K) -> (N, G*OCg, *O), cross-correlation."""
    nd = x.ndim - 2
    g, ocg, icg, kernel = wg.shape[0], wg.shape[1], wg.shape[2], wg.shape[3:]
    work = _work_dtype(x.dtype)
    xp = np.pad(x.astype(work, copy=False), ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    xp = xp.reshape((x.shape[0], g, icg) + xp.shape[2:])
    out_sp = tuple((xp.shape[3 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                   for i in range(nd))
    out = np.zeros((x.shape[0], g, ocg) + out_sp, work)
    w = wg.astype(work, copy=False)
    for offs in itertools.product(*(range(k) for k in kernel)):
        window = (slice(None),) * 3 + tuple(
            slice(o * d, o * d + s * (n - 1) + 1, s)
            for o, d, s, n in zip(offs, dilation, stride, out_sp))
        patch = xp[window]                                   # (N, G, ICg, *O)
        for gi in range(g):
            out[:, gi] += np.moveaxis(
                np.tensordot(w[(gi, slice(None), slice(None)) + offs], patch[:, gi],
                             axes=([1], [1])), 0, 1)
    return out.reshape((x.shape[0], g * ocg) + out_sp).astype(x.dtype)


# -- gradients of convolution (MegEngine: ConvolutionBackwardData / BackwardFilter) ------
# Both are convolutions themselves, so backward passes compile like forward ones: the input
# gradient is the transposed convolution with the same weight, the weight gradient a
# convolution of the input by the output gradient (batch as channels, stride and dilation
# swapping roles).
def _spatial_index(nd: int, sizes) -> tuple:
    return tuple((2 + i, 0, k, None, None) for i, k in enumerate(sizes))


def conv_input_grad(V, g, w, x_shape, nd: int, stride, padding, dilation):
    """d<g, conv(x, w)>/dx: conv_transpose of g with w (its layout fits as it is), as
    MegEngine's ConvolutionBackwardData; the build runs it through the CPU convolution
    rules as a sub-pixel convolution (relay_bridge/cpu/transposed_conv.py)."""
    kernel = tuple(w.shape[-nd:])
    extra = tuple((x_shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1)
                  % stride[i] for i in range(nd))
    return V.apply(f"conv_transpose{nd}d", g, w, stride=tuple(stride), padding=tuple(padding),
                   output_padding=extra, dilation=tuple(dilation))


def conv_weight_grad(V, x, g, w_shape, nd: int, stride, padding, dilation):
    """d<g, conv(x, w)>/dw for a dense or grouped weight of shape `w_shape`. A strided 2-D
    convolution's is assembled from stride-1 ones (`_strided_weight_grad`): the direct
    form convolves with dilation = stride, which the CPU convolution rules do not take."""
    if nd == 2 and any(s > 1 for s in stride) and tuple(dilation) == (1,) * nd and \
            all(s * (o - 1) + k <= size + 2 * p for s, o, k, size, p in zip(
                stride, g.shape[2:], w_shape[-nd:], x.shape[2:], padding)):
        return _strided_weight_grad(V, x, g, w_shape, nd, stride, padding)
    grouped = len(w_shape) == nd + 3
    groups = w_shape[0] if grouped else 1
    ocg, icg, *kernel = w_shape[-(nd + 2):]
    n, sp, osp = x.shape[0], tuple(x.shape[2:]), tuple(g.shape[2:])
    rest = tuple(range(3, 3 + nd))
    xt = V.apply("reshape", x, shape=(n, groups, icg) + sp)
    xt = V.apply("transpose", xt, pattern=(2, 1, 0) + rest)
    xt = V.apply("reshape", xt, shape=(icg, groups * n) + sp)
    gt = V.apply("reshape", g, shape=(n, groups, ocg) + osp)
    gt = V.apply("transpose", gt, pattern=(1, 2, 0) + rest)          # (G, OCg, N, *O)
    if groups == 1:
        gt = V.apply("reshape", gt, shape=(ocg, n) + osp)
    out = V.apply(f"conv{nd}d", xt, gt, stride=tuple(dilation), padding=tuple(padding),
                  dilation=tuple(stride))                           # (ICg, G*OCg, *K')
    if tuple(out.shape[2:]) != tuple(kernel):
        out = V.apply("subtensor", out, index=_spatial_index(nd, kernel))
    out = V.apply("reshape", out, shape=(icg, groups, ocg) + tuple(kernel))
    out = V.apply("transpose", out, pattern=(1, 2, 0) + rest)         # (G, OCg, ICg, *K)
    return V.apply("reshape", out, shape=tuple(w_shape))


def _strided_weight_grad(V, x, g, w_shape, nd: int, stride, padding):
    """Polyphase: the taps r, r + s, r + 2s, ... of a stride-s weight meet only the input
    rows r, r + s, ... of the padded input, so each phase is the weight gradient of a
    stride-1 convolution over that subsampled input; the phases, zero-filled to
    ceil(k / s) taps, interleave into the kernel."""
    kernel = tuple(w_shape[-nd:])
    taps = tuple(-(-k // s) for k, s in zip(kernel, stride))       # ceil(k / s)
    out = tuple(g.shape[2:])
    xp = _pad_zeros(V, x, padding)
    lead = tuple(w_shape[:-nd])
    rows = []
    for r in range(stride[0]):
        blocks = []
        for c in range(stride[1]):
            phase = tuple((r, c))
            k_phase = tuple(-(-(k - q) // s) for k, q, s in zip(kernel, phase, stride))
            if 0 in k_phase:             # no tap of this phase (kernel smaller than stride)
                part = V.apply("broadcast_to", V.const(0, g), shape=lead + taps)
            else:
                index = tuple((2 + i, q, q + s * (o + kp - 2) + 1, s, None) for i, (q, s, o, kp)
                              in enumerate(zip(phase, stride, out, k_phase)))
                part = conv_weight_grad(V, V.apply("subtensor", xp, index=index), g,
                                        lead + k_phase, nd, (1,) * nd, (0,) * nd, (1,) * nd)
                part = _pad_zeros(V, part, (0,) * nd,
                                  tuple(t - kp for t, kp in zip(taps, k_phase)),
                                  first_axis=len(lead))
            blocks.append(V.apply("reshape", part, shape=lead + (taps[0], 1, taps[1], 1)))
        rows.append(V.apply("concat", *blocks, axis=len(lead) + 3))
    full = V.apply("concat", *rows, axis=len(lead) + 1)       # (*lead, K0, s0, K1, s1)
    full = V.apply("reshape", full, shape=lead + tuple(t * s for t, s in zip(taps, stride)))
    if tuple(full.shape[-nd:]) != kernel:
        full = V.apply("subtensor", full, index=tuple((len(lead) + i, 0, k, None, None)
                                                      for i, k in enumerate(kernel)))
    return full


def _pad_zeros(V, x, before, after=None, first_axis: int = 2):
    """x with zeros added before (and after: default the same) each axis from `first_axis`."""
    after = before if after is None else after
    for i, (b, a) in enumerate(zip(before, after)):
        axis = first_axis + i
        parts = []
        for count in (b, a):
            shape = tuple(x.shape[:axis]) + (count,) + tuple(x.shape[axis + 1:])
            parts.append(V.apply("broadcast_to", V.const(0, x), shape=shape) if count else None)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        if len(pieces) > 1:
            x = V.apply("concat", *pieces, axis=axis)
    return x


def conv_vjp(nd: int):
    """`OpDef.vjp` of conv{nd}d(x, w)."""
    def vjp(V, inputs, outputs, grads, *, stride, padding, dilation, compute_mode="DEFAULT"):
        (x, w), (g,) = inputs, grads
        geometry = (nd, stride, padding, dilation)
        gx = conv_input_grad(V, g, w, tuple(x.shape), *geometry) if V.needs_grad(0) else None
        gw = conv_weight_grad(V, x, g, tuple(w.shape), *geometry) if V.needs_grad(1) else None
        return gx, gw
    return vjp


def conv_transpose_vjp(nd: int):
    """`OpDef.vjp` of conv_transpose{nd}d(x, w), the adjoint of conv{nd}d(., w): x's
    gradient is the convolution of g by w, w's that of convolving g into x."""
    def vjp(V, inputs, outputs, grads, *, stride, padding, output_padding, dilation):
        (x, w), (g,) = inputs, grads
        geometry = (nd, stride, padding, dilation)
        gx = V.apply(f"conv{nd}d", g, w, stride=tuple(stride), padding=tuple(padding),
                     dilation=tuple(dilation)) if V.needs_grad(0) else None
        gw = conv_weight_grad(V, g, x, tuple(w.shape), *geometry) if V.needs_grad(1) else None
        return gx, gw
    return vjp


def _conv3d_infer(x, w, *, stride, padding, dilation):
    same_dtype("conv3d", x, w)
    _check_params("conv3d", stride, padding, dilation)
    if x.ndim != 5:
        raise ShapeError(f"conv3d: input must be 5-d NCDHW; got {x}")
    g, (ocg, icg, *kernel) = _grouped("conv3d", w, 3)
    if x.shape[1] != g * icg:
        raise ShapeError(f"conv3d: input has {x.shape[1]} channels, weight {w} expects "
                         f"{g * icg}")
    out = tuple(_out_len("conv3d", x.shape[2 + i], kernel[i], stride[i], padding[i],
                         dilation[i]) for i in range(3))
    return TensorType((x.shape[0], g * ocg) + out, x.dtype)


def _as_groups(w: np.ndarray, nd: int) -> np.ndarray:
    return w if w.ndim == nd + 3 else w[None]


def _conv3d_eager(x, w, *, stride, padding, dilation):
    return conv_nd_eager(x, _as_groups(w, 3), stride, padding, dilation)


def _conv3d_lower(L, x, w, *, stride, padding, dilation):
    wt = L.types[1]
    groups = 1
    if wt.ndim == 6:
        groups = wt.shape[0]
        w = L.R.reshape(w, (wt.shape[0] * wt.shape[1],) + wt.shape[2:])
    return L.R.nn.conv3d(x, w, strides=stride, padding=padding, dilation=dilation,
                         groups=groups)


_AXES3 = ("d", "h", "w")


def _fields3(p: dict) -> dict:
    out = {}
    for i, a in enumerate(_AXES3):
        out.update({f"pad_{a}": p["padding"][i], f"stride_{a}": p["stride"][i],
                    f"dilate_{a}": p["dilation"][i]})
    return out


def _decode3(f: dict) -> dict:
    return {"padding": tuple(f[f"pad_{a}"] for a in _AXES3),
            "stride": tuple(f[f"stride_{a}"] for a in _AXES3),
            "dilation": tuple(f[f"dilate_{a}"] for a in _AXES3)}


_CONV3D = {sparse: MgeOpr("Convolution3D", "Convolution3D", fields=_fields3, decode=_decode3,
                          match={"sparse": sparse}, extra=(("ExecutionPolicy", {}),))
           for sparse in ("DENSE", "GROUP")}

register(OpDef(
    "conv3d", eager=_conv3d_eager, infer=_conv3d_infer, lower=_conv3d_lower,
    params={"stride": (1, 1, 1), "padding": (0, 0, 0), "dilation": (1, 1, 1)},
    mge=MgeChoice(lambda types: _CONV3D["GROUP" if types[1].ndim == 6 else "DENSE"],
                  tuple(_CONV3D.values())),
    vjp=conv_vjp(3),
))


# -- transposed convolution (MegEngine's ConvolutionBackwardData), 2-D and 3-D -----------
def _transpose_geometry(op: str, nd: int, x, w, stride, padding, output_padding, dilation):
    _check_params(op, stride, padding, dilation)
    if x.ndim != nd + 2:
        raise ShapeError(f"{op}: input must be {nd + 2}-d; got {x}")
    g, (icg, ocg, *kernel) = _grouped(op, w, nd)
    if x.shape[1] != g * icg:
        raise ShapeError(f"{op}: input has {x.shape[1]} channels, weight {w} expects "
                         f"{g * icg}")
    if any(not 0 <= o < s for o, s in zip(output_padding, stride)):
        raise ValueError(f"{op}: output_padding {output_padding} must be smaller than "
                         f"stride {stride}")
    out = tuple((x.shape[2 + i] - 1) * stride[i] - 2 * padding[i]
                + dilation[i] * (kernel[i] - 1) + output_padding[i] + 1 for i in range(nd))
    if min(out) <= 0:
        raise ShapeError(f"{op}: padding {padding} leaves no output for input {x}")
    return g, ocg, out


def conv_transpose_nd_eager(x, wg, stride, padding, output_padding, dilation):
    """x (N, G*ICg, *S), wg (G, ICg, OCg, *K) -> (N, G*OCg, *O): each input pixel adds
    its weighted kernel into the output (the gradient of convolution w.r.t. its input)."""
    nd = x.ndim - 2
    g, icg, ocg, kernel = wg.shape[0], wg.shape[1], wg.shape[2], wg.shape[3:]
    work = _work_dtype(x.dtype)
    sp = x.shape[2:]
    full = tuple((sp[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1
                 + output_padding[i] for i in range(nd))
    out = np.zeros((x.shape[0], g, ocg) + full, work)
    xg = x.astype(work, copy=False).reshape((x.shape[0], g, icg) + sp)
    w = wg.astype(work, copy=False)
    for offs in itertools.product(*(range(k) for k in kernel)):
        window = (slice(None),) * 3 + tuple(
            slice(o * d, o * d + s * (n - 1) + 1, s)
            for o, d, s, n in zip(offs, dilation, stride, sp))
        for gi in range(g):
            contrib = np.tensordot(w[(gi, slice(None), slice(None)) + offs], xg[:, gi],
                                   axes=([0], [1]))           # (OCg, N, *S)
            out[window][:, gi] += np.moveaxis(contrib, 0, 1)
    crop = (slice(None),) * 3 + tuple(slice(p, f - p) for p, f in zip(padding, full))
    res = out[crop]
    return np.ascontiguousarray(res).reshape((x.shape[0], g * ocg) + res.shape[3:]) \
        .astype(x.dtype)


def _make_transpose(nd: int):
    op = f"conv_transpose{nd}d"

    def infer(x, w, *, stride, padding, output_padding, dilation):
        same_dtype(op, x, w)
        g, ocg, out = _transpose_geometry(op, nd, x, w, stride, padding, output_padding,
                                          dilation)
        return TensorType((x.shape[0], g * ocg) + out, x.dtype)

    def eager(x, w, *, stride, padding, output_padding, dilation):
        return conv_transpose_nd_eager(x, _as_groups(w, nd), stride, padding, output_padding,
                                       dilation)

    def lower(L, x, w, *, stride, padding, output_padding, dilation):
        wt = L.types[1]
        groups = 1
        if wt.ndim == nd + 3:          # (G, ICg, OCg, *k) -> IO*k with I = G*ICg
            groups = wt.shape[0]
            w = L.R.reshape(w, (wt.shape[0] * wt.shape[1],) + wt.shape[2:])
        fn = L.R.nn.conv2d_transpose if nd == 2 else L.R.nn.conv3d_transpose
        return fn(x, w, strides=stride, padding=padding, output_padding=output_padding,
                  dilation=dilation, groups=groups)

    return op, infer, eager, lower


def _transpose2d_fields(p):
    return {"pad_h": p["padding"][0], "pad_w": p["padding"][1],
            "stride_h": p["stride"][0], "stride_w": p["stride"][1],
            "dilate_h": p["dilation"][0], "dilate_w": p["dilation"][1]}


_DECONV = {(nd, sparse): MgeOpr(
    "ConvolutionBackwardData" if nd == 2 else "Convolution3DBackwardData",
    "Convolution" if nd == 2 else "Convolution3D",
    fields=_transpose2d_fields if nd == 2 else _fields3, match={"sparse": sparse},
    extra=(("ExecutionPolicy", {}),))
    for nd in (2, 3) for sparse in ("DENSE", "GROUP")}


def _make_transpose_emit(nd: int):
    def emit(em, types, p, inputs):
        """MegEngine's input order is (weight, input). With output padding the output
        size is not implied by the input, so a third input of the output's shape is
        given (MegEngine allocates one; here a scalar Broadcast to that shape)."""
        x, w = types
        spec = _DECONV[(nd, "GROUP" if w.ndim == nd + 3 else "DENSE")]
        ins = [inputs[1], inputs[0]]
        if any(p["output_padding"]):
            shape = _transpose_out_shape(em, inputs[0], x, w, nd, p)
            ins.append(em.opr(BROADCAST, {}, [em.const(np.zeros((1,), x.dtype)), shape]))
        return em.opr(spec, spec.fields_for(p), ins)
    return emit


def _transpose_out_shape(em, x_id: int, x: TensorType, w: TensorType, nd: int, p) -> int:
    """The output shape from the input's run-time shape, as MegEngine computes it
    ((in - 1) * stride - 2 * pad + dilation * (k - 1) + output_padding + 1 per spatial
    axis), so the file runs at any batch and image size."""
    g, ocg, out = _transpose_geometry(f"conv_transpose{nd}d", nd, x, w, **p)
    stride = np.asarray(p["stride"], np.int32)
    offset = np.asarray(out, np.int32) - np.asarray(x.shape[2:], np.int32) * stride
    shape = shape_emit.shape_of(em, x_id)
    spatial = shape_emit.elemwise(em, "ADD", shape_emit.elemwise(
        em, "MUL", shape_emit.shape_slice(em, shape, 2), em.const(stride)), em.const(offset))
    return shape_emit.concat(em, [shape_emit.dim(em, shape, 0), shape_emit.ints(em, g * ocg),
                                  spatial])


for _nd in (2, 3):
    _name, _infer, _eager, _lower = _make_transpose(_nd)
    register(OpDef(
        _name, eager=_eager, infer=_infer, lower=_lower,
        params={"stride": (1,) * _nd, "padding": (0,) * _nd, "output_padding": (0,) * _nd,
                "dilation": (1,) * _nd},
        mge=MgeComposite(_make_transpose_emit(_nd)), vjp=conv_transpose_vjp(_nd),
    ))


# -- locally connected convolution (MegEngine's GroupLocal) -----------------------------
def _local_infer(x, w, *, stride, padding, dilation):
    same_dtype("local_conv2d", x, w)
    _check_params("local_conv2d", stride, padding, dilation)
    if x.ndim != 4:
        raise ShapeError(f"local_conv2d: input must be 4-d NCHW; got {x}")
    if w.ndim != 7:
        raise ShapeError(f"local_conv2d: weight must be 7-d (groups, OH, OW, IC/groups, KH, "
                         f"KW, OC/groups); got {w}")
    g, oh, ow, icg, kh, kw, ocg = w.shape
    if x.shape[1] != g * icg:
        raise ShapeError(f"local_conv2d: input has {x.shape[1]} channels, weight {w} "
                         f"expects {g * icg}")
    want = (_out_len("local_conv2d", x.shape[2], kh, stride[0], padding[0], dilation[0]),
            _out_len("local_conv2d", x.shape[3], kw, stride[1], padding[1], dilation[1]))
    if (oh, ow) != want:
        raise ShapeError(f"local_conv2d: weight is for a {oh}x{ow} output, the input {x} "
                         f"gives {want[0]}x{want[1]}")
    return TensorType((x.shape[0], g * ocg, oh, ow), x.dtype)


def _local_windows(xp, kh, kw, oh, ow, stride, dilation):
    """Yield ((i, j), patch (N, C, OH, OW)) for every kernel offset."""
    for i, j in itertools.product(range(kh), range(kw)):
        yield (i, j), xp[:, :, i * dilation[0]: i * dilation[0] + stride[0] * (oh - 1) + 1:
                         stride[0],
                         j * dilation[1]: j * dilation[1] + stride[1] * (ow - 1) + 1: stride[1]]


def _local_eager(x, w, *, stride, padding, dilation):
    g, oh, ow, icg, kh, kw, ocg = w.shape
    work = _work_dtype(x.dtype)
    xp = np.pad(x.astype(work, copy=False),
                ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    n = x.shape[0]
    out = np.zeros((n, g, ocg, oh, ow), work)
    wk = w.astype(work, copy=False)
    for (i, j), patch in _local_windows(xp, kh, kw, oh, ow, stride, dilation):
        pg = patch.reshape(n, g, icg, oh, ow)
        out += np.einsum("ngchw,ghwco->ngohw", pg, wk[:, :, :, :, i, j, :])
    return out.reshape(n, g * ocg, oh, ow).astype(x.dtype)


def _local_lower(L, x, w, *, stride, padding, dilation):
    R = L.R
    g, oh, ow, icg, kh, kw, ocg = L.types[1].shape
    n = L.types[0].shape[0]
    xp = R.nn.pad(x, (0, 0, 0, 0, padding[0], padding[0], padding[1], padding[1]))
    total = None
    for i, j in itertools.product(range(kh), range(kw)):
        h0, w0 = i * dilation[0], j * dilation[1]
        patch = R.strided_slice(xp, axes=[2, 3], begin=[h0, w0],
                                end=[h0 + stride[0] * (oh - 1) + 1,
                                     w0 + stride[1] * (ow - 1) + 1],
                                strides=list(stride))
        patch = R.reshape(patch, (n, g, icg, oh, ow))
        wij = R.squeeze(R.strided_slice(w, axes=[4, 5], begin=[i, j], end=[i + 1, j + 1]),
                        axis=[4, 5])                          # (G, OH, OW, ICg, OCg)
        term = R.einsum([patch, wij], "ngchw,ghwco->ngohw")
        total = term if total is None else R.add(total, term)
    return R.reshape(total, (n, g * ocg, oh, ow))


def _local_vjp(V, inputs, outputs, grads, *, stride, padding, dilation):
    """Through the windows (sliding_window): y[n,g,o,p] = sum_{c,k} win[n,g,c,p,k] *
    w[g,p,c,k,o], so gw sums win * g over the batch and gwin (summed back onto the image
    by sliding_window's own rule) sums w * g over the output channels."""
    (x, w), (g,) = inputs, grads
    groups, oh, ow, icg, kh, kw, ocg = w.shape
    n = x.shape[0]
    win = V.apply("sliding_window", x, window=(kh, kw), padding=tuple(padding),
                  stride=tuple(stride), dilation=tuple(dilation))     # (N, C, OH, OW, kh, kw)
    # common layout (N, G, OH, OW, ICg, kh, kw, OCg)
    win = V.apply("reshape", win, shape=(n, groups, icg, oh, ow, kh, kw))
    win = V.apply("expand_dims", V.apply("transpose", win, pattern=(0, 1, 3, 4, 2, 5, 6)),
                  axis=(7,))
    gt = V.apply("reshape", g, shape=(n, groups, ocg, oh, ow))
    gt = V.apply("reshape", V.apply("transpose", gt, pattern=(0, 1, 3, 4, 2)),
                 shape=(n, groups, oh, ow, 1, 1, 1, ocg))
    gx = gw = None
    if V.needs_grad(1):
        gw = V.apply("reduce", win * gt, mode="sum", axis=(0,), keepdims=False)
    if V.needs_grad(0):
        gwin = V.apply("reduce", V.apply("expand_dims", w, axis=(0,)) * gt, mode="sum",
                       axis=(7,), keepdims=False)                   # (N, G, OH, OW, ICg, kh, kw)
        gwin = V.apply("transpose", gwin, pattern=(0, 1, 4, 2, 3, 5, 6))
        gwin = V.apply("reshape", gwin, shape=(n, groups * icg, oh, ow, kh, kw))
        gx = V.apply("sliding_window_transpose", gwin, out=tuple(x.shape[2:]), window=(kh, kw),
                     padding=tuple(padding), stride=tuple(stride), dilation=tuple(dilation))
    return gx, gw


register(OpDef(
    "local_conv2d", eager=_local_eager, infer=_local_infer, lower=_local_lower,
    params={"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1)},
    mge=MgeOpr("GroupLocal", "Convolution", match={"sparse": "DENSE"},
               fields=_transpose2d_fields,
               decode=lambda f: {"stride": (f["stride_h"], f["stride_w"]),
                                 "padding": (f["pad_h"], f["pad_w"]),
                                 "dilation": (f["dilate_h"], f["dilate_w"])}),
    vjp=_local_vjp,
))


# -- deformable convolution v2 (MegEngine's DeformableConvForward) ----------------------
def _deform_infer(x, w, offset, mask, *, stride, padding, dilation):
    same_dtype("deformable_conv2d", x, w)
    _check_params("deformable_conv2d", stride, padding, dilation)
    if x.ndim != 4:
        raise ShapeError(f"deformable_conv2d: input must be 4-d NCHW; got {x}")
    g, (ocg, icg, kh, kw) = _grouped("deformable_conv2d", w, 2)
    if x.shape[1] != g * icg:
        raise ShapeError(f"deformable_conv2d: input has {x.shape[1]} channels, weight {w} "
                         f"expects {g * icg}")
    oh = _out_len("deformable_conv2d", x.shape[2], kh, stride[0], padding[0], dilation[0])
    ow = _out_len("deformable_conv2d", x.shape[3], kw, stride[1], padding[1], dilation[1])
    k = kh * kw
    if offset.ndim != 4 or offset.shape[1] % (2 * k) or \
            offset.shape[2:] != (oh, ow) or offset.shape[0] != x.shape[0]:
        raise ShapeError(f"deformable_conv2d: offset must be (N, 2*dg*{k}, {oh}, {ow}); got "
                         f"{offset}")
    dg = offset.shape[1] // (2 * k)
    if x.shape[1] % dg:
        raise ShapeError(f"deformable_conv2d: {dg} deformable groups do not divide "
                         f"{x.shape[1]} channels")
    if mask.shape != (x.shape[0], dg * k, oh, ow):
        raise ShapeError(f"deformable_conv2d: mask must be (N, {dg * k}, {oh}, {ow}); got "
                         f"{mask}")
    return TensorType((x.shape[0], g * ocg, oh, ow), x.dtype)


def _bilinear(img: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """img (N, C, H, W) sampled at y, x (N, OH, OW) -> (N, C, OH, OW); taps outside the
    image read 0."""
    n, c, h, w = img.shape
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    out = np.zeros((n, c) + y.shape[1:], img.dtype)
    batch = np.arange(n)[:, None, None]
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yy, xx = y0 + dy, x0 + dx
        wt = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        vals = img[batch, :, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]  # (N,OH,OW,C)
        out += np.moveaxis(vals * (wt * inside)[..., None], -1, 1)
    return out


def _deform_eager(x, w, offset, mask, *, stride, padding, dilation):
    wg = _as_groups(w, 2)
    g, ocg, icg, kh, kw = wg.shape
    n, c = x.shape[:2]
    oh, ow = offset.shape[2:]
    k = kh * kw
    dg = offset.shape[1] // (2 * k)
    work = _work_dtype(x.dtype)
    xw = x.astype(work, copy=False)
    base_y = (np.arange(oh) * stride[0] - padding[0])[:, None]
    base_x = (np.arange(ow) * stride[1] - padding[1])[None, :]
    cols = np.zeros((n, c, k, oh, ow), work)                  # sampled, masked taps
    per = c // dg
    for d in range(dg):
        for t, (i, j) in enumerate(itertools.product(range(kh), range(kw))):
            off = offset[:, d * 2 * k + 2 * t: d * 2 * k + 2 * t + 2].astype(work)
            y = base_y + i * dilation[0] + off[:, 0]
            xx = base_x + j * dilation[1] + off[:, 1]
            sampled = _bilinear(xw[:, d * per:(d + 1) * per], y, xx)
            cols[:, d * per:(d + 1) * per, t] = sampled * mask[:, d * k + t][:, None]
    cols = cols.reshape(n, g, icg * k, oh, ow)
    wk = wg.astype(work, copy=False).reshape(g, ocg, icg * k)
    out = np.einsum("ngkhw,gok->ngohw", cols, wk)
    return out.reshape(n, g * ocg, oh, ow).astype(x.dtype)


def _deform_vjp(V, inputs, outputs, grads, *, stride, padding, dilation):
    """MegEngine's DeformableConvBackwardData/BackwardFilter from Tensor ops: the sampled
    columns (recomputed) give the weight's gradient, the weight spreads g back onto the
    columns, whose gradient flows into the mask (times the samples), and through the
    bilinear taps into the image and the offsets (rows first, then columns)."""
    (x, w, offset, mask), (g,) = inputs, grads
    groups = w.shape[0] if w.ndim == 5 else 1
    ocg, icg, kh, kw = w.shape[-4:]
    n, c = x.shape[:2]
    oh, ow = offset.shape[2:]
    taps = kh * kw
    dg = offset.shape[1] // (2 * taps)
    per = c // dg
    channel = lambda t, i: V.apply("reshape", V.apply(  # noqa: E731
        "subtensor", t, index=((1, i, i + 1, None, None),)), shape=(n, oh, ow))
    base_y = V.const((np.arange(oh) * stride[0] - padding[0]).reshape(1, oh, 1), offset)
    base_x = V.const((np.arange(ow) * stride[1] - padding[1]).reshape(1, 1, ow), offset)
    batch = V.const(np.arange(n).reshape(-1, 1, 1), offset)
    wk = V.apply("reshape", w, shape=(groups, ocg, icg * taps))
    gg = V.apply("reshape", g, shape=(n, groups, ocg, oh * ow))
    gcols = V.apply("matmul", wk, gg, transpose_a=True, transpose_b=False)
    gcols = V.apply("reshape", gcols, shape=(n, c, taps, oh, ow))
    cols, gx_parts, goffset, gmask = [], [], [], []
    for d in range(dg):
        xd = V.apply("subtensor", x, index=((1, d * per, (d + 1) * per, None, None),))
        cols_d, gx_d = [], None
        for t, (i, j) in enumerate(itertools.product(range(kh), range(kw))):
            oy = channel(offset, d * 2 * taps + 2 * t)
            ys = base_y + V.const(i * dilation[0], oy) + oy
            xs = base_x + V.const(j * dilation[1], oy) + channel(offset, d * 2 * taps + 2 * t + 1)
            m = V.apply("expand_dims", channel(mask, d * taps + t), axis=(1,))
            sampled = sample_values(V, xd, batch, xs, ys, border="CONSTANT", border_val=0.0)
            cols_d.append(V.apply("expand_dims", sampled * m, axis=(2,)))
            gc = V.apply("reshape", V.apply("subtensor", gcols, index=(
                (1, d * per, (d + 1) * per, None, None), (2, t, t + 1, None, None))),
                shape=(n, per, oh, ow))
            gmask.append(V.apply("reduce", gc * sampled, mode="sum", axis=(1,), keepdims=True))
            gxt, gxs, gys = sample_grads(V, xd, batch, xs, ys, gc * m, border="CONSTANT",
                                         border_val=0.0)
            gx_d = gxt if gx_d is None else gx_d + gxt
            goffset += [V.apply("expand_dims", gys, axis=(1,)),
                        V.apply("expand_dims", gxs, axis=(1,))]
        cols.append(V.apply("concat", *cols_d, axis=2) if taps > 1 else cols_d[0])
        gx_parts.append(gx_d)
    join = lambda parts: V.apply("concat", *parts, axis=1) if len(parts) > 1 else parts[0]  # noqa
    col_mat = V.apply("reshape", join(cols), shape=(n, groups, icg * taps, oh * ow))
    gw = V.apply("matmul", gg, col_mat, transpose_a=False, transpose_b=True)
    gw = V.apply("reshape", V.apply("reduce", gw, mode="sum", axis=(0,), keepdims=False),
                 shape=tuple(w.shape))
    return join(gx_parts), gw, join(goffset), join(gmask)


_DEFORM = {sparse: MgeOpr("DeformableConvForward", "Convolution", match={"sparse": sparse},
                          fields=_transpose2d_fields,
                          decode=lambda f: {"stride": (f["stride_h"], f["stride_w"]),
                                            "padding": (f["pad_h"], f["pad_w"]),
                                            "dilation": (f["dilate_h"], f["dilate_w"])},
                          extra=(("ExecutionPolicy", {}),))
           for sparse in ("DENSE", "GROUP")}

# No Relax lowering yet (the data-dependent bilinear gathers have no Relax op): traced
# graphs with deformable_conv2d run on the NumPy interpreter.
register(OpDef(
    "deformable_conv2d", eager=_deform_eager, infer=_deform_infer,
    params={"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1)},
    mge=MgeChoice(lambda types: _DEFORM["GROUP" if types[1].ndim == 5 else "DENSE"],
                  tuple(_DEFORM.values())),
    vjp=_deform_vjp,
))
