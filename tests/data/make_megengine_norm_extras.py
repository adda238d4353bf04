"""Golden data from real MegEngine 1.13 for group/instance/general norm, LRN, prelu,
topk_accuracy and the module wrappers (run with /work/shared/megref/mpy from tests/data).

Writes megengine_norm_extras.npz (inputs, outputs, gradients), megengine_norm_extras.json
(module attributes, state_dict keys, error messages) and two real dumps
(megengine-1.13/general_norm.mge and lrn.mge) that megtrace's loader must read.
"""
import json

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.autodiff import GradManager
from megengine.jit import trace

rng = np.random.RandomState(7)
out = {}


def f32(*shape):
    return rng.standard_normal(shape).astype("float32")


def record(name, fn, inputs, grad=True):
    """Forward value and gradients of sum(fn(*inputs) * dy) for every float input."""
    ts = [mge.Tensor(v) for v in inputs]
    for i, v in enumerate(inputs):
        out[f"{name}/in{i}"] = v
    gm = GradManager().attach([t for t, v in zip(ts, inputs) if v.dtype == np.float32])
    with gm:
        y = fn(*ts)
        dy = rng.standard_normal(y.shape).astype("float32")
        out[f"{name}/dy"] = dy
        if grad:
            gm.backward((y * mge.Tensor(dy)).sum())
    out[f"{name}/out"] = y.numpy()
    if grad:
        for i, t in enumerate(ts):
            if inputs[i].dtype == np.float32:
                out[f"{name}/grad{i}"] = t.grad.numpy()


record("group_norm", lambda x, w, b: F.nn.group_norm(x, 3, True, w, b),
       [f32(2, 6, 3, 4), f32(6), f32(6)])
record("group_norm_noaffine", lambda x: F.nn.group_norm(x, 2, False, eps=1e-3), [f32(3, 4, 5, 2)])
record("instance_norm", lambda x, w, b: F.nn.instance_norm(x, True, w, b),
       [f32(2, 3, 4, 5), f32(3), f32(3)])
record("instance_norm_noaffine", lambda x: F.nn.instance_norm(x, False), [f32(2, 3, 4, 5)])
record("general_norm", lambda x, w, b: F.nn.general_norm(x, (1, 2), True, w, b),
       [f32(2, 3, 4, 5), f32(3, 4), f32(3, 4)])
record("general_norm_first", lambda x: F.nn.general_norm(x, 0, False, eps=1e-2), [f32(4, 3, 2)])
record("general_norm_disc", lambda x, w, b: F.nn.general_norm(x, (1, -1), True, w, b),
       [f32(2, 3, 4, 5), f32(3, 5), f32(3, 5)])
record("lrn", lambda x: F.nn.local_response_norm(x, 3, 1.0, 1e-2, 0.75), [f32(2, 7, 4, 4) * 3])
record("lrn_default", lambda x: F.nn.local_response_norm(x), [f32(1, 6, 3, 5) * 10])
record("prelu_scalar", lambda x: F.nn.prelu(x, mge.Tensor(np.float32(0.25))), [f32(2, 3, 4)])
record("prelu_tensor", lambda x, w: F.nn.prelu(x, w), [f32(2, 3, 4, 4), f32(1, 3, 1, 1)])
record("topk_accuracy", lambda x, t: F.topk_accuracy(x, t, (1, 3))[1] + F.topk_accuracy(x, t),
       [f32(8, 10), rng.randint(0, 10, (8,)).astype("int32")], grad=False)
for i, acc in enumerate(F.topk_accuracy(mge.Tensor(out["topk_accuracy/in0"]),
                                        mge.Tensor(out["topk_accuracy/in1"]), (1, 3, 5))):
    out[f"topk_accuracy/acc{i}"] = acc.numpy()

# modules: attributes and state
info = {}
mods = {
    "GeneralNorm": M.GeneralNorm((3, 4), (1, 2)),
    "GeneralNorm_noaffine": M.GeneralNorm(affine=False),
    "LocalResponseNorm": M.LocalResponseNorm(),
    "Pad": M.Pad(((1, 1), (2, 0)), "constant", 3.0),
    "PixelShuffle": M.PixelShuffle(2),
    "SlidingWindow": M.SlidingWindow(3, 1, 2, 1),
    "SlidingWindowTranspose": M.SlidingWindowTranspose((5, 5), 3, 1, 2, 1),
    "DeformablePSROIPooling": M.DeformablePSROIPooling(False, 2, 2, 2, 2, 0.5),
    "GroupNorm": M.GroupNorm(2, 4),
    "InstanceNorm": M.InstanceNorm(3, affine=False),
}
for k, m in mods.items():
    sd = m.state_dict()
    attrs = {a: (list(v) if isinstance(v, tuple) else v) for a, v in vars(m).items()
             if not a.startswith("_") and a not in ("training", "quantize_disabled", "name")
             and isinstance(v, (int, float, str, bool, tuple, list, type(None)))}
    info[k] = {"state": {n: [list(v.shape), v.dtype.name, float(v.sum())] for n, v in sd.items()},
               "attrs": attrs, "repr": repr(m)}

x = mge.Tensor(f32(2, 3, 4, 4))
m = M.GeneralNorm((3, 4), (1, 2))
out["module_general_norm/in"] = x.numpy()
out["module_general_norm/out"] = m(x).numpy()
out["module_lrn/out"] = M.LocalResponseNorm(3, 1.0, 0.1, 0.5)(x).numpy()
out["module_pad/out"] = M.Pad(((1, 1), (0, 0), (2, 1)), "reflect")(x).numpy()


def err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return [type(e).__name__, str(e).split("\n")[0]]
    return None


xs = mge.Tensor(f32(2, 4, 3, 3))
info["errors"] = {
    "group_norm_no_weight": err(lambda: F.nn.group_norm(xs, 2, True)),
    "group_norm_no_bias": err(lambda: F.nn.group_norm(xs, 2, True, mge.Tensor(np.ones(4, "float32")))),
    "instance_norm_no_weight": err(lambda: F.nn.instance_norm(xs, True)),
    "general_norm_order": err(lambda: F.nn.general_norm(xs, (2, 1), False)),
    "general_norm_empty": err(lambda: F.nn.general_norm(xs, (), False)),
    "general_norm_too_big": err(lambda: F.nn.general_norm(xs, (1, 4), False)),
    "general_norm_dup": err(lambda: F.nn.general_norm(xs, (1, 1), False)),
    "general_norm_no_weight": err(lambda: F.nn.general_norm(xs, (1,), True)),
    "GeneralNorm_no_shape": err(lambda: M.GeneralNorm()),
    "GeneralNorm_len": err(lambda: M.GeneralNorm((4, 3), 1)),
    "GeneralNorm_dup": err(lambda: M.GeneralNorm((4, 4), (1, 1))),
    "GeneralNorm_shape": err(lambda: M.GeneralNorm((5,), 1)(xs)),
    "GeneralNorm_order": err(lambda: M.GeneralNorm((3, 4), (2, 1))(xs)),
    "group_norm_3d": err(lambda: F.nn.group_norm(mge.Tensor(f32(2, 4, 3)), 2, False).numpy()),
    "instance_norm_3d": err(lambda: F.nn.instance_norm(mge.Tensor(f32(2, 4, 3)), False).numpy()),
    "GroupNorm_div": err(lambda: M.GroupNorm(3, 4)),
}
np.savez("megengine_norm_extras.npz", **out)
with open("megengine_norm_extras.json", "w") as f:
    json.dump(info, f, indent=1, sort_keys=True)

# real dumps read back by megtrace's loader
for fname, fn in (("megengine-1.13/general_norm.mge", lambda x: F.nn.general_norm(x, (1, 2), False)),
                  ("megengine-1.13/lrn.mge", lambda x: F.nn.local_response_norm(x, 3, 1.0, 1e-2, 0.75))):
    t = trace(fn, symbolic=True, capture_as_const=True)
    t(mge.Tensor(out["lrn/in0"]))
    t.dump(fname, arg_names=["x"])
print("ok", len(out))
