"""The order in which MegEngine 1.13's GraphInference takes positional inputs (run in the
megref chroot from the checkout:
`../shared/megref/mpy tests/data/make_megengine_graph_inference_order.py`).

f(a, b) = (relu(linear(a)) + b, a.sum(1)) and g(x, y, z) = (z * 2 - x, y + 1) are dumped
with arg_names in argument order; writes megengine_graph_inference/<f|g>.mge and
megengine_graph_inference/io.npz (inputs and MegEngine's outputs) and prints the order
of GraphInference's inputs, for all outputs and for each output alone.

Printed by MegEngine 1.13:
f: ['b', 'a']
f outputs=['y']: ['b', 'a']
f outputs=['s']: ['a']
g: ['z', 'y', 'x']
g outputs=['d']: ['z', 'x']
g outputs=['e']: ['y']

The order is cgtools.get_dep_vars': breadth first from the outputs, each opr's inputs
in order, not the traced function's; an input no chosen output needs is not an input.
"""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.jit import trace
from megengine.utils.comp_graph_tools import GraphInference

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_graph_inference")
rng = np.random.RandomState(0)
linear = M.Linear(4, 3)


def f(a, b):
    return F.relu(linear(a)) + b, a.sum(1)


def g(x, y, z):
    return z * 2 - x, y + 1


def _f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


CASES = {"f": (f, {"a": _f32(2, 4), "b": _f32(2, 3)}, ["y", "s"]),
         "g": (g, {"x": _f32(2, 3), "y": _f32(2, 3), "z": _f32(2, 3)}, ["d", "e"])}


def main():
    os.makedirs(OUT, exist_ok=True)
    io = {}
    for name, (fn, inputs, out_names) in CASES.items():
        traced = trace(fn, symbolic=True, capture_as_const=True)
        outs = traced(*[mge.tensor(v) for v in inputs.values()])
        path = os.path.join(OUT, f"{name}.mge")
        traced.dump(path, arg_names=list(inputs), output_names=out_names)
        io.update({f"{name}.{k}": v for k, v in inputs.items()})
        io.update({f"{name}.{k}": o.numpy() for k, o in zip(out_names, outs)})
        print(f"{name}: {list(GraphInference(path)._inp_dict)}")
        for out in out_names:
            print(f"{name} outputs=[{out!r}]: {list(GraphInference(path, [out])._inp_dict)}")
    np.savez(os.path.join(OUT, "io.npz"), **io)


if __name__ == "__main__":
    main()
