"""Run a .mge file in the real MegEngine Lite 1.13 runtime (executed in a subprocess).

usage: python lite_runner.py LITE_DIR MODEL INPUTS.npz OUTPUTS.npz
       python lite_runner.py LITE_DIR --batch JOBS.json
Writes every network output, by name, to OUTPUTS.npz. With --batch, JOBS.json lists
[model, inputs, outputs] triples run in this one process; a model Lite refuses gets its
error text written to OUTPUTS.npz + ".error" instead. Standalone: it imports nothing
from megtrace, so a crash in Lite cannot take the test process down.
"""
import os
import sys
import types

import numpy as np


def _import_lite(lite_dir: str):
    # megenginelite imports pkg_resources (gone from setuptools >= 81) only to list
    # installed packages; an empty working set is all it needs.
    sys.modules.setdefault("pkg_resources", types.SimpleNamespace(working_set=[]))
    import numpy.ctypeslib as npct
    if not hasattr(npct, "_ctype_ndarray"):      # moved in numpy >= 2.3
        from numpy.ctypeslib import _ctypeslib
        npct._ctype_ndarray = _ctypeslib._ctype_ndarray
    sys.path.insert(0, lite_dir)
    import megenginelite
    return megenginelite


def main(lite_dir: str, model: str, inputs_path: str, outputs_path: str) -> int:
    run(_import_lite(lite_dir), model, inputs_path, outputs_path)
    return 0


def batch(lite_dir: str, jobs_path: str) -> int:
    import json
    lite = _import_lite(lite_dir)
    with open(jobs_path) as f:
        jobs = json.load(f)
    for model, inputs_path, outputs_path in jobs:
        try:
            run(lite, model, inputs_path, outputs_path)
        except Exception as e:  # noqa: BLE001 -- Lite's refusal is the result to report
            with open(outputs_path + ".error", "w") as f:
                f.write(f"{type(e).__name__}: {e}")
    return 0


def run(lite, model: str, inputs_path: str, outputs_path: str) -> None:
    net = lite.LiteNetwork()
    net.load(model)
    feeds = np.load(inputs_path)
    names = list(net.get_all_input_name() or [])     # None for a model without inputs
    for name in names:
        if name not in feeds:
            raise SystemExit(f"lite_runner: the model wants input {name!r}; given {list(feeds)}")
        net.get_io_tensor(name).set_data_by_copy(np.ascontiguousarray(feeds[name]))
    net.forward()
    net.wait()
    outs = {n: net.get_io_tensor(n).to_numpy().copy() for n in net.get_all_output_name()}
    part = outputs_path + ".part"        # renamed when complete: lite_runtime.run_models
    with open(part, "wb") as f:          # takes an existing file as a finished job, and
        np.savez(f, **outs)              # a runner it kills may be writing one
    os.replace(part, outputs_path)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "--batch":
        raise SystemExit(batch(sys.argv[1], sys.argv[3]))
    raise SystemExit(main(*sys.argv[1:5]))
