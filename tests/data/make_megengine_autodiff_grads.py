"""Golden gradients from the real MegEngine 1.13 for tests/autodiff/test_golden_grads.py.

Run in the megref chroot: /work/shared/megref/mpy tests/data/make_megengine_autodiff_grads.py
(writes tests/data/megengine_autodiff_grads.npz: "<model>/loss", "<model>/<param>")."""
import os
import sys

import numpy as np

import megengine

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from autodiff_models import MODELS, gradients  # noqa: E402

out = {}
for name in MODELS:
    loss, grads = gradients(megengine, name)
    out[f"{name}/loss"] = np.array(loss, np.float32)
    for key, g in grads.items():
        out[f"{name}/{key}"] = g
    print(name, loss, sorted(grads))
np.savez(os.path.join(HERE, "megengine_autodiff_grads.npz"), **out)
