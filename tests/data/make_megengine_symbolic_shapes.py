"""What MegEngine 1.13 dumps for shape arithmetic on traced input shapes (run in the megref
chroot: `../shared/megref/mpy tests/data/make_megengine_symbolic_shapes.py tests/data`).

Each model is traced at batch 1 (symbolic=True, capture_as_const=True, the default
symbolic_shape=True) and dumped with optimize_for_inference=False and with the default
(True). Writes OUT_DIR/megengine_symbolic_shapes.json: for each model and option, the
opr sequence of the dump as MegEngine's cgtools lists it (ImmutableTensors left out):
type, inputs as indexes of earlier oprs (None: an ImmutableTensor), params."""
import json
import sys
import tempfile

import numpy as np
import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.jit import trace
from megengine.core.tensor import megbrain_graph as G
from megengine.utils import comp_graph_tools as cgtools


class Attention(M.Module):
    """A transformer encoder block with MHA written as users write it."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = M.Linear(dim, dim * 3)
        self.proj = M.Linear(dim, dim)
        self.norm1 = M.LayerNorm(dim)
        self.norm2 = M.LayerNorm(dim)
        self.fc1 = M.Linear(dim, dim * 2)
        self.fc2 = M.Linear(dim * 2, dim)

    def forward(self, x):
        B, S, C = x.shape
        H = self.heads
        qkv = self.qkv(self.norm1(x)).reshape(B, S, 3, H, C // H).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = F.softmax(F.matmul(q, k.transpose(0, 1, 3, 2)) * (C // H) ** -0.5, axis=-1)
        y = F.matmul(att, v).transpose(0, 2, 1, 3).reshape(B, S, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def reshape_batch(x):
    return x.reshape(x.shape[0], -1) * 2


def broadcast_batch(x):
    b = mge.tensor(np.arange(8, dtype="float32"))
    return F.broadcast_to(b, (x.shape[0], 4, 8)) + x


def zeros_batch(x):
    return F.concat([x, F.zeros((x.shape[0], 4))], axis=1)


def matmul_3d_2d(x):
    w = mge.tensor(np.ones((6, 5), "float32"))
    return F.matmul(x, w)


def matmul_4d(x):
    return F.matmul(x, x.transpose(0, 1, 3, 2))


def slice_half(x):
    return x[:, : x.shape[1] // 2] * 2


def index_from_shape(x):
    return x[:, x.shape[1] - 1]


def vector_index_from_shape(x):
    return x[: x.shape[0] // 2 + 1, [0, 2]]


def broadcast_to_shape(x):
    return F.broadcast_to(mge.tensor([1.0, 2.0, 3.0]), x.shape) + x


def tensor_of_shape(x):
    return mge.Tensor(x.shape) * 2


MODELS = {
    "reshape_batch": (reshape_batch, (1, 3, 4)),
    "slice_half": (slice_half, (1, 6, 4)),
    "index_from_shape": (index_from_shape, (1, 3)),
    "vector_index_from_shape": (vector_index_from_shape, (3, 4)),
    "broadcast_to_shape": (broadcast_to_shape, (1, 3)),
    "tensor_of_shape": (tensor_of_shape, (1, 3)),
    "broadcast_batch": (broadcast_batch, (1, 4, 8)),
    "zeros_batch": (zeros_batch, (1, 6)),
    "matmul_3d_2d": (matmul_3d_2d, (1, 4, 6)),
    "matmul_4d": (matmul_4d, (1, 2, 4, 6)),
    "attention": (Attention(), (1, 16, 64)),
}


def oprs_of(path):
    ret = G.load_graph(path)
    oprs = cgtools.get_oprs_seq(ret.output_vars_list, prune_reshape=False)
    index = {}
    rows = []
    for opr in oprs:
        for v in opr.outputs:
            index[v.id] = len(rows)
        params = {}
        try:
            params = json.loads(opr.params) if isinstance(opr.params, str) else dict(opr.params)
        except Exception:
            params = {}
        rows.append({"type": opr.type, "inputs": [index.get(v.id) for v in opr.inputs],
                     "params": params})
    return rows


def main(out_dir):
    result = {}
    work = tempfile.mkdtemp()
    for name, (fn, shape) in MODELS.items():
        if isinstance(fn, M.Module):
            fn.eval()
        traced = trace(fn if not isinstance(fn, M.Module) else (lambda x, m=fn: m(x)),
                       symbolic=True, capture_as_const=True)
        traced(mge.tensor(np.zeros(shape, "float32")))
        for opt in (False, True):
            path = f"{work}/{name}_{'opt' if opt else 'noopt'}.mge"
            traced.dump(path, arg_names=["x"], optimize_for_inference=opt)
            result[f"{name}/{'opt' if opt else 'noopt'}"] = oprs_of(path)
    with open(f"{out_dir}/megengine_symbolic_shapes.json", "w") as f:
        json.dump(result, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
