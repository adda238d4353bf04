"""What MegEngine 1.13 dumps for F.svd (run in the megref chroot from the checkout:
`../shared/megref/mpy tests/data/make_megengine_svd_dump.py`).

F.svd(x) with MegEngine's defaults (full_matrices=False, compute_uv=True; its CPU kernels
refuse the other combinations) is traced and dumped unoptimized; writes
megengine_svd/svd.mge and megengine_svd/svd_io.npz (x and MegEngine's U, S, Vh)."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
from megengine.jit import trace

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_svd")


def main():
    os.makedirs(OUT, exist_ok=True)
    x = np.random.RandomState(0).uniform(-1, 1, (2, 4, 3)).astype(np.float32)
    f = trace(lambda t: F.svd(t), symbolic=True, capture_as_const=True)
    u, s, vh = f(mge.tensor(x))
    f.dump(os.path.join(OUT, "svd.mge"), arg_names=["x"], output_names=["u", "s", "vh"],
           optimize_for_inference=False)
    np.savez(os.path.join(OUT, "svd_io.npz"), x=x, u=u.numpy(), s=s.numpy(), vh=vh.numpy())


if __name__ == "__main__":
    main()
