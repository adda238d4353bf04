"""The elemwise/math/tensor functionals added for MegEngine parity dump to .mge files that
the real MegEngine Lite 1.13 runtime runs to megtrace's eager results."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.graph_io import load_graph
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
    feed = {f"x{i}": x for i, x in enumerate(inputs)}
    outs = lite.run_model(path, feed)
    ours = load_graph(str(path)).run(**feed)       # and megtrace reads it back
    for name, w in zip(names, want):
        w = w.numpy()
        np.testing.assert_allclose(np.asarray(ours[name]).reshape(w.shape), w, rtol=tol,
                                   atol=tol, equal_nan=True)
        got = outs[name]
        if w.ndim == 0:          # MegEngine's graphs have no 0-d tensors: scalars are (1,)
            w = w.reshape(1)
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


def test_sort_topk_dot_matmul_in_lite(lite, rng, tmp_path):
    x = rng.permutation(28).reshape(4, 7).astype(np.float32)
    v = rng.uniform(-1, 1, size=(7,)).astype(np.float32)
    _check_in_lite(lite, tmp_path, lambda a, b: (
        *F.sort(a, descending=True), F.argsort(b), *F.topk(a, 3, kth_only=True),
        *F.topk(b, 2), F.dot(b, b), F.matmul(b, a.T), F.matmul(a, b),
        F.var(a, axis=1), F.std(a), F.norm(a, axis=0), F.normalize(a, axis=1)), x, v)


def test_diag_gather_scatter_copy_in_lite(lite, rng, tmp_path):
    x = rng.uniform(-1, 1, size=(4, 5)).astype(np.float32)
    vec = rng.uniform(-1, 1, size=(3,)).astype(np.float32)
    index = np.array([[0, 2, 1, 3, 0], [3, 1, 0, 2, 1]], np.int32)
    src = rng.uniform(-1, 1, size=(2, 5)).astype(np.float32)
    _check_in_lite(lite, tmp_path, lambda a, d, i, s: (
        F.diag(a, 1), F.diag(d, -1), F.gather(a, 0, i), F.scatter(a, 0, i, s), F.copy(a)),
        x, vec, index, src)


def test_roll_repeat_tile_split_in_lite(lite, rng, tmp_path):
    x = rng.uniform(-1, 1, size=(3, 5)).astype(np.float32)
    _check_in_lite(lite, tmp_path, lambda a: (
        F.roll(a, (1, -2), (0, 1)), F.roll(a, 4), F.repeat(a, 2, axis=1), F.tile(a, (2, 1, 2)),
        *F.split(a, 3, axis=1), F.swapaxes(a, 0, 1)), x)


def test_matinv_in_lite(lite, rng, tmp_path):
    x = (rng.uniform(0, 1, size=(2, 3, 3)) + 3 * np.eye(3)).astype(np.float32)
    _check_in_lite(lite, tmp_path, lambda a: F.matinv(a), x, tol=1e-4)
