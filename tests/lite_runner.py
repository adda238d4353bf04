"""Run a .mge file in the real MegEngine Lite 1.13 runtime (executed in a subprocess).

usage: python lite_runner.py LITE_DIR MODEL INPUTS.npz OUTPUTS.npz
Writes every network output, by name, to OUTPUTS.npz. Standalone: it imports nothing
from megtrace, so a crash in Lite cannot take the test process down.
"""
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
    lite = _import_lite(lite_dir)
    net = lite.LiteNetwork()
    net.load(model)
    feeds = np.load(inputs_path)
    names = list(net.get_all_input_name())
    for name in names:
        if name not in feeds:
            raise SystemExit(f"lite_runner: the model wants input {name!r}; given {list(feeds)}")
        net.get_io_tensor(name).set_data_by_copy(np.ascontiguousarray(feeds[name]))
    net.forward()
    net.wait()
    outs = {n: net.get_io_tensor(n).to_numpy().copy() for n in net.get_all_output_name()}
    np.savez(outputs_path, **outs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:5]))
