"""How MegEngine 1.13's trace.dump names a dump's inputs from arg_names (run with
/work/shared/megref/mpy; prints, writes nothing). Each input has its own shape, so the
printed (name, shape) pairs say which argument got which name. Output on 1.13.0, CPU:

fk None -> [('arg_0', (2, 3)), ('y', (1, 3))]
fk ['x'] -> [('x', (2, 3)), ('y', (1, 3))]
fk 'x' -> [('x', (2, 3)), ('y', (1, 3))]
fk ['x', 'y'] -> ValueError: wrong number of arg_names, should be 1 values
fk ['y'] -> [('y[0]', (2, 3)), ('y[1]', (1, 3))]
fzy None -> [('arg_0', (2, 3)), ('y', (3,)), ('z', (1, 3))]
fzy ['x'] -> [('x', (2, 3)), ('y', (3,)), ('z', (1, 3))]
f3 None -> [('arg_0', (2, 3)), ('arg_1', (1, 3)), ('arg_2', (3,)), ('k', (1, 1))]
f3 ['a', 'b'] -> ValueError: wrong number of arg_names, should be 3 values
f3 'a' -> ValueError: wrong number of arg_names, should be 3 values
f3 [None, None, ''] -> [('h2d[0]', (2, 3)), ('h2d[2]', (1, 3)), ('h2d[4]', (3,)), ('k', (1, 1))]
f3 ['a', None, 'a'] -> [('a[0]', (2, 3)), ('a[1]', (3,)), ('h2d[2]', (1, 3)), ('k', (1, 1))]
f3 ['k', 'k', None] -> [('h2d[4]', (3,)), ('k[0]', (2, 3)), ('k[1]', (1, 3)), ('k[2]', (1, 1))]
f3 [None, 'x', 'x'] -> [('h2d[0]', (2, 3)), ('k', (1, 1)), ('x[0]', (1, 3)), ('x[1]', (3,))]

arg_names covers the positional arguments only; keyword inputs are named after their
keyword; an empty name leaves the input to h2d[<var id>] (2 * its position: an opr and
a var per input); a name several inputs share becomes name[0], name[1], ... in argument
order, positional first. (arg_names=[] makes MegEngine 1.13 crash with a segfault.)
"""
import io

import numpy as np
import megengine as mge
from megengine.jit import trace
from megengine.utils.network import Network


def _t(*shape):
    return mge.tensor(np.ones(shape, "float32"))


@trace(symbolic=True, capture_as_const=True)
def fk(x, *, y):
    return x - y


@trace(symbolic=True, capture_as_const=True)
def fzy(x, **kw):
    return x - kw["z"] * 2 + kw["y"] * 3


@trace(symbolic=True, capture_as_const=True)
def f3(x, w, v, *, k):
    return x * 2 - w + v * k


fk(_t(2, 3), y=_t(1, 3))
fzy(_t(2, 3), z=_t(1, 3), y=_t(3))
f3(_t(2, 3), _t(1, 3), _t(3), k=_t(1, 1))
CASES = [
    ("fk", fk, None), ("fk", fk, ["x"]), ("fk", fk, "x"), ("fk", fk, ["x", "y"]),
    ("fk", fk, ["y"]), ("fzy", fzy, None), ("fzy", fzy, ["x"]),
    ("f3", f3, None), ("f3", f3, ["a", "b"]), ("f3", f3, "a"),
    ("f3", f3, [None, None, ""]), ("f3", f3, ["a", None, "a"]), ("f3", f3, ["k", "k", None]),
    ("f3", f3, [None, "x", "x"]),
]
for name, f, arg_names in CASES:
    buf = io.BytesIO()
    try:
        f.dump(buf, arg_names=arg_names, optimize_for_inference=False)
    except Exception as e:
        print(f"{name} {arg_names!r} -> {type(e).__name__}: {e}")
        continue
    buf.seek(0)
    got = sorted((v.name, tuple(v.shape)) for v in Network.load(buf).input_vars)
    print(f"{name} {arg_names!r} -> {got}")
