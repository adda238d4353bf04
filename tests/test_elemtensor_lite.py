"""The elemwise/math/tensor functionals added for MegEngine parity dump to .mge files that
the real MegEngine Lite 1.13 runtime runs to megtrace's eager results."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace

pytestmark = pytest.mark.lite


def _check_in_lite(lite, tmp_path, fn, *inputs, tol=1e-5):
    @trace(symbolic=True, capture_as_const=True)
    def traced(*xs):
        return fn(*xs)

    tensors = [mge.tensor(x) for x in inputs]
    traced(*tensors)
    want = fn(*tensors)
    want = want if isinstance(want, (tuple, list)) else (want,)
    names = [f"y{i}" for i in range(len(want))]
    path = tmp_path / "model.mge"
    traced.dump(path, arg_names=[f"x{i}" for i in range(len(inputs))], output_names=names)
    outs = lite.run_model(path, {f"x{i}": x for i, x in enumerate(inputs)})
    for name, w in zip(names, want):
        w = w.numpy()
        got = outs[name]
        assert got.shape == w.shape and got.dtype == w.dtype, name
        if w.dtype == np.bool_ or w.dtype.kind == "i":
            np.testing.assert_array_equal(got, w)
        else:
            np.testing.assert_allclose(got, w, rtol=tol, atol=tol, equal_nan=True)


def test_trig_hyperbolic_sign_in_lite(lite, rng, tmp_path):
    x = rng.uniform(-0.9, 0.9, size=(3, 4)).astype(np.float32)
    big = rng.uniform(1.1, 4, size=(3, 4)).astype(np.float32)
    _check_in_lite(lite, tmp_path, lambda a, b: (
        F.tan(a), F.asin(a), F.acos(a), F.atan(a), F.sinh(a), F.cosh(a), F.asinh(a),
        F.acosh(b), F.atanh(a), F.sign(a), F.atan2(a, b), F.logaddexp(a, b)), x, big)


def test_isnan_isinf_in_lite(lite, tmp_path):
    x = np.array([[1.0, np.nan, np.inf], [-np.inf, 0.0, -2.0]], np.float32)
    # Lite cannot hand out bool tensors: the test reads them as int32
    _check_in_lite(lite, tmp_path, lambda a: (F.isnan(a).astype("int32"),
                                              F.isinf(a).astype("int32")), x)
