"""What MegEngine 1.13 dumps for GroupNorm, InstanceNorm, PReLU and the vision/linalg
ops nms, roi_pooling, deformable_psroi_pooling, deformable_conv2d, svd (run in the megref
chroot: `../shared/megref/mpy tests/data/make_megengine_norm_vision_dumps.py OUT_DIR`).

Each function is traced (symbolic=True, capture_as_const=True) and dumped with the
default options and with optimize_for_inference=False; prints, per function and option,
the opr types of the dump (cgtools order) or the error MegEngine gives, and writes
OUT_DIR/<name>_<opt>.mge with OUT_DIR/<name>_in.npz / _out.npz (eager outputs)."""
import json
import sys

import numpy as np
import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.core.tensor import megbrain_graph as G
from megengine.jit import trace
from megengine.utils import comp_graph_tools as cgtools

rng = np.random.RandomState(0)


def _f32(*shape):
    return rng.uniform(-1, 1, size=shape).astype("float32")


gn = M.GroupNorm(2, 4)
gn_plain = M.GroupNorm(2, 4, affine=False)
inorm = M.InstanceNorm(4)
inorm_plain = M.InstanceNorm(4, affine=False)
prelu = M.PReLU(4)
for m in (gn, gn_plain, inorm, inorm_plain, prelu):
    m.eval()
boxes = np.array([[0, 0, 4, 4], [1, 1, 5, 5], [6, 6, 9, 9], [0.5, 0.5, 4, 4]], "float32")
rois = np.array([[0, 0, 0, 3, 3], [1, 1, 1, 4, 5]], "float32")

FUNCS = {
    "group_norm": (lambda x: gn(x), [_f32(2, 4, 3, 3)]),
    "group_norm_no_affine": (lambda x: gn_plain(x), [_f32(2, 4, 3, 3)]),
    "instance_norm": (lambda x: inorm(x), [_f32(2, 4, 3, 3)]),
    "instance_norm_no_affine": (lambda x: inorm_plain(x), [_f32(2, 4, 3, 3)]),
    "prelu": (lambda x: prelu(x), [_f32(2, 4, 3, 3)]),
    "nms": (lambda b, s: F.vision.nms(b, s, iou_thresh=0.5, max_output=3),
            [boxes, np.array([0.9, 0.8, 0.7, 0.6], "float32")]),
    "roi_pooling": (lambda x, r: F.vision.roi_pooling(x, r, (2, 2), "max", 1.0),
                    [_f32(2, 3, 6, 6), rois]),
    "deformable_psroi_pooling": (
        lambda x, r, t: F.nn.deformable_psroi_pooling(
            x, r, t, no_trans=False, part_size=2, pooled_h=2, pooled_w=2, sample_per_part=2,
            spatial_scale=1.0, trans_std=0.1),
        [_f32(2, 4, 6, 6), rois, _f32(2, 2, 2, 2)]),
    "deformable_conv2d": (
        lambda x, w, o, m: F.nn.deformable_conv2d(x, w, o, m, padding=1),
        [_f32(1, 2, 4, 4), _f32(3, 2, 3, 3), _f32(1, 18, 4, 4) * 0.5,
         np.abs(_f32(1, 9, 4, 4))]),
    "svd": (lambda x: F.svd(x, full_matrices=False, compute_uv=True)[1], [_f32(3, 4)]),
}


def main(out_dir):
    for name, (fn, args) in FUNCS.items():
        try:
            f = trace(fn, symbolic=True, capture_as_const=True)
            outs = f(*[mge.tensor(a) for a in args])
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            np.savez(f"{out_dir}/{name}_in.npz", **{f"x{i}": a for i, a in enumerate(args)})
            np.savez(f"{out_dir}/{name}_out.npz", *[o.numpy() for o in outs])
        except Exception as e:
            print(f"{name}: trace failed: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        for opt in (False, True):
            path = f"{out_dir}/{name}_{'opt' if opt else 'noopt'}.mge"
            try:
                f.dump(path, arg_names=[f"x{i}" for i in range(len(args))],
                       optimize_for_inference=opt)
                ret = G.load_graph(path)
                oprs = cgtools.get_oprs_seq(ret.output_vars_list, prune_reshape=False)
                types = [o.type + (f"[{json.loads(o.params).get('mode')}]" if o.type == "Elemwise"
                                   else "") for o in oprs if o.type != "ImmutableTensor"]
                print(f"{name} ({'opt' if opt else 'noopt'}): {' '.join(types)}")
            except Exception as e:
                print(f"{name} ({'opt' if opt else 'noopt'}): dump failed: "
                      f"{type(e).__name__}: {str(e).splitlines()[0]}")


if __name__ == "__main__":
    main(sys.argv[1])
