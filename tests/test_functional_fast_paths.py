"""The common-case shortcuts of F.batch_norm (inference, 4-d, statistics of the input's
dtype) and F.conv2d (float32 pairs, default modes) against NumPy, next to the cases
that must still take the general path (flat or other-dtype statistics, mixed dtypes)."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _bn_ref(x, mean, var, w, b, eps):
    r = lambda a: np.asarray(a, np.float64).reshape(1, -1, 1, 1)     # noqa: E731
    return (x - r(mean)) / np.sqrt(r(var) + eps) * r(w) + r(b)


@pytest.mark.parametrize("form", ["4d", "flat", "float16_input", "param_float64"])
def test_batch_norm_inference_forms(rng, form):
    c = 5
    x = rng.standard_normal((2, c, 3, 4)).astype(np.float32)
    mean, var = rng.standard_normal(c), rng.random(c) + 0.5
    w, b = rng.standard_normal(c), rng.standard_normal(c)
    shape = (c,) if form == "flat" else (1, c, 1, 1)
    dtype = np.float64 if form == "param_float64" else np.float32
    stats = [mge.tensor(np.asarray(a, dtype).reshape(shape)) for a in (mean, var, w, b)]
    inp = mge.tensor(x.astype(np.float16) if form == "float16_input" else x)
    got = F.batch_norm(inp, *stats, training=False, eps=1e-3)
    assert got.dtype == inp.dtype
    tol = 2e-2 if form == "float16_input" else 1e-5
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               _bn_ref(inp.numpy().astype(np.float64), mean, var, w, b, 1e-3),
                               rtol=tol, atol=tol)


def test_batch_norm_inference_traces_one_op(rng):
    c = 3
    stats = [mge.tensor(rng.random((1, c, 1, 1)).astype(np.float32) + 0.5) for _ in range(4)]
    f = trace(lambda x: F.batch_norm(x, *stats), symbolic=True, capture_as_const=True)
    x = mge.tensor(rng.standard_normal((1, c, 2, 2)).astype(np.float32))
    f(x)
    np.testing.assert_allclose(f(x).numpy(), F.batch_norm(x, *stats).numpy(), rtol=1e-6)
    assert [n.op.name for n in f.graph.nodes] == ["batch_norm"]


def test_batch_norm_inference_without_statistics_still_refuses():
    x = mge.tensor(np.ones((1, 2, 2, 2), np.float32))
    with pytest.raises(AssertionError, match="running_mean must be provided"):
        F.batch_norm(x, None, mge.tensor(np.ones((1, 2, 1, 1), np.float32)))


def _conv_ref(x, w):
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    out = np.zeros((n, oc, h - kh + 1, wd - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("ncij,ocij->no", x[:, :, i:i + kh, j:j + kw], w)
    return out


@pytest.mark.parametrize("wdtype", [np.float32, np.float16, "array"])
def test_conv2d_float32_and_promoted_pairs(rng, wdtype):
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    weight = w if wdtype == "array" else mge.tensor(w.astype(wdtype))
    got = F.conv2d(mge.tensor(x), weight)
    assert got.dtype == np.float32
    ref_w = w.astype(np.float16).astype(np.float64) if wdtype is np.float16 else w
    np.testing.assert_allclose(got.numpy(), _conv_ref(x.astype(np.float64), ref_w),
                               rtol=1e-4, atol=1e-4)


def test_conv2d_modes_are_still_checked():
    x = mge.tensor(np.ones((1, 1, 3, 3), np.float32))
    w = mge.tensor(np.ones((1, 1, 3, 3), np.float32))
    with pytest.raises(ValueError, match="conv_mode"):
        F.conv2d(x, w, conv_mode="convolution")
    with pytest.raises(ValueError, match="compute_mode"):
        F.conv2d(x, w, compute_mode="float16")


@pytest.mark.parametrize("scalar", [0.1, 3, 2 ** 40, -7.25])
def test_float32_tensor_and_python_scalar(rng, scalar):
    """(float32 tensor, Python float/int) skips the promotion rules: the scalar becomes a
    float32 constant exactly as Tensor(scalar, dtype=float32) makes it."""
    x = rng.standard_normal((2, 3)).astype(np.float32)
    s = np.asarray(scalar).astype(np.float32)
    t = mge.tensor(x)
    for got, want in ((t + scalar, x + s), (t * scalar, x * s), (scalar - t, s - x),
                      (t / scalar, x / s), (scalar / t, s / x)):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.numpy(), want)


def test_other_scalar_pairs_still_promote():
    i = mge.tensor(np.array([1, 2], np.int32))
    assert (i * 0.5).dtype == np.float32 and (i * 2).dtype == np.int32
    f = mge.tensor(np.array([1.0, 2.0], np.float32))
    assert (f + True).dtype == np.float32
    np.testing.assert_array_equal((f + np.float64(0.25)).numpy(), [1.25, 2.25])
    with pytest.raises(TypeError, match="None"):
        f + None


@pytest.mark.parametrize("stride", [2, (2, 2), [2, 2], 2.0, np.int64(2), True])
def test_conv2d_geometry_forms(rng, stride):
    """conv2d's geometry, however given, normalizes as `pair` does (a lookup remembers
    plain int forms only)."""
    x = mge.tensor(rng.standard_normal((1, 2, 6, 6)).astype(np.float32))
    w = mge.tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    want = F.conv2d(x, w, stride=(2, 2), padding=(1, 1)).numpy() if stride is not True \
        else F.conv2d(x, w, stride=(1, 1), padding=(1, 1)).numpy()
    np.testing.assert_array_equal(F.conv2d(x, w, stride=stride, padding=1).numpy(), want)
    with pytest.raises(ValueError, match="stride"):
        F.conv2d(x, w, stride=(1, 2, 3))
    from megtrace.functional import nn
    assert all(type(v) in (int, tuple) for key in nn._GEOMETRY for v in key)
