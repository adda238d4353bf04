"""Time a .mge file in MegEngine Lite (run as a script by `megtrace bench`).

usage: python lite_timer.py LITE_DIR MODEL INPUTS.npz THREADS WARMUP ITERS OUT.npz
Writes the outputs and the per-run milliseconds (`__times_ms__`) to OUT.npz.
Standalone: it imports nothing from megtrace (it runs in its own process, so a crash
in Lite cannot take megtrace down).
"""
import sys
import time
import types

import numpy as np


def _import_lite(lite_dir: str):
    # megenginelite imports pkg_resources (gone from setuptools >= 81) only to list
    # installed packages; numpy >= 2.3 moved a helper it uses.
    sys.modules.setdefault("pkg_resources", types.SimpleNamespace(working_set=[]))
    import numpy.ctypeslib as npct
    if not hasattr(npct, "_ctype_ndarray"):
        from numpy.ctypeslib import _ctypeslib
        npct._ctype_ndarray = _ctypeslib._ctype_ndarray
    sys.path.insert(0, lite_dir)
    import megenginelite
    return megenginelite


def main(lite_dir, model, inputs_path, threads, warmup, iters, out_path) -> int:
    lite = _import_lite(lite_dir)
    net = lite.LiteNetwork()
    if int(threads) > 1:
        net.threads_number = int(threads)
    net.load(model)
    feeds = np.load(inputs_path)
    for name in net.get_all_input_name():
        net.get_io_tensor(name).set_data_by_copy(np.ascontiguousarray(feeds[name]))
    times = []
    for i in range(int(warmup) + int(iters)):
        start = time.perf_counter()
        net.forward()
        net.wait()
        if i >= int(warmup):
            times.append((time.perf_counter() - start) * 1e3)
    outs = {n: net.get_io_tensor(n).to_numpy().copy() for n in net.get_all_output_name()}
    np.savez(out_path, __times_ms__=np.array(times), **outs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:8]))
