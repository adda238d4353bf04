"""Golden data: MegEngine 1.13's dumps of traced functions drawing random numbers with
seed 7 (run with /work/shared/megref/mpy; writes megengine_rng_seed7.mge and
megengine_rng_params_seed7.mge beside this file). tests/test_random.py dumps the same
functions with megtrace and checks that MegEngine Lite computes the same numbers from
both files."""
import os

import numpy as np

import megengine as mge
import megengine.random as R
from megengine.jit import trace

HERE = os.path.dirname(os.path.abspath(__file__))


def uniform_normal(x):
    return x + R.uniform(size=(3,)) + R.normal(1.0, 2.0, size=(3,))


def gamma_beta_poisson(x):
    return x + R.gamma(2.0, 1.5, size=(3,)) + R.beta(2.0, 3.0, size=(3,)) + \
        R.poisson(4.0, size=(3,))


def main():
    for fn, name in ((uniform_normal, "megengine_rng_seed7.mge"),
                     (gamma_beta_poisson, "megengine_rng_params_seed7.mge")):
        R.seed(7)
        f = trace(fn, symbolic=True, capture_as_const=True)
        f(mge.tensor(np.zeros(3, np.float32)))
        f.dump(os.path.join(HERE, name), arg_names=["x"], optimize_for_inference=False)


if __name__ == "__main__":
    main()
