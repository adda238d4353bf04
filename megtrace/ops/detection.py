"""Detection ops as megdnn computes them: roi_align (ROIAlign), roi_pooling (ROIPooling)
and nms_keep (MegEngine's NMSKeep: greedy suppression of score-sorted boxes).

roi_pooling and nms_keep have data-dependent loops (bin extents, the kept set) and no
Relax lowering; both are written to .mge as MegEngine's oprs. F.vision.nms takes the
first `count` kept indices with cond_take, so a traced nms runs on the NumPy interpreter.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedOpError
from ..ir import TensorType
from ._sampling import sample_np, sample_relax
from ._sampling_grad import sample_grads, sample_values
from .registry import NOT_DIFFERENTIABLE, MgeComposite, MgeOpr, OpDef, get, register
from .shape import emit_reshape


def _rois(name: str, x, rois) -> None:
    if x.ndim != 4:
        raise ShapeError(f"{name}: input must be 4-d NCHW; got {x}")
    if rois.ndim != 2 or rois.shape[1] != 5:
        raise ShapeError(f"{name}: rois must be (K, 5) rows of (batch index, x0, y0, x1, y1); "
                         f"got {rois}")
    if x.dtype != "float32" or rois.dtype != "float32":
        raise TypeError(f"{name}: input and rois must be float32; got {x} and {rois}")


# -- roi_align ----------------------------------------------------------------------------
def _align_infer(x, rois, *, mode, pooled, samples, spatial_scale, offset):
    _rois("roi_align", x, rois)
    if mode not in ("max", "average"):
        raise ValueError(f"roi_align: mode must be 'max' or 'average'; got {mode!r}")
    if min(pooled) <= 0 or min(samples) < 0:
        raise ShapeError(f"roi_align: output size {pooled} must be positive and sample "
                         f"points {samples} non-negative")
    return TensorType((rois.shape[0], x.shape[1]) + tuple(pooled), "float32")


def _no_samples(samples) -> bool:
    """MegEngine's CPU ROIAlign with 0 sample points (on either axis) pools nothing and
    gives zeros (its docstring's "sample densely" is not what the kernel does)."""
    return min(samples) == 0


def _align_centres(rois, pooled, samples, spatial_scale, offset):
    """(batch index (K,), sample rows (K, PH*SH, 1), sample columns (K, 1, PW*SW))."""
    f = np.float32
    r = rois.astype(np.float32)
    start_w, start_h, end_w, end_h = (r[:, i] * f(spatial_scale) - f(offset) for i in range(1, 5))
    bin_h = np.maximum(end_h - start_h, f(0)) / f(pooled[0])
    bin_w = np.maximum(end_w - start_w, f(0)) / f(pooled[1])

    def steps(n_bins, n_samples):
        bins = np.arange(n_bins, dtype=np.float32)[:, None]
        frac = (np.arange(n_samples, dtype=np.float32) + f(0.5)) * (f(1) / f(n_samples))
        return (bins + frac).reshape(-1)            # bin + (i + 0.5) / samples

    ys = start_h[:, None] + bin_h[:, None] * steps(pooled[0], samples[0])
    xs = start_w[:, None] + bin_w[:, None] * steps(pooled[1], samples[1])
    return r[:, 0].astype(np.int64), ys[:, :, None], xs[:, None, :]


def _align_pool(values, k, c, pooled, samples, mode):
    v = values.reshape(k, c, pooled[0], samples[0], pooled[1], samples[1])
    return v.max(axis=(3, 5)) if mode == "max" else v.mean(axis=(3, 5), dtype=values.dtype)


def _align_eager(x, rois, *, mode, pooled, samples, spatial_scale, offset):
    k = rois.shape[0]
    if _no_samples(samples):
        return np.zeros((k, x.shape[1]) + tuple(pooled), np.promote_types(x.dtype, np.float32))
    batch, ys, xs = _align_centres(rois, pooled, samples, spatial_scale, offset)
    if k and (batch.min() < 0 or batch.max() >= x.shape[0]):
        raise IndexError(f"roi_align: roi batch index out of range [0, {x.shape[0]})")
    ys, xs = np.broadcast_arrays(ys, xs)
    values = sample_np(x, batch, xs, ys, border="CONSTANT", border_val=0.0)
    # float32 (float64 inputs stay float64: gradient checks by finite differences)
    return _align_pool(values, k, x.shape[1], pooled, samples, mode).astype(
        np.promote_types(x.dtype, np.float32))


def _align_lower(L, x, rois, *, mode, pooled, samples, spatial_scale, offset):
    R = L.R
    k = L.types[1].shape[0]
    c = L.types[0].shape[1]
    if _no_samples(samples):
        return R.zeros((k, c) + tuple(pooled), "float32")
    f = lambda v: L.const(v, "float32")     # noqa: E731

    def col(i):
        return R.strided_slice(rois, axes=[1], begin=[i], end=[i + 1])    # (K, 1)

    def start(i):
        return R.subtract(R.multiply(col(i), f(spatial_scale)), f(offset))

    def steps(n_bins, n_samples):
        bins = np.arange(n_bins, dtype=np.float32)[:, None]
        frac = (np.arange(n_samples, dtype=np.float32) + 0.5) * (np.float32(1) / n_samples)
        return f((bins + frac).reshape(1, -1))

    def centres(lo, hi, n_bins, n_samples):
        size = R.maximum(R.subtract(start(hi), start(lo)), f(0.0))
        return R.add(start(lo), R.multiply(R.divide(size, f(float(n_bins))),
                                           steps(n_bins, n_samples)))

    grid = (k, pooled[0] * samples[0], pooled[1] * samples[1])
    ys = R.broadcast_to(R.expand_dims(centres(2, 4, pooled[0], samples[0]), 2), grid)
    xs = R.broadcast_to(R.expand_dims(centres(1, 3, pooled[1], samples[1]), 1), grid)
    batch = R.reshape(R.astype(col(0), "int32"), (k, 1, 1))
    values = sample_relax(L, x, L.types[0].shape, batch, xs, ys, border="CONSTANT",
                          border_val=0.0)
    v = R.reshape(values, (k, c, pooled[0], samples[0], pooled[1], samples[1]))
    return R.max(v, axis=[3, 5]) if mode == "max" else R.mean(v, axis=[3, 5])


def _align_fields(p):
    return {"mode": "MAX_" if p["mode"] == "max" else "AVERAGE", "format": "NCHW",
            "spatial_scale": float(p["spatial_scale"]), "offset": float(p["offset"]),
            "pooled_height": p["pooled"][0], "pooled_width": p["pooled"][1],
            "sample_height": p["samples"][0], "sample_width": p["samples"][1]}


def _align_decode(f):
    return {"mode": "max" if f["mode"] == "MAX_" else "average",
            "pooled": (f["pooled_height"], f["pooled_width"]),
            "samples": (f["sample_height"], f["sample_width"]),
            "spatial_scale": float(f["spatial_scale"]), "offset": float(f["offset"])}


def _align_vjp(V, inputs, outputs, grads, *, mode, pooled, samples, spatial_scale, offset):
    """Into the image only (MegEngine's ROIAlignBackward; the rois get no gradient): each
    bin's gradient shared by its samples (average) or given to the samples equal to the
    bin's maximum, then through the bilinear taps."""
    (x, rois), (g,) = inputs, grads
    if _no_samples(samples):
        return V.zeros_like(x), None
    k, c = rois.shape[0], x.shape[1]
    (ph, pw), (sh, sw) = pooled, samples
    col = lambda i: V.apply("subtensor", rois, index=((1, i, i + 1, None, None),))  # noqa
    start = lambda i: col(i) * V.const(spatial_scale, rois) - V.const(offset, rois)  # noqa

    def centres(lo, hi, n_bins, n_samples):
        size = V.apply("maximum", start(hi) - start(lo), V.const(0, rois))
        frac = (np.arange(n_bins)[:, None] + (np.arange(n_samples) + 0.5) / n_samples)
        return start(lo) + size / V.const(n_bins, rois) * V.const(frac.reshape(1, -1), rois)

    grid = (k, ph * sh, pw * sw)
    ys = V.apply("broadcast_to", V.apply("expand_dims", centres(2, 4, ph, sh), axis=(2,)),
                 shape=grid)
    xs = V.apply("broadcast_to", V.apply("expand_dims", centres(1, 3, pw, sw), axis=(1,)),
                 shape=grid)
    batch = V.apply("reshape", V.apply("floor", col(0)), shape=(k, 1, 1))
    cells = (k, c, ph, 1, pw, 1)
    spread = V.apply("broadcast_to", V.apply("reshape", g, shape=cells),
                     shape=(k, c, ph, sh, pw, sw))
    if mode == "max":
        values = V.apply("reshape", sample_values(V, x, batch, xs, ys, border="CONSTANT",
                                                  border_val=0.0), shape=(k, c, ph, sh, pw, sw))
        # the maximum of these very samples (y itself may differ in the last bit)
        top = V.apply("reduce", values, mode="max", axis=(3, 5), keepdims=True)
        spread = V.select(V.apply("eq", values, top), spread)
    else:
        spread = spread / V.const(sh * sw, g)
    spread = V.apply("reshape", spread, shape=(k, c, ph * sh, pw * sw))
    gx, _, _ = sample_grads(V, x, batch, xs, ys, spread, border="CONSTANT", border_val=0.0,
                            want_coords=False)
    return gx, None


# ROIAlign's second output (the argmax index) only serves the backward pass.
register(OpDef("roi_align",
               params={"mode": "average", "pooled": (1, 1), "samples": (2, 2),
                       "spatial_scale": 1.0, "offset": 0.0},
               eager=_align_eager, infer=_align_infer, lower=_align_lower,
               mge=MgeOpr("ROIAlignV1", "ROIAlign", fields=_align_fields, decode=_align_decode,
                          outputs=2),
               opaque_in_optimize=True, vjp=_align_vjp))


# -- roi_pooling --------------------------------------------------------------------------
def _pool_infer(x, rois, *, mode, pooled, scale):
    _rois("roi_pooling", x, rois)
    if mode not in ("max", "average"):
        raise ValueError(f"roi_pooling: mode must be 'max' or 'average'; got {mode!r}")
    if min(pooled) <= 0:
        raise ShapeError(f"roi_pooling: output size must be positive; got {pooled}")
    return TensorType((rois.shape[0], x.shape[1]) + tuple(pooled), "float32")


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))


def _pool_eager(x, rois, *, mode, pooled, scale):
    """Caffe's ROIPooling: integer ROI corners, bins of roi_size / pooled cells."""
    k, c = rois.shape[0], x.shape[1]
    h, w = x.shape[2:]
    work = np.promote_types(x.dtype, np.float32)    # float64 stays (gradient checks)
    out = np.zeros((k, c) + tuple(pooled), work)
    corners = _round_half_away(rois[:, 1:].astype(np.float32) * np.float32(scale)).astype(int)
    for r in range(k):
        img = x[int(rois[r, 0])]
        x0, y0, x1, y1 = corners[r]
        bin_h = np.float32(max(y1 - y0 + 1, 1)) / np.float32(pooled[0])
        bin_w = np.float32(max(x1 - x0 + 1, 1)) / np.float32(pooled[1])
        for i in range(pooled[0]):
            hs = min(max(int(np.floor(i * bin_h)) + y0, 0), h)
            he = min(max(int(np.ceil((i + 1) * bin_h)) + y0, 0), h)
            for j in range(pooled[1]):
                ws = min(max(int(np.floor(j * bin_w)) + x0, 0), w)
                we = min(max(int(np.ceil((j + 1) * bin_w)) + x0, 0), w)
                if he <= hs or we <= ws:
                    continue
                cell = img[:, hs:he, ws:we].reshape(c, -1)
                out[r, :, i, j] = cell.max(axis=1) if mode == "max" else \
                    cell.mean(axis=1, dtype=work)
    return out


def _pool_bin_masks(V, rois, pooled, scale, h, w):
    """Per bin (i, j): a bool (K, 1, H, W) mask of its cells, the bins `_pool_eager` uses,
    from Tensor operations (the corners are data)."""
    k = rois.shape[0]
    col = lambda i: V.apply("subtensor", rois, index=((1, i, i + 1, None, None),))  # noqa
    corner = lambda i: _round_half_tensor(V, col(i) * V.const(scale, rois))       # noqa
    x0, y0, x1, y1 = (corner(i) for i in range(1, 5))                                # (K, 1)
    one = V.const(1, rois)
    bin_h = V.apply("maximum", y1 - y0 + one, one) / V.const(pooled[0], rois)
    bin_w = V.apply("maximum", x1 - x0 + one, one) / V.const(pooled[1], rois)
    rows = V.const(np.arange(h).reshape(1, h), rois)
    cols = V.const(np.arange(w).reshape(1, w), rois)

    def extent(i, size, bin_len, origin, grid, n):
        lo = V.apply("clip", V.apply("floor", V.const(i, rois) * bin_len) + origin,
                     lower=0.0, upper=float(n))
        hi = V.apply("clip", V.apply("ceil", V.const(i + 1, rois) * bin_len) + origin,
                     lower=0.0, upper=float(n))
        return V.apply("logical_and", V.apply("ge", grid, lo), V.apply("lt", grid, hi))

    masks = {}
    for i in range(pooled[0]):
        in_rows = V.apply("reshape", extent(i, h, bin_h, y0, rows, h), shape=(k, 1, h, 1))
        for j in range(pooled[1]):
            in_cols = V.apply("reshape", extent(j, w, bin_w, x0, cols, w), shape=(k, 1, 1, w))
            masks[i, j] = V.apply("logical_and", in_rows, in_cols)
    return masks


def _round_half_tensor(V, v):
    return V.apply("sign", v) * V.apply("floor", V.apply("abs", v) + V.const(0.5, v))


def _pool_vjp(V, inputs, outputs, grads, *, mode, pooled, scale):
    """Into the image only (MegEngine's ROIPoolingBackward; rois get none): each bin's
    gradient goes to its first maximum (max) or is shared by its cells (average), then
    added into the roi's image."""
    (x, rois), (g,) = inputs, grads
    k, c = rois.shape[0], x.shape[1]
    h, w = x.shape[2:]
    batch = V.apply("astype", V.apply("reshape", V.apply("subtensor", rois, index=(
        (1, 0, 1, None, None),)), shape=(k,)), dtype="int32")
    xk = V.apply("take", x, batch, axis=0)                              # (K, C, H, W)
    total = None
    positions = V.const(np.arange(h * w).reshape(1, 1, h * w), x)
    for (i, j), inside in _pool_bin_masks(V, rois, pooled, scale, h, w).items():
        gij = V.apply("subtensor", g, index=((2, i, i + 1, None, None),
                                             (3, j, j + 1, None, None)))   # (K, C, 1, 1)
        area = V.apply("reduce", V.apply("astype", inside, dtype=x.dtype.name), mode="sum",
                       axis=(2, 3), keepdims=True)                     # (K, 1, 1, 1)
        if mode == "max":
            masked = V.apply("where", inside, xk, V.const(float("-inf"), xk))
            first = V.apply("arg_reduce", V.apply("reshape", masked, shape=(k, c, h * w)),
                            mode="max", axis=2, keepdims=True)        # (K, C, 1)
            hit = V.apply("eq", positions, V.apply("astype", first, dtype=x.dtype.name))
            share = V.select(hit, V.apply("reshape", gij, shape=(k, c, 1)))
            share = V.apply("reshape", share, shape=(k, c, h, w))
            share = V.select(V.apply("gt", area, V.const(0, area)), share)
        else:
            share = V.select(inside, gij / V.apply("maximum", area, V.const(1, area)))
        total = share if total is None else total + share
    gx = V.apply("indexing_incr_multi_axis_vec", V.zeros_like(x), total, batch, axes=(0,))
    return gx, None


def _const_ints(g, var, what: str) -> tuple[int, ...]:
    if var not in g.consts:
        raise UnsupportedOpError(f"{what} must be a constant")
    return tuple(int(v) for v in g.consts[var].reshape(-1))


def _fields_of(opr) -> dict:
    return opr.params[0][1] if opr.params else {}


# MegEngine's ROIPooling: (input, rois, output size as an int32 constant); its second
# output (the argmax index) only serves the backward pass.
ROI_POOLING = MgeOpr("ROIPooling", "ROIPooling", outputs=2)


def _pool_emit(em, types, p, inputs):
    fields = {"mode": "MAX_" if p["mode"] == "max" else "AVERAGE", "scale": float(p["scale"])}
    size = em.const(np.array(p["pooled"], np.int32))
    return em.opr(ROI_POOLING, fields, [inputs[0], inputs[1], size])


def _pool_read(g, opr, ins, _):
    f = _fields_of(opr)
    params = {"mode": "max" if f.get("mode", "MAX_") == "MAX_" else "average",
              "scale": float(f.get("scale", 1.0)),
              "pooled": _const_ints(g, ins[2], "ROIPooling output size")}
    return [*g.add_node(get("roi_pooling"), ins[:2], params), None]


# No Relax lowering (per-RoI bin extents depend on the RoI values): compiled graphs run it
# on the NumPy interpreter. Written as ROIPooling.
register(OpDef("roi_pooling", params={"mode": "max", "pooled": (1, 1), "scale": 1.0},
               eager=_pool_eager, infer=_pool_infer, vjp=_pool_vjp,
               mge=MgeComposite(_pool_emit), mge_read={"ROIPooling": _pool_read}))


# -- nms_keep -----------------------------------------------------------------------------
def _nms_infer(boxes, *, iou_thresh, max_output):
    if boxes.ndim != 2 or boxes.shape[1] != 4 or boxes.dtype != "float32":
        raise ShapeError(f"nms_keep: boxes must be float32 (N, 4); got {boxes}")
    if max_output < 0:
        raise ValueError(f"nms_keep: max_output must be non-negative; got {max_output}")
    return TensorType((max_output,), "int32"), TensorType((1,), "int32")


def _suppresses(a, b, thresh) -> bool:
    f = np.float32
    width = max(min(a[2], b[2]) - max(a[0], b[0]), f(0))
    height = max(min(a[3], b[3]) - max(a[1], b[1]), f(0))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter > union * f(thresh)


def _nms_eager(boxes, *, iou_thresh, max_output):
    """Indices of the kept boxes (in order), padded to max_output with the last kept one,
    and how many were kept."""
    kept: list[int] = []
    for i in range(boxes.shape[0]):
        if len(kept) == max_output:
            break
        if not any(_suppresses(boxes[i], boxes[j], iou_thresh) for j in kept):
            kept.append(i)
    pad = kept[-1] if kept else 0
    idx = np.array(kept + [pad] * (max_output - len(kept)), np.int32)
    return idx, np.array([len(kept)], np.int32)


# MegEngine's NMSKeep works on a batch of box sets: (1, N, 4) in, the kept indices
# (1, max_output) and their count (1,) out, as F.vision.nms writes it.
NMS_KEEP = MgeOpr("NMSKeepMGB", "NMSKeep", outputs=2)


def _nms_emit(em, types, p, inputs):
    boxes = emit_reshape(em, inputs[0], (1, -1, 4))
    fields = {"iou_thresh": float(p["iou_thresh"]), "max_output": int(p["max_output"])}
    index, count = em.opr_all(NMS_KEEP, fields, [boxes])
    return [emit_reshape(em, index, (-1,)), count]


def _nms_read(g, opr, ins, _):
    f = _fields_of(opr)
    boxes = ins[0]
    if boxes.type.ndim != 3 or boxes.type.shape[0] != 1:
        raise UnsupportedOpError(f"NMSKeep on {boxes.type}: megtrace keeps boxes of one "
                                 "image (1, N, 4)")
    (flat,) = g.add_node(get("reshape"), [boxes], {"shape": (-1, 4)})
    index, count = g.add_node(get("nms_keep"), [flat], {
        "iou_thresh": float(f.get("iou_thresh", 0.0)), "max_output": int(f.get("max_output", 0))})
    (index,) = g.add_node(get("reshape"), [index], {"shape": (1, -1)})
    return [index, count]


# No Relax lowering (greedy suppression is a sequential loop): compiled graphs run it on
# the NumPy interpreter. Written as NMSKeep.
# Integer outputs: no gradient (MegEngine's NMSKeep has none either).
register(OpDef("nms_keep", params={"iou_thresh": 0.5, "max_output": 1},
               eager=_nms_eager, infer=_nms_infer, vjp=NOT_DIFFERENTIABLE,
               mge=MgeComposite(_nms_emit),
               mge_read={"NMSKeepMGB": _nms_read}))


# -- deformable_psroi_pooling -------------------------------------------------------------
def _dpsroi_infer(x, rois, trans, *, no_trans, part_size, pooled, sample_per_part,
                  spatial_scale, trans_std):
    _rois("deformable_psroi_pooling", x, rois)
    if trans.ndim != 4 or trans.dtype != "float32":
        raise ShapeError(f"deformable_psroi_pooling: trans must be float32 4-d; got {trans}")
    if not no_trans and (trans.shape[1] != 2 or trans.shape[2:] != tuple(pooled)):
        raise ShapeError(f"deformable_psroi_pooling: trans must be (K, 2, {pooled[0]}, "
                         f"{pooled[1]}); got {trans}")
    if min(pooled) <= 0 or part_size <= 0 or sample_per_part <= 0:
        raise ShapeError("deformable_psroi_pooling: pooled size, part_size and "
                         "sample_per_part must be positive")
    return TensorType((rois.shape[0], x.shape[1]) + tuple(pooled), "float32")


def _dpsroi_eager(x, rois, trans, *, no_trans, part_size, pooled, sample_per_part,
                  spatial_scale, trans_std):
    """megdnn's DeformablePSROIPooling forward: per output cell, the mean of the
    sample_per_part**2 bilinear samples inside the image, shifted by the part's offset."""
    f = np.float32
    k, c = rois.shape[0], x.shape[1]
    h, w = x.shape[2:]
    n_cls = 1 if no_trans else trans.shape[1] // 2
    offsets = trans.reshape(-1, 2, part_size, part_size) if not no_trans else None
    work = np.promote_types(x.dtype, np.float32)    # float64 stays (gradient checks)
    out = np.zeros((k, c) + tuple(pooled), work)
    corner = _round_half_away(rois[:, 1:].astype(np.float32))
    for n in range(k):
        img = x[int(rois[n, 0])]
        wl = corner[n, 0] * f(spatial_scale) - f(0.5)
        hl = corner[n, 1] * f(spatial_scale) - f(0.5)
        wr = (corner[n, 2] + f(1)) * f(spatial_scale) - f(0.5)
        hr = (corner[n, 3] + f(1)) * f(spatial_scale) - f(0.5)
        rw, rh = max(wr - wl, f(0.1)), max(hr - hl, f(0.1))
        bin_h, bin_w = rh / f(pooled[0]), rw / f(pooled[1])
        sub_h, sub_w = bin_h / f(sample_per_part), bin_w / f(sample_per_part)
        per_cls = c // n_cls
        for cls in range(n_cls):
            chans = img[cls * per_cls:(cls + 1) * per_cls]
            for i in range(pooled[0]):
                for j in range(pooled[1]):
                    ws, hs = f(j) * bin_w + wl, f(i) * bin_h + hl
                    if not no_trans:
                        part_h = int(np.floor(f(i) / pooled[0] * part_size))
                        part_w = int(np.floor(f(j) / pooled[1] * part_size))
                        ws += offsets[n * n_cls + cls, 0, part_h, part_w] * f(trans_std) * rw
                        hs += offsets[n * n_cls + cls, 1, part_h, part_w] * f(trans_std) * rh
                    total, count = np.zeros(per_cls, work), 0
                    for a in range(sample_per_part):
                        for b in range(sample_per_part):
                            sx, sy = ws + f(b) * sub_w, hs + f(a) * sub_h
                            if sx < -0.5 or sx > w - 0.5 or sy < -0.5 or sy > h - 0.5:
                                continue
                            sx, sy = min(max(sx, f(0)), f(w - 1)), min(max(sy, f(0)), f(h - 1))
                            y0, x0 = int(np.floor(sy)), int(np.floor(sx))
                            y1, x1 = int(np.ceil(sy)), int(np.ceil(sx))
                            dy, dx = sy - f(y0), sx - f(x0)
                            total += ((1 - dx) * (1 - dy) * chans[:, y0, x0]
                                      + (1 - dx) * dy * chans[:, y1, x0]
                                      + dx * (1 - dy) * chans[:, y0, x1]
                                      + dx * dy * chans[:, y1, x1])
                            count += 1
                    if count:
                        out[n, cls * per_cls:(cls + 1) * per_cls, i, j] = total / f(count)
    return out


def _int_const(V, values, like):
    return V.apply("astype", V.const(np.asarray(values), like), dtype="int32")


def _dpsroi_vjp(V, inputs, outputs, grads, *, no_trans, part_size, pooled, sample_per_part,
                spatial_scale, trans_std):
    """MegEngine's DeformablePSROIPoolingBackward (image and offsets; rois get none): the
    forward's sample grid rebuilt from Tensor ops over (K, PH, S, PW, S), each cell's
    gradient shared by its valid samples, then through the bilinear taps; the offsets get
    the clamp-free samples' coordinate gradients, scaled as the forward scales them."""
    (x, rois, trans), (g,) = inputs, grads
    k, c = rois.shape[0], x.shape[1]
    h, w = x.shape[2:]
    (ph, pw), s = pooled, sample_per_part
    grid = (k, ph, s, pw, s)
    col = lambda i: V.apply("reshape", V.apply("subtensor", rois, index=(  # noqa: E731
        (1, i, i + 1, None, None),)), shape=(k, 1, 1, 1, 1))
    corner = lambda i: V.apply("sign", col(i)) * V.apply(  # noqa: E731
        "floor", V.apply("abs", col(i)) + V.const(0.5, rois))
    cst = lambda v: V.const(v, rois)                                    # noqa: E731
    scale, half = cst(spatial_scale), cst(0.5)
    wl, hl = corner(1) * scale - half, corner(2) * scale - half
    wr, hr = (corner(3) + cst(1)) * scale - half, (corner(4) + cst(1)) * scale - half
    rw = V.apply("maximum", wr - wl, cst(0.1))
    rh = V.apply("maximum", hr - hl, cst(0.1))
    bin_h, bin_w = rh / cst(ph), rw / cst(pw)
    ii = cst(np.arange(ph).reshape(1, ph, 1, 1, 1))
    jj = cst(np.arange(pw).reshape(1, 1, 1, pw, 1))
    aa = cst(np.arange(s).reshape(1, 1, s, 1, 1))
    bb = cst(np.arange(s).reshape(1, 1, 1, 1, s))
    ws, hs = jj * bin_w + wl, ii * bin_h + hl
    part_h = np.floor(np.arange(ph, dtype=np.float32) / ph * part_size).astype(np.int64)
    part_w = np.floor(np.arange(pw, dtype=np.float32) / pw * part_size).astype(np.int64)
    if not no_trans:
        def shift(axis):
            t = V.apply("reshape", V.apply("subtensor", trans, index=(
                (1, axis, axis + 1, None, None),)), shape=(k, part_size, part_size))
            t = V.apply("indexing_multi_axis_vec", t, _int_const(V, part_h.reshape(-1, 1), g),
                        _int_const(V, part_w.reshape(1, -1), g), axes=(1, 2))
            return V.apply("reshape", t, shape=(k, ph, 1, pw, 1)) * cst(trans_std)
        ws, hs = ws + shift(0) * rw, hs + shift(1) * rh
    sx = V.apply("broadcast_to", ws + bb * (bin_w / cst(s)), shape=grid)
    sy = V.apply("broadcast_to", hs + aa * (bin_h / cst(s)), shape=grid)
    inside = lambda p, n: V.apply("logical_and", V.apply("ge", p, cst(-0.5)),  # noqa: E731
                                  V.apply("le", p, cst(n - 0.5)))
    valid = V.apply("astype", V.apply("logical_and", inside(sx, w), inside(sy, h)),
                    dtype=g.dtype.name)
    count = V.apply("reduce", valid, mode="sum", axis=(2, 4), keepdims=True)
    weight = valid / V.apply("maximum", count, V.const(1, count))      # (K, PH, S, PW, S)
    gs = V.apply("reshape", g, shape=(k, c, ph, 1, pw, 1)) * \
        V.apply("expand_dims", weight, axis=(1,))
    gs = V.apply("reshape", gs, shape=(k, c, ph * s, pw * s))
    flat = lambda t: V.apply("reshape", t, shape=(k, ph * s, pw * s))  # noqa: E731
    csx = V.apply("clip", sx, lower=0.0, upper=float(w - 1))
    csy = V.apply("clip", sy, lower=0.0, upper=float(h - 1))
    batch = V.apply("reshape", V.apply("floor", col(0)), shape=(k, 1, 1))
    gx, gxs, gys = sample_grads(V, x, batch, flat(csx), flat(csy), gs, border="REPLICATE",
                                border_val=0.0, want_coords=not no_trans)
    if no_trans:
        return gx, None, None

    def offset_grad(gc, p, n, extent):
        free = V.apply("logical_and", V.apply("ge", p, cst(0)), V.apply("le", p, cst(n - 1)))
        gc = V.select(free, V.apply("reshape", gc, shape=grid))
        per_cell = V.apply("reduce", gc, mode="sum", axis=(2, 4), keepdims=False)
        per_cell = per_cell * V.apply("reshape", extent, shape=(k, 1, 1)) * cst(trans_std)
        parts = V.apply("broadcast_to", V.const(0, g), shape=(k, part_size, part_size))
        parts = V.apply("indexing_incr_multi_axis_vec", parts, per_cell,
                        _int_const(V, part_h.reshape(-1, 1), g),
                        _int_const(V, part_w.reshape(1, -1), g), axes=(1, 2))
        return V.apply("expand_dims", parts, axis=(1,))
    gtrans = V.apply("concat", offset_grad(gxs, sx, w, rw), offset_grad(gys, sy, h, rh), axis=1)
    return gx, None, V.apply("reshape", gtrans, shape=tuple(trans.shape))


def _dpsroi_fields(p):
    return {"no_trans": bool(p["no_trans"]), "spatial_scale": float(p["spatial_scale"]),
            "trans_std": float(p["trans_std"]), "pooled_h": int(p["pooled"][0]),
            "pooled_w": int(p["pooled"][1]), "part_size": int(p["part_size"]),
            "sample_per_part": int(p["sample_per_part"])}


def _dpsroi_decode(f):
    return {"no_trans": bool(f["no_trans"]), "spatial_scale": float(f["spatial_scale"]),
            "trans_std": float(f["trans_std"]), "pooled": (f["pooled_h"], f["pooled_w"]),
            "part_size": f["part_size"], "sample_per_part": f["sample_per_part"]}


# No Relax lowering (per-sample validity makes the sample count data dependent): compiled
# graphs run it on the NumPy interpreter. Written as
# DeformablePSROIPooling (its second output, the sample count, serves the backward pass).
register(OpDef("deformable_psroi_pooling",
               params={"no_trans": True, "part_size": 1, "pooled": (1, 1),
                       "sample_per_part": 1, "spatial_scale": 1.0, "trans_std": 1.0},
               eager=_dpsroi_eager, infer=_dpsroi_infer, vjp=_dpsroi_vjp,
               mge=MgeOpr("DeformablePSROIPoolingForward", "DeformablePSROIPooling",
                          fields=_dpsroi_fields, decode=_dpsroi_decode, outputs=2)))
