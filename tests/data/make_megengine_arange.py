"""Golden F.arange / F.linspace values from real MegEngine 1.13 (float32, bit exact).

Run with the megref chroot from the project root:
    /work/shared/megref/mpy tests/data/make_megengine_arange.py
"""
import json
from pathlib import Path

import megengine.functional as F

ARANGE = [[5], [0, 1, 0.3], [5, 0, -1.5], [1, 10, 2], [0.1, 2.3, 0.7], [-3, 3, 0.4],
          [2.5, 9.75, 0.25]]
LINSPACE = [[0, 1, 7], [3, 10, 8], [-1.3, 2.9, 11], [1, 9, 9]]

out = {"arange": [[a, F.arange(*a).numpy().tolist()] for a in ARANGE],
       "linspace": [[a, F.linspace(*a).numpy().tolist()] for a in LINSPACE]}
Path(__file__).with_name("megengine_arange_linspace.json").write_text(json.dumps(out, indent=1))
