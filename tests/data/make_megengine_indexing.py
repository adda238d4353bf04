"""MegEngine 1.13's own .mge dumps of traced indexing/setitem functions, with their inputs
and outputs (run in the megref chroot, from the repository root:
`../shared/megref/mpy tests/data/make_megengine_indexing.py`). Writes
tests/data/megengine_indexing/<case>.mge and cases.npz (`<case>.in<i>`, `<case>.out`).
The functions are the same as indexing_cases.py's, which the tests import."""
import os
import sys

import numpy as np

import megengine as mge
from megengine import Tensor, jit

sys.path.insert(0, os.path.dirname(__file__))
from indexing_cases import CASES  # noqa: E402

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_indexing")
os.makedirs(here, exist_ok=True)
arrays = {}
for name, (fn, inputs) in CASES.items():
    traced = jit.trace(symbolic=True, capture_as_const=True)(fn)
    out = traced(*[Tensor(a) for a in inputs]).numpy()
    traced.dump(os.path.join(here, f"{name}.mge"), arg_names=[f"a{i}" for i in range(len(inputs))],
                output_names=["out"], optimize_for_inference=False)
    for i, a in enumerate(inputs):
        arrays[f"{name}.in{i}"] = a
    arrays[f"{name}.out"] = out
np.savez(os.path.join(here, "cases.npz"), **arrays)
print("wrote", len(CASES), "cases to", here)
