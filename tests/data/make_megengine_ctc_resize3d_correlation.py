"""Golden F.nn.ctc_loss, trilinear F.nn.interpolate (Resize3D) and F.nn.correlation
results from MegEngine 1.13 on CPU (run in the megref chroot: cd tests/data &&
MGE_DEFAULT_DEVICE=cpu0 /work/shared/megref/mpy make_megengine_ctc_resize3d_correlation.py).
Writes megengine_ctc_resize3d_correlation.npz: inputs and outputs per case."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
from megengine.jit import trace

rng = np.random.RandomState(5)
out = {}


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype("float32")


# ctc: (T, N, C) probabilities
CTC = {
    "ctc_2d": dict(T=6, N=3, C=5, labels=np.array([[1, 2, 2], [3, 0, 0], [4, 1, 0]]),
                   label_lengths=[3, 1, 2], pred_lengths=[6, 4, 5], blank=0),
    "ctc_flat": dict(T=5, N=2, C=4, labels=np.array([1, 1, 2, 3, 2]), label_lengths=[2, 3],
                     pred_lengths=[5, 5], blank=0),
    "ctc_blank_last": dict(T=4, N=2, C=3, labels=np.array([[0, 1], [1, 1]]),
                           label_lengths=[2, 2], pred_lengths=[4, 3], blank=2),
}
for name, c in CTC.items():
    pred = softmax(rng.randn(c["T"], c["N"], c["C"]))
    out[f"{name}.pred"] = pred
    out[f"{name}.label"] = c["labels"].astype("int32")
    out[f"{name}.label_lengths"] = np.array(c["label_lengths"], "int32")
    out[f"{name}.pred_lengths"] = np.array(c["pred_lengths"], "int32")
    for reduction in ("none", "mean", "sum"):
        loss = F.nn.ctc_loss(mge.tensor(pred), mge.tensor(out[f"{name}.pred_lengths"]),
                             mge.tensor(out[f"{name}.label"]),
                             mge.tensor(out[f"{name}.label_lengths"]), blank=c["blank"],
                             reduction=reduction)
        out[f"{name}.{reduction}"] = loss.numpy()

# trilinear interpolate
x = rng.randn(2, 3, 3, 4, 5).astype("float32")
out["tri.x"] = x
TRI = {"tri_up": dict(size=(5, 7, 9), align_corners=False),
       "tri_up_align": dict(size=(5, 7, 9), align_corners=True),
       "tri_down": dict(size=(2, 3, 2), align_corners=False),
       "tri_down_align": dict(size=(2, 3, 1), align_corners=True),
       "tri_scale": dict(scale_factor=1.7, align_corners=False)}
for name, kw in TRI.items():
    # MegEngine 1.13's CPU Resize3D is unreliable: some calls return zeros or stale memory
    # (eager and traced, cpu0 and multithread2). Its result is the one most of 12 traced
    # runs agree on (at least 8).
    @trace(symbolic=True)
    def resize(t, kw=kw):
        return F.nn.interpolate(t, mode="trilinear", **kw)
    runs = [resize(mge.tensor(x)).numpy() for _ in range(12)]
    counts = {}
    for r in runs:
        counts.setdefault(r.tobytes(), []).append(r)
    agreed = max(counts.values(), key=len)
    assert len(agreed) >= 8, (name, sorted(len(v) for v in counts.values()))
    out[name] = agreed[0]

# correlation
a = rng.randn(2, 3, 9, 11).astype("float32")
b = rng.randn(2, 3, 9, 11).astype("float32")
out["corr.a"], out["corr.b"] = a, b
CORR = {"corr_default": dict(),
        "corr_k3_d2_pad2": dict(kernel_size=3, max_displacement=2, pad_size=2),
        "corr_strides": dict(kernel_size=1, max_displacement=4, stride1=2, stride2=2,
                             pad_size=3),
        "corr_absdiff": dict(kernel_size=3, max_displacement=1, stride1=2, pad_size=1,
                             is_multiply=False)}
for name, kw in CORR.items():
    out[name] = F.nn.correlation(mge.tensor(a), mge.tensor(b), **kw).numpy()

np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "megengine_ctc_resize3d_correlation.npz"), **out)
print("wrote", len(out), "arrays")
