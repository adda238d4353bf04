"""Golden data: what MegEngine 1.13's trace computes at opt_level 0 and 1 for expressions
its graph optimizer simplifies (run with /work/shared/megref/mpy; writes the .json
beside this file). The cases are shared with tests/test_arith_simplify.py."""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megengine as mge  # noqa: E402
import megengine.functional as F  # noqa: E402
from megengine.jit import trace  # noqa: E402

from arith_simplify_cases import CASES  # noqa: E402


def main():
    out = {}
    for name, (fn, value) in CASES(F).items():
        row = {}
        for level in (0, 1):
            f = trace(fn, symbolic=True, opt_level=level, capture_as_const=True)
            with np.errstate(all="ignore"):
                got = float(f(mge.tensor(value)).numpy().item())
            row[str(level)] = "nan" if math.isnan(got) else got
        out[name] = row
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "arith_simplify_megengine.json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
