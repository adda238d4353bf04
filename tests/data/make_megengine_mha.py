"""Golden M.MultiHeadAttention outputs from MegEngine 1.13 on CPU (its proxy kernel; run
with MEGREF_BIND=<repo> /work/shared/megref/mpy tests/data/make_megengine_mha.py). Writes
megengine_mha.npz: per config the packed io_weight_bias, the inputs and the output
(eval mode, no dropout), and megengine_mha.mge, MegEngine's dump of the first config (a
MultiHeadAttn opr)."""
import os

import numpy as np

import megengine as mge
import megengine.module as M
from megengine.jit import trace

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {
    # name: (embed_dim, num_heads, kwargs, (batch, seq_q, seq_k), self-attention)
    "self_bias": (8, 2, {"bias": True}, (2, 3, 3), True),
    "self_nobias": (8, 4, {"bias": False}, (2, 4, 4), True),
    "cross": (6, 3, {"bias": True}, (2, 3, 5), False),
}


def main():
    np.random.seed(41)
    out = {}
    for name, (embed, heads, kwargs, (b, lq, lk), self_attn) in CONFIGS.items():
        m = M.MultiHeadAttention(embed, heads, **kwargs)
        m.eval()
        w = np.random.uniform(-0.5, 0.5, m.io_weight_bias.shape).astype("float32")
        m.io_weight_bias._reset(mge.tensor(w))
        q = np.random.randn(b, lq, embed).astype("float32")
        k = q if self_attn else np.random.randn(b, lk, embed).astype("float32")
        v = q if self_attn else np.random.randn(b, lk, embed).astype("float32")
        y = m(mge.tensor(q), mge.tensor(k), mge.tensor(v))[0]
        out.update({f"{name}.w": w, f"{name}.q": q, f"{name}.k": k, f"{name}.v": v,
                    f"{name}.y": y.numpy()})
        if name == "self_bias":
            f = trace(lambda x: m(x, x, x)[0], symbolic=True, capture_as_const=True)
            f(mge.tensor(q))
            f.dump(os.path.join(HERE, "megengine_mha.mge"), arg_names=["x"],
                   output_names=["y"])
    np.savez_compressed(os.path.join(HERE, "megengine_mha.npz"), **out)
    print("wrote", len(CONFIGS), "configs")


if __name__ == "__main__":
    main()
