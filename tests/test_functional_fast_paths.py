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
