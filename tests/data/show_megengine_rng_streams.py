"""The seeding facts tests/test_random.py asserts, shown by MegEngine 1.13 itself (run
with /work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  eager uniform x2:   u1 u2;  after seed, normal first == normal after two uniforms
  RNG(7).uniform:     u1 (fresh, whatever the global generator drew)
  trace of two uniforms, three calls: [u1 u1] [u1 u1] [u2 u2]; eager stream untouched
  a second trace after seed(7): u1 on its first call
  dropout / permutation traced: calls 1 and 2 equal, call 3 new
  dumped UniformRNG/GaussianRNG params: seed 7; the loaded file draws u1, u2, ... on its
  runs 1, 2, ... and a second load starts again at u1
"""
import os
import tempfile

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.random as R
from megengine.jit import trace
from megengine.utils.comp_graph_tools import GraphInference


def show(label, arrays):
    print(label, [np.asarray(a).round(4).tolist() for a in arrays])


R.seed(7)
show("eager uniform", [R.uniform(size=(2,)).numpy() for _ in range(2)])
show("normal after two uniforms", [R.normal(size=(2,)).numpy()])
R.seed(7)
show("normal first", [R.normal(size=(2,)).numpy()])
show("RNG(7).uniform", [R.RNG(7).uniform(size=(2,)).numpy()])

R.seed(7)
R.uniform(size=(2,))
f = trace(lambda: (R.uniform(size=(2,)), R.uniform(size=(2,))), symbolic=True)
for _ in range(3):
    show("trace call", [t.numpy() for t in f()])
show("eager after the trace", [R.uniform(size=(2,)).numpy()])
R.seed(7)
g = trace(lambda: R.uniform(size=(2,)), symbolic=True)
show("second trace, first call", [g().numpy()])

x = mge.tensor(np.ones(8, "float32"))
R.seed(3)
d = trace(lambda x: F.nn.dropout(x, 0.5), symbolic=True)
show("traced dropout", [d(x).numpy() for _ in range(3)])
R.seed(3)
p = trace(lambda: R.permutation(6), symbolic=True)
show("traced permutation", [p().numpy() for _ in range(3)])

R.seed(7)
h = trace(lambda x: (R.uniform(size=(2,)) + x * 0, R.normal(size=(2,))), symbolic=True,
          capture_as_const=True)
h(mge.tensor([1.0]))
path = os.path.join(tempfile.mkdtemp(), "rng.mge")
h.dump(path, arg_names=["x"], optimize_for_inference=False)
for _ in range(2):
    model = GraphInference(path)
    for run in range(3):
        show(f"loaded run {run + 1}", model.run(np.array([1.0], np.float32)).values())
