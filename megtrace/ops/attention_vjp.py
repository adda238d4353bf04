"""The VJP of `multi_head_attn` (ops/attention.py) in Tensor operations: the forward is
recomputed, then each stage is walked back (output projection, head merge, softmax
probabilities times values, the scaled scores' softmax, the three input projections, or,
where a projection size is 0, the heads' copies of the input);
the packed parameter's gradient is its parts' gradients in the packed order, the additive
mask's the scores' gradient summed to its shape."""
from __future__ import annotations

from .attention import head_dims, unpack


def attention_vjp(V, inputs, outputs, grads, p):
    """Gradients of the inputs given those of the output and, with need_weights, of the
    attention weights (either may be None)."""
    F = V.F
    g = grads[0] if grads[0] is not None else V.zeros_like(outputs[0])
    g_weights = grads[1] if len(grads) > 1 else None
    q, k, v, w = inputs[:4]
    mask = inputs[4] if len(inputs) > 4 else None
    n, length, source = q.shape[0], q.shape[1], k.shape[1]
    h, c = p["num_heads"], p["sm_scaler"]
    dims = (q.shape[2], k.shape[2], v.shape[2])
    parts = unpack(w, dims, p)
    sizes = [p[f"{ch}proj_size"] for ch in "qkvo"]
    per_head = head_dims(dims, p)

    def split(y, t, d):                 # (N * t, h * d) -> (N * h, t, d)
        return y.reshape(n, t, h, d).transpose((0, 2, 1, 3)).reshape(n * h, t, d)

    def merge(y, t, d):                 # (N * h, t, d) -> (N * t, h * d)
        return y.reshape(n, h, t, d).transpose((0, 2, 1, 3)).reshape(n * t, h * d)

    xs = [q.reshape(n * length, dims[0]), k.reshape(n * source, dims[1]),
          v.reshape(n * source, dims[2])]
    lens = (length, source, source)
    hs = []
    for i in range(3):
        if sizes[i]:
            y = F.matmul(xs[i], parts[i])
            hs.append(split(y if parts[4 + i] is None else y + parts[4 + i], lens[i],
                            per_head[i]))
        else:                           # no projection: every head sees the input
            x = inputs[i].reshape(n, 1, lens[i], dims[i])
            hs.append(F.broadcast_to(x, (n, h, lens[i], dims[i]))
                      .reshape(n * h, lens[i], dims[i]))
    qh, kh, vh = hs
    scores = F.matmul(qh, kh, transpose_b=True) * c
    probs = F.softmax(scores if mask is None else scores + mask, axis=-1)
    merged = merge(F.matmul(probs, vh), length, per_head[2])

    d_parts = [None] * 8
    if sizes[3]:
        g2 = g.reshape(n * length, sizes[3])
        d_parts[3] = F.matmul(merged, g2, transpose_a=True)
        d_parts[7] = F.sum(g2, axis=0) if parts[7] is not None else None
        d_merged = F.matmul(g2, parts[3], transpose_b=True)
    else:
        d_merged = g.reshape(n * length, h * per_head[2])
    d_heads = split(d_merged, length, per_head[2])
    d_probs = F.matmul(d_heads, vh, transpose_b=True)
    if g_weights is not None:
        d_probs = d_probs + g_weights
    d_vh = F.matmul(probs, d_heads, transpose_a=True)
    d_masked = probs * (d_probs - F.sum(d_probs * probs, axis=-1, keepdims=True))
    d_mask = V.sum_to(d_masked, tuple(mask.shape)) \
        if mask is not None and V.needs_grad(4) else None
    d_scores = d_masked * c
    d_qh = F.matmul(d_scores, kh)
    d_kh = F.matmul(d_scores, qh, transpose_a=True)
    d_x = []
    for i, d in enumerate((d_qh, d_kh, d_vh)):
        if not sizes[i]:                # the heads' gradients summed back to the input
            d_x.append(F.sum(d.reshape(n, h, lens[i], dims[i]), axis=1))
            continue
        d2 = merge(d, lens[i], per_head[i])
        d_parts[i] = F.matmul(xs[i], d2, transpose_a=True)
        if parts[4 + i] is not None:
            d_parts[4 + i] = F.sum(d2, axis=0)
        d_x.append(F.matmul(d2, parts[i], transpose_b=True).reshape(inputs[i].shape))
    pieces = [d.reshape(-1) for d in d_parts if d is not None]
    dw = F.concat(pieces, axis=0).reshape(tuple(w.shape)) if pieces else V.zeros_like(w)
    return (*d_x, dw) + (() if mask is None else (d_mask,))
