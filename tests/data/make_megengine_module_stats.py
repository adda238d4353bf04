"""Golden `module_stats` results from the real MegEngine 1.13 for tests/test_module_stats.py.

Run in the megref chroot: /work/shared/megref/mpy tests/data/make_megengine_module_stats.py
(writes tests/data/megengine_module_stats.json)."""
import json
import os
import sys

import megengine

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from module_stats_model import stats  # noqa: E402

golden = {"input_shapes": stats(megengine, False), "inputs": stats(megengine, True)}
with open(os.path.join(HERE, "megengine_module_stats.json"), "w") as f:
    json.dump(golden, f, indent=1, sort_keys=True)
print(golden["inputs"]["total"])
