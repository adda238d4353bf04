"""Golden data: MegEngine 1.13's dump of a traced function drawing uniform and normal
numbers with seed 7 (run with /work/shared/megref/mpy; writes megengine_rng_seed7.mge
beside this file). tests/test_random.py dumps the same function with megtrace and
checks that MegEngine Lite computes the same numbers from both files."""
import os

import numpy as np

import megengine as mge
import megengine.random as R
from megengine.jit import trace


def main():
    R.seed(7)

    @trace(symbolic=True, capture_as_const=True)
    def f(x):
        return x + R.uniform(size=(3,)) + R.normal(1.0, 2.0, size=(3,))

    f(mge.tensor(np.zeros(3, np.float32)))
    here = os.path.dirname(os.path.abspath(__file__))
    f.dump(os.path.join(here, "megengine_rng_seed7.mge"), arg_names=["x"],
           optimize_for_inference=False)


if __name__ == "__main__":
    main()
