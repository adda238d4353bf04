"""Golden data: MegEngine 1.13's dumps of traced F.random.permutation(n) (a PermutationRNG
opr), permutation(tensor) / shuffle (ShuffleRNG) and F.nn.dropout (Dropout), seed 5
(run with MEGREF_BIND=<repo> /work/shared/megref/mpy; writes megengine_rng_perm/*.mge
beside this file). tests/test_random_oprs.py reads them with megtrace."""
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.random as R
from megengine.jit import trace

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_rng_perm")


def permutation(x):
    return x + R.permutation(6, dtype="float32")


def permutation_int16(x):
    return R.permutation(7, dtype="int16")


def shuffled(x):
    return R.permutation(x)


def dropout(x):
    return F.nn.dropout(x, 0.25, training=True)


def main():
    os.makedirs(HERE, exist_ok=True)
    x6 = mge.tensor(np.arange(6, dtype=np.float32))
    x = mge.tensor(np.arange(12, dtype=np.float32).reshape(6, 2))
    for fn, arg in ((permutation, x6), (permutation_int16, x6), (shuffled, x),
                    (dropout, x)):
        R.seed(5)
        f = trace(fn, symbolic=True, capture_as_const=True)
        f(arg)
        f.dump(os.path.join(HERE, f"{fn.__name__}.mge"), arg_names=["x"],
               optimize_for_inference=False)


if __name__ == "__main__":
    main()
