"""Golden BatchNorm training-mode runs from MegEngine 1.13 (run in the megref chroot:
/work/shared/megref/mpy tests/data/make_megengine_batchnorm_training.py): for each case,
three training-mode forwards (outputs and running statistics after each), then one
eval-mode forward; and F.batch_norm(training=True, inplace=False). Writes
megengine_batchnorm_training.npz."""
import os

import numpy as np

# (case, module class, kwargs, input shape)
CASES = [
    ("bn2d_default", "BatchNorm2d", {}, (4, 3, 5, 5)),
    ("bn2d_momentum", "BatchNorm2d", {"momentum": 0.5, "eps": 1e-3}, (2, 3, 4, 6)),
    ("bn2d_noaffine", "BatchNorm2d", {"affine": False, "momentum": 0.7}, (3, 2, 3, 3)),
    ("bn2d_untracked", "BatchNorm2d", {"track_running_stats": False}, (3, 2, 3, 3)),
    ("bn2d_freeze", "BatchNorm2d", {"freeze": True}, (3, 2, 3, 3)),
    ("bn1d_2d", "BatchNorm1d", {"momentum": 0.8}, (8, 3)),
    ("bn1d_3d", "BatchNorm1d", {}, (4, 3, 6)),
    ("bn1d_batch1", "BatchNorm1d", {}, (1, 3, 5)),
    ("bn1d_one_sample", "BatchNorm1d", {}, (1, 3)),      # unbiased variance: 0/0 = NaN
    ("syncbn_2d", "SyncBatchNorm", {"momentum": 0.7}, (6, 3)),
    ("syncbn_3d", "SyncBatchNorm", {}, (3, 4, 5)),
    ("syncbn_4d_untracked", "SyncBatchNorm", {"track_running_stats": False}, (2, 3, 4, 4)),
    ("syncbn_4d_freeze", "SyncBatchNorm", {"freeze": True}, (2, 3, 4, 4)),
]


def main():
    import megengine as mge
    import megengine.functional as F
    import megengine.module as M
    rng = np.random.RandomState(5)
    out = {}
    for case, cls, kwargs, shape in CASES:
        bn = getattr(M, cls)(shape[1], **kwargs)
        if bn.affine:
            bn.weight[...] = mge.tensor(rng.rand(*bn.weight.shape).astype("float32") + 0.5)
            bn.bias[...] = mge.tensor(rng.randn(*bn.bias.shape).astype("float32"))
            out[f"{case}/weight"], out[f"{case}/bias"] = bn.weight.numpy(), bn.bias.numpy()
        if bn.freeze:
            bn.running_mean[...] = mge.tensor(rng.randn(1, shape[1], 1, 1).astype("float32"))
            bn.running_var[...] = mge.tensor(rng.rand(1, shape[1], 1, 1).astype("float32") + 1)
            out[f"{case}/init_mean"] = bn.running_mean.numpy()
            out[f"{case}/init_var"] = bn.running_var.numpy()
        bn.train()
        for step in range(3):
            x = (rng.randn(*shape) * (step + 1) + step).astype("float32")
            out[f"{case}/x{step}"] = x
            out[f"{case}/y{step}"] = bn(mge.tensor(x)).numpy()
            if bn.running_mean is not None:
                out[f"{case}/mean{step}"] = bn.running_mean.numpy()
                out[f"{case}/var{step}"] = bn.running_var.numpy()
        bn.eval()
        x = rng.randn(*shape).astype("float32")
        out[f"{case}/x_eval"], out[f"{case}/y_eval"] = x, bn(mge.tensor(x)).numpy()

    x = rng.randn(4, 3, 2, 2).astype("float32")
    mean = rng.randn(1, 3, 1, 1).astype("float32")
    var = rng.rand(1, 3, 1, 1).astype("float32") + 1
    y, new_mean, new_var = F.batch_norm(mge.tensor(x), mge.tensor(mean), mge.tensor(var),
                                        training=True, momentum=0.6, inplace=False)
    out.update({"functional/x": x, "functional/mean": mean, "functional/var": var,
                "functional/y": y.numpy(), "functional/new_mean": new_mean.numpy(),
                "functional/new_var": new_var.numpy()})
    for training in (True, False):     # eps_mode "max": MegEngine's sync-bn kernels
        key = f"sync_max_{'train' if training else 'eval'}"
        x = (rng.randn(3, 4, 2, 3) * 0.01).astype("float32")    # var below eps
        mean = rng.randn(1, 4, 1, 1).astype("float32")
        var = (rng.rand(1, 4, 1, 1) * 0.02).astype("float32")
        w, b = rng.randn(1, 4, 1, 1).astype("float32"), rng.randn(1, 4, 1, 1).astype("float32")
        out.update({f"{key}/x": x, f"{key}/mean": mean, f"{key}/var": var, f"{key}/w": w,
                    f"{key}/b": b})
        rm, rv = mge.tensor(mean), mge.tensor(var)
        y = F.sync_batch_norm(mge.tensor(x), rm, rv, mge.tensor(w), mge.tensor(b),
                              training=training, momentum=0.8, eps=1e-2, eps_mode="max")
        out.update({f"{key}/y": y.numpy(), f"{key}/new_mean": rm.numpy(),
                    f"{key}/new_var": rv.numpy()})
    np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "megengine_batchnorm_training.npz"), **out)
    print("wrote", len(out), "arrays")


if __name__ == "__main__":
    main()
