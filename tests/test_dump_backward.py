"""Dumping a trace whose function ran a backward pass (MegEngine's
test_dump_backward_graph): the gradient ops are ordinary MegEngine oprs in the file, so
the dump reruns forward and backward in megtrace's GraphInference and in the real
MegEngine Lite 1.13; checked against derivatives worked out by hand in NumPy."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.utils.comp_graph_tools as cgtools
from megtrace.autodiff import GradManager
from megtrace.jit import trace


def _traced_step(x0):
    """y = sum(exp(x0) * x1); returns y and dy/dx0 = exp(x0) * x1."""
    gm = GradManager().attach(x0)

    @trace(symbolic=True, capture_as_const=True)
    def f(x0, x1):
        with gm:
            y = (F.exp(x0) * x1).sum()
            gm.backward(y)
            dx0 = x0.grad
        return y, dx0
    return f


def _reference(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.sum(np.exp(a) * b), np.exp(a) * b


@pytest.fixture
def dumped(rng, tmp_path):
    a = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    b = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    x0 = mge.tensor(a)
    f = _traced_step(x0)
    y, dx0 = f(x0, mge.tensor(b))
    y_ref, dx_ref = _reference(a, b)
    np.testing.assert_allclose(y.numpy(), y_ref, rtol=1e-5)
    np.testing.assert_allclose(dx0.numpy(), dx_ref, rtol=1e-5)
    path = tmp_path / "fwd_bwd.mge"
    f.dump(path, arg_names=["x0", "x1"], output_names=["y", "dx0"],
           optimize_for_inference=False)
    return path


def test_dump_of_forward_and_backward_runs_in_graph_inference(dumped, rng):
    a = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    b = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    out = cgtools.GraphInference(str(dumped)).run(inp_dict={"x0": a, "x1": b})
    y_ref, dx_ref = _reference(a, b)
    np.testing.assert_allclose(np.asarray(out["y"]).reshape(()), y_ref, rtol=1e-5)
    np.testing.assert_allclose(out["dx0"], dx_ref, rtol=1e-5)


@pytest.mark.lite
def test_dump_of_forward_and_backward_runs_in_megengine_lite(dumped, lite, rng):
    a = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    b = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    out = lite.run_model(dumped, {"x0": a, "x1": b})
    y_ref, dx_ref = _reference(a, b)
    np.testing.assert_allclose(np.asarray(out["y"]).reshape(()), y_ref, rtol=1e-5)
    np.testing.assert_allclose(out["dx0"], dx_ref, rtol=1e-5)
