"""MegEngine 1.13 tensors pickled by megengine.save (run in the megref chroot, from the
repository root: `../shared/megref/mpy tests/data/make_megengine_tensor_pickles.py`):
an int8 tensor on cpu0:0, a Parameter, a tensor whose qparams carry a scale. Writes
tests/data/megengine_tensors_v113.pkl. Also loads $MEGTRACE_TENSORS_PKL (a path the chroot sees) when present
(written by megtrace.save in test_core_tensor.py's manual check) and prints what MegEngine
rebuilt."""
import os

import numpy as np

import megengine as mge
from megengine import Parameter, Tensor

here = os.path.dirname(os.path.abspath(__file__))
q = Tensor(0)
q.qparams.scale = Tensor(1.5)
objects = {"int8_cpu0": Tensor(np.array([1, 2, 3], np.int8), device="cpu0"),
           "param": Parameter(np.arange(6, dtype=np.float32).reshape(2, 3)),
           "with_scale": q}
mge.save(objects, os.path.join(here, "megengine_tensors_v113.pkl"))
theirs = os.environ.get("MEGTRACE_TENSORS_PKL", "/tmp/mt_core_tensors.pkl")
if os.path.exists(theirs):
    o = mge.load(theirs)
    for k, v in o.items():
        print(k, type(v).__name__, v.dtype, v.device.logical_name, v.numpy().tolist(),
              None if v.qparams.scale is None else v.qparams.scale.numpy().tolist())
