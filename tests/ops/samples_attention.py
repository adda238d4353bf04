"""Samples for multi_head_attn (MegEngine 1.13's MultiHeadAttn). The reference loops over
batch rows and heads in float64, slicing the packed weights by running offset; a mask
(L, S) applies to every row and head, (N * heads, L, S) to row b, head h at b * heads + h."""
from __future__ import annotations

import numpy as np

from .samples import Sample, f32


def _mha_ref(q, k, v, w, mask=None, *, num_heads, qproj_size, kproj_size, vproj_size,
             oproj_size, qbias=False, kbias=False, vbias=False, obias=False, sm_scaler=1.0,
             attn_mask_type="NO_MASK", need_weights=False):
    """A projection of size 0 is absent: its input, whole, goes to every head (the
    output's: the concatenated heads are the result)."""
    flat, pos = w.reshape(-1).astype(np.float64), 0

    def take(*shape):
        nonlocal pos
        size = int(np.prod(shape))
        pos += size
        return flat[pos - size:pos].reshape(shape)
    sizes = (qproj_size, kproj_size, vproj_size, oproj_size)
    merged = vproj_size or num_heads * v.shape[2]
    rows = (q.shape[2], k.shape[2], v.shape[2], merged)
    ws = [take(r, s) if s else None for r, s in zip(rows, sizes)]
    bs = [take(s) if s and flag else 0.0
          for s, flag in zip(sizes, (qbias, kbias, vbias, obias))]
    out = np.zeros((q.shape[0], q.shape[1], oproj_size or merged))
    weights = np.zeros((q.shape[0] * num_heads, q.shape[1], k.shape[1]))

    def head(x, i, hd):             # head hd's features of projected input x
        if not sizes[i]:
            return x
        d = sizes[i] // num_heads
        return x[:, hd * d:(hd + 1) * d]
    for b in range(q.shape[0]):
        qp, kp, vp = (x[b].astype(np.float64) if ws[i] is None else
                      x[b].astype(np.float64) @ ws[i] + bs[i]
                      for i, x in enumerate((q, k, v)))
        heads = []
        for hd in range(num_heads):
            s = head(qp, 0, hd) @ head(kp, 1, hd).T * sm_scaler
            if mask is not None:
                s = s + (mask if mask.ndim == 2 else mask[b * num_heads + hd])
            e = np.exp(s - s.max(axis=1, keepdims=True))
            weights[b * num_heads + hd] = e / e.sum(axis=1, keepdims=True)
            heads.append(weights[b * num_heads + hd] @ head(vp, 2, hd))
        z = np.concatenate(heads, axis=1)
        out[b] = z if ws[3] is None else z @ ws[3] + bs[3]
    return (out, weights) if need_weights else out


_SELF = {"num_heads": 2, "qproj_size": 4, "kproj_size": 4, "vproj_size": 4, "oproj_size": 4,
         "qbias": True, "kbias": True, "vbias": True, "obias": True, "sm_scaler": 0.5 ** 0.5}
_CROSS = {"num_heads": 3, "qproj_size": 6, "kproj_size": 6, "vproj_size": 3, "oproj_size": 5,
          "sm_scaler": 0.4}

SAMPLES = [
    Sample("multi_head_attn", lambda r: [f32(2, 3, 4)(r), f32(2, 3, 4)(r), f32(2, 3, 4)(r),
                                         f32(1, 4 * 16 + 16)(r)], _SELF, _mha_ref),
    Sample("multi_head_attn", lambda r: [f32(2, 3, 4)(r), f32(2, 5, 3)(r), f32(2, 5, 2)(r),
                                         f32(1, 24 + 18 + 6 + 15)(r)], _CROSS, _mha_ref,
           tag="cross-nobias"),
    Sample("multi_head_attn", lambda r: [f32(2, 3, 4)(r), f32(2, 3, 4)(r), f32(2, 3, 4)(r),
                                         f32(1, 4 * 16 + 16)(r), f32(3, 3)(r)],
           {**_SELF, "attn_mask_type": "DEFAULT_MASK"}, _mha_ref, tag="mask-2d"),
    Sample("multi_head_attn", lambda r: [f32(2, 3, 4)(r), f32(2, 5, 3)(r), f32(2, 5, 2)(r),
                                         f32(1, 24 + 18 + 6 + 15)(r), f32(6, 3, 5)(r)],
           {**_CROSS, "attn_mask_type": "USER_DEFINED_MASK"}, _mha_ref, tag="mask-3d"),
    Sample("multi_head_attn", lambda r: [f32(2, 3, 4)(r), f32(2, 5, 3)(r), f32(2, 5, 2)(r),
                                         f32(1, 24 + 18 + 6 + 15)(r), f32(3, 5)(r)],
           {**_CROSS, "attn_mask_type": "USER_DEFINED_MASK", "need_weights": True}, _mha_ref,
           tag="mask-weights"),
    # no query/key projection (each head sees the whole 4 features), no output projection
    Sample("multi_head_attn", lambda r: [f32(2, 3, 4)(r), f32(2, 5, 4)(r), f32(2, 5, 3)(r),
                                         f32(1, 3 * 6 + 6)(r)],
           {"num_heads": 2, "qproj_size": 0, "kproj_size": 0, "vproj_size": 6,
            "oproj_size": 0, "vbias": True, "sm_scaler": 0.5}, _mha_ref, tag="no-qko-proj"),
    # no value projection: the output weight's rows are num_heads * Ev
    Sample("multi_head_attn", lambda r: [f32(2, 3, 4)(r), f32(2, 5, 3)(r), f32(2, 5, 2)(r),
                                         f32(1, 16 + 12 + 2 * 2 * 5 + 5)(r), f32(3, 5)(r)],
           {"num_heads": 2, "qproj_size": 4, "kproj_size": 4, "vproj_size": 0,
            "oproj_size": 5, "obias": True, "sm_scaler": 0.7,
            "attn_mask_type": "USER_DEFINED_MASK", "need_weights": True}, _mha_ref,
           tag="no-v-proj"),
]

BAD = [("multi_head_attn", [(2, 3, 4), (2, 3, 4), (2, 3, 4), (1, 7)], _SELF, "ShapeError",
        "io_weight_bias"),
       ("multi_head_attn", [(2, 3, 4), (2, 3, 4), (2, 3, 4), (1, 80), (2, 3, 3)],
        {**_SELF, "attn_mask_type": "USER_DEFINED_MASK"}, "ShapeError",
        "attn_mask.shape should be [4, 3, 3]"),
       ("multi_head_attn", [(2, 3, 4), (2, 3, 4), (2, 3, 4), (1, 80), (3, 3)], _SELF,
        "ShapeError", "NO_MASK takes no mask input")]
