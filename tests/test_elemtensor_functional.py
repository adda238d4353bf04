"""MegEngine semantics of the elemwise/math/tensor functionals that the op samples do not
show: compositions (roll, repeat, tile, meshgrid, norm, var), argument handling and
MegEngine's error messages. References are NumPy; behaviours were checked against
MegEngine 1.13 (see the docstrings)."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F


def test_svd_reconstructs(rng):
    x = rng.uniform(-1, 1, size=(2, 5, 3)).astype(np.float32)
    u, s, vh = F.svd(mge.tensor(x))
    assert (u.shape, s.shape, vh.shape) == ((2, 5, 3), (2, 3), (2, 3, 3))
    back = np.einsum("bik,bk,bkj->bij", u.numpy(), s.numpy(), vh.numpy())
    np.testing.assert_allclose(back, x, atol=1e-5)
    assert np.all(np.diff(s.numpy(), axis=-1) <= 0)


def test_split_sizes_and_errors():
    """MegEngine 1.13: 20 into 3 parts is 7, 7, 6; its exact messages for bad sections."""
    x = mge.tensor(np.zeros((10, 20), np.float32))
    assert [t.shape[1] for t in F.split(x, 3, axis=-1)] == [7, 7, 6]
    assert [t.shape[1] for t in F.split(x, 6, axis=1)] == [4, 4, 3, 3, 3, 3]
    assert [t.shape[1] for t in F.split(x, [6, 6, 17], axis=1)] == [6, 0, 11, 3]
    with pytest.raises(ValueError, match=r"^Invalid nsplits_or_secions: \[3, 2, 5\]$"):
        F.split(x, [3, 2, 5], axis=1)
    with pytest.raises(ValueError, match="cannot be split into 21 sections"):
        F.split(x, 21, axis=1)
    with pytest.raises(ValueError, match="Number sections must be larger than 0"):
        F.split(x, 0, axis=1)


@pytest.mark.parametrize("shift,axis", [(1, -1), (100, 0), (-100, 0), ((-1, 1), (0, 1)),
                                        (4, None)])
def test_roll_matches_numpy(shift, axis, rng):
    x = rng.uniform(-1, 1, size=(2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(F.roll(mge.tensor(x), shift, axis).numpy(),
                                  np.roll(x, shift, axis))


@pytest.mark.parametrize("repeats,axis", [(2, 0), (3, 1), (2, None)])
def test_repeat_matches_numpy(repeats, axis, rng):
    x = rng.uniform(-1, 1, size=(2, 3)).astype(np.float32)
    np.testing.assert_array_equal(F.repeat(mge.tensor(x), repeats, axis).numpy(),
                                  np.repeat(x, repeats, axis))


@pytest.mark.parametrize("reps", [(2, 3), (1, 2, 1), (2, 1, 3)])
def test_tile_matches_numpy(reps, rng):
    x = rng.uniform(-1, 1, size=(2, 3)).astype(np.float32)
    np.testing.assert_array_equal(F.tile(mge.tensor(x), reps).numpy(), np.tile(x, reps))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_matches_numpy(indexing):
    a, b = np.arange(3, dtype=np.float32), np.arange(2, dtype=np.float32)
    got = F.meshgrid(mge.tensor(a), mge.tensor(b), indexing=indexing)
    for g, w in zip(got, np.meshgrid(a, b, indexing=indexing)):
        np.testing.assert_array_equal(g.numpy(), w)


def test_split_and_meshgrid_return_tuples():
    """As MegEngine 1.13's (tests/data/show_megengine_return_types.py): a list would
    differ in `==` against a tuple and in being mutable."""
    x = mge.tensor(np.arange(4, dtype=np.float32).reshape(1, 4))
    assert type(F.split(x, 2, axis=1)) is tuple
    assert type(F.split(x, [1, 3], axis=1)) is tuple
    assert type(F.meshgrid(mge.tensor([1, 2]), mge.tensor([3, 4, 5]))) is tuple
    assert type(F.meshgrid(mge.tensor([1, 2]), indexing="ij")) is tuple


def test_norm_var_std_semantics():
    """MegEngine 1.13: ord=inf ignores axis; ord=0 counts non-zeros as int32; var is the
    population variance; a matrix needs an axis."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    t = mge.tensor(x)
    assert F.norm(t, ord=np.inf, axis=1).numpy() == 3
    zeros = F.norm(mge.tensor([1.0, 0.0, 2.0]), ord=0)
    assert zeros.dtype == np.int32 and zeros.numpy() == 2
    np.testing.assert_allclose(F.norm(t, axis=1).numpy(), np.sqrt((x ** 2).sum(1)), rtol=1e-6)
    np.testing.assert_allclose(F.var(t, axis=0).numpy(), x.var(0), rtol=1e-6)
    np.testing.assert_allclose(F.std(t).numpy(), x.std(), rtol=1e-6)
    with pytest.raises(TypeError, match="axis is required unless input is a vector"):
        F.norm(t)


def test_topk_kth_only_returns_value_and_index():
    x = np.array([[4, 1, 7, 3], [2, 9, 5, 0]], np.int32)
    values, index = F.topk(mge.tensor(x), 2, kth_only=True)
    np.testing.assert_array_equal(values.numpy(), [4, 5])
    np.testing.assert_array_equal(index.numpy(), [0, 2])
    v1, i1 = F.topk(mge.tensor(x[0]), 3, descending=False, kth_only=True)
    assert v1.shape == () and v1.numpy() == 4 and i1.numpy() == 0


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)),
                                   ((2, 2, 3), (3,)), ((3,), (2, 3, 4))])
def test_matmul_vector_operands(sa, sb, rng):
    a = rng.uniform(-1, 1, size=sa).astype(np.float32)
    b = rng.uniform(-1, 1, size=sb).astype(np.float32)
    got = F.matmul(mge.tensor(a), mge.tensor(b)).numpy()
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-6)


def test_clip_tensor_bounds_and_crossed_bounds():
    """MegEngine 1.13 clips as minimum(maximum(x, lower), upper)."""
    x = mge.tensor([0.5, -0.2, 0.1])
    np.testing.assert_allclose(F.clip(x, mge.tensor(0.0), mge.tensor([0.3, 0.3, 0.05])).numpy(),
                               [0.3, 0.0, 0.05])
    np.testing.assert_allclose(F.clip(x, 0.3, 0.1).numpy(), [0.1, 0.1, 0.1])
    assert F.clip(mge.tensor([1, 2, 3]), 0.5, 2.5).dtype == np.float32


def test_reduce_rejects_duplicate_axes():
    with pytest.raises(AssertionError, match=r"axis \(-1, 1\) contains duplicated indices"):
        F.sum(mge.tensor(np.zeros((2, 3), np.float32)), axis=(-1, 1))


def test_broadcast_to_none_keeps_input_size():
    x = mge.tensor(np.zeros((1, 2, 3), np.float32))
    assert F.broadcast_to(x, (1, None, 2, 3)).shape == (1, 1, 2, 3)
    with pytest.raises(ValueError, match="size connot be `None` for new axis"):
        F.broadcast_to(x, (None, 1, 2, 3))
    with pytest.raises(ValueError, match=r"expect shape\[1\] >= 0"):
        F.broadcast_to(x, (1, -1, 3))


def test_cond_take_and_concat_devices():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    m = np.array([[True, False, True], [False, True, True]])
    values, index = F.cond_take(mge.tensor(m), mge.tensor(x))
    np.testing.assert_array_equal(values.numpy(), x[m])
    np.testing.assert_array_equal(index.numpy(), np.flatnonzero(m))
    a = mge.tensor(x, device="cpu0")
    b = mge.tensor(x, device="cpu1")
    assert str(F.concat([a, b], device="cpu1").device).startswith("cpu1")
    with pytest.raises(ValueError, match="different devices"):
        F.concat([a, b])


def test_integer_inputs_of_float_functions():
    """MegEngine computes trig/hyperbolic functions of integers in float32; sign keeps
    the integer dtype; isnan/isinf of integers are all False."""
    i = mge.tensor([1, -2, 3])
    assert F.tan(i).dtype == np.float32 and F.atan(i).dtype == np.float32
    assert F.sign(i).dtype == np.int32
    assert not F.isnan(i).numpy().any() and F.isnan(i).shape == (3,)


def test_arg_reduce_over_several_axes():
    """MegEngine 1.13 (checked): the axes are reduced last first, each later step taking
    the arg of the previous indices; here 0, [[0]] and 1."""
    x = mge.tensor(np.array([[3., 1, 4], [1, 5, 9], [2, 6, 5]], np.float32))
    assert F.argmax(x, axis=(0, 1)).numpy() == 0
    np.testing.assert_array_equal(F.argmax(x, axis=(-1, 0), keepdims=True).numpy(), [[0]])
    assert F.argmin(x, axis=(1, 0)).numpy() == 1
    with pytest.raises(AssertionError, match="can not set axis=None and keepdims=True"):
        F.argmax(x, keepdims=True)


@pytest.mark.parametrize("symbolic", [False, True])
def test_matinv_and_svd_trace(symbolic, rng):
    """Relax has no matrix inverse or SVD: traced graphs holding them run on the NumPy
    interpreter."""
    from megtrace.jit import trace
    x = (rng.uniform(0, 1, size=(3, 4, 4)) + 4 * np.eye(4)).astype(np.float32)
    inverse = trace(F.matinv, symbolic=symbolic)
    singular = trace(lambda t: F.svd(t)[1], symbolic=symbolic)
    for _ in range(2):
        np.testing.assert_allclose(inverse(mge.tensor(x)).numpy(), np.linalg.inv(x),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(singular(mge.tensor(x)).numpy(),
                                   np.linalg.svd(x.astype(np.float64))[1], rtol=1e-4)


def test_arange_linspace_match_megengine_bit_for_bit():
    """Golden float32 values from MegEngine 1.13 (tests/data/make_megengine_arange.py)."""
    import json
    from pathlib import Path
    golden = json.loads((Path(__file__).parent / "data" /
                         "megengine_arange_linspace.json").read_text())
    for args, want in golden["arange"]:
        np.testing.assert_array_equal(F.arange(*args).numpy(), np.array(want, np.float32))
    for args, want in golden["linspace"]:
        np.testing.assert_array_equal(F.linspace(*args).numpy(), np.array(want, np.float32))


def test_creation_dtypes_and_devices():
    assert F.full((2,), True).dtype == np.bool_ and F.full(3, 4).dtype == np.int32
    assert F.full((2, 2), 1.5).dtype == np.float32
    assert F.zeros(mge.tensor([2, 3])).shape == (2, 3)
    assert str(F.ones((2,), device="cpu1").device).startswith("cpu1")
    assert F.zeros_like(mge.tensor([1, 2])).dtype == np.int32
    np.testing.assert_array_equal(F.linspace(0, 10, 4, dtype="int32").numpy(), [0, 3, 6, 10])
    np.testing.assert_array_equal(F.eye(2, 3, dtype="int32").numpy(), np.eye(2, 3))


@pytest.mark.parametrize("symbolic", [False, True])
def test_traced_max_min_propagate_nan(symbolic):
    """MegEngine's max/min of values holding a NaN is NaN (test_math's reduce cases), in
    traced graphs too (TVM's reductions alone would skip it)."""
    from megtrace.jit import trace
    x = np.array([[[1, 2, np.nan, 4], [8, 6, 5, 2], [2, 3, 4, 5]]], np.float32)
    f = trace(lambda a: (F.max(a), F.min(a, axis=2), F.max(a, axis=1, keepdims=True)),
              symbolic=symbolic)
    for _ in range(2):
        top, low, cols = (t.numpy() for t in f(mge.tensor(x)))
    assert np.isnan(top)
    np.testing.assert_array_equal(low, [[np.nan, 2, 2]])
    np.testing.assert_array_equal(cols, [[[8, 6, np.nan, 5]]])


def test_where_checks_its_arguments_as_megengine():
    m = mge.tensor([True, False])
    out = F.where(m, mge.tensor([1, 2]), mge.tensor([1.5, 2.5]))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.5])
    with pytest.raises(ValueError, match="^mask must be bool$"):
        F.where(mge.tensor([1, 0]), mge.tensor([1.0]), mge.tensor([2.0]))
    with pytest.raises(TypeError, match="^input x must be a tensor$"):
        F.where(m, 1.0, mge.tensor([2.0]))
