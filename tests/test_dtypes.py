"""float16, int8/uint8/int32 and bool tensors: eager and traced agree, promotion rules."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def test_float16_model_traced_matches_eager(rng):
    x = mge.tensor(rng.uniform(-1, 1, size=(4, 8)).astype(np.float16))
    w = mge.tensor(rng.uniform(-1, 1, size=(6, 8)).astype(np.float16))

    @trace(symbolic=True)
    def f(a):
        return F.softmax(F.gelu(F.linear(a, w)), axis=-1)

    out = f(x)
    assert out.dtype == np.float16
    assert rel_err(out.numpy(), F.softmax(F.gelu(F.linear(x, w)), axis=-1).numpy()) <= 2e-3
    assert rel_err(f(x).numpy(), out.numpy()) <= 2e-3


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_integer_elementwise_traced(dtype, rng):
    a = mge.tensor(rng.integers(0, 10, size=(3, 4)).astype(dtype))
    b = mge.tensor(rng.integers(1, 10, size=(3, 4)).astype(dtype))

    @trace
    def f(x, y):
        return F.maximum(x + y, y * 2), x < y, F.sum(x, axis=1)

    for _ in range(2):
        big, less, total = f(a, b)
        assert big.dtype == np.dtype(dtype) and less.dtype == np.bool_
        np.testing.assert_array_equal(big.numpy(), np.maximum(a.numpy() + b.numpy(), b.numpy() * 2))
        np.testing.assert_array_equal(less.numpy(), a.numpy() < b.numpy())
        np.testing.assert_array_equal(total.numpy(), a.numpy().sum(axis=1).astype(dtype))


def test_bool_ops_and_where(rng):
    x = mge.tensor(rng.uniform(-1, 1, size=(5,)).astype(np.float32))

    @trace
    def f(v):
        mask = (v > 0) & ~(v > 0.5)
        return F.where(mask, v, F.zeros_like(v)), mask.astype("int32").sum()

    for _ in range(2):
        y, count = f(x)
        xs = x.numpy()
        keep = (xs > 0) & (xs <= 0.5)
        np.testing.assert_allclose(y.numpy(), np.where(keep, xs, 0))
        assert int(count.numpy()) == keep.sum()


def test_promotion_inserts_typecvt():
    a = mge.tensor(np.array([1, 2], np.int32))
    b = mge.tensor(np.array([0.5, 0.5], np.float32))
    assert (a + b).dtype == np.float32
    assert (a.astype("float16") + 1).dtype == np.float16
    assert mge.tensor([True, False]).dtype == np.bool_
