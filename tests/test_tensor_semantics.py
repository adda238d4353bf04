"""Tensor arithmetic, dtypes and copies as MegEngine 1.13 has them: the expected values
and dtypes are what real MegEngine printed (tests/data/show_megengine_tensor_semantics.py,
whose docstring holds its output); the cases are the same expressions."""
import math
import warnings

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace

T = mge.Tensor


def _operands():
    return dict(m=T([True, False, True]), i=T([1, 2, 3]), h=T([1., 2., 3.], dtype="float16"),
                i8=T(np.array([1, 2, 3], "int8")), u=T(np.array([1, 2, 9], "uint8")),
                a=T([3, -4, 5, -7, 7]), b=T([3, 3, -3, 2, -2]),
                fa=T([3., -4., 5.5, -7., 7.]), fb=T([3., 3., -3., 2., -2.]))


MEGENGINE = [  # expression, dtype, value (real MegEngine 1.13)
    ("1 - m", "float32", [0.0, 1.0, 0.0]),
    ("m * 2", "float32", [2.0, 0.0, 2.0]),
    ("m + 1", "float32", [2.0, 1.0, 2.0]),
    ("m / 2", "float32", [0.5, 0.0, 0.5]),
    ("m == 2", "bool", [False, False, False]),
    ("m < 2", "bool", [True, True, True]),
    ("(m * 10).sum()", "float32", 20.0),
    ("m * i", "float32", [1.0, 0.0, 3.0]),
    ("m * h", "float32", [1.0, 0.0, 3.0]),
    ("m - u", "float32", [0.0, -2.0, -8.0]),
    ("h * u", "float32", [1.0, 4.0, 27.0]),
    ("h * i8", "float32", [1.0, 4.0, 9.0]),
    ("i8 * i", "int32", [1, 4, 9]),
    ("m & m", "bool", [True, False, True]),
    ("a % 3", "int32", [0, 2, 2, 2, 1]),
    ("7 % b", "int32", [1, 1, -2, 1, -1]),
    ("F.mod(a, b)", "int32", [0, 2, -1, 1, -1]),
    ("fa % fb", "float32", [0.0, -1.0, 2.5, -1.0, 1.0]),
    ("F.floor(a)", "int32", [3, -4, 5, -7, 7]),
    ("F.ceil(a)", "int32", [3, -4, 5, -7, 7]),
    ("F.round(a)", "int32", [3, -4, 5, -7, 7]),
    ("round(T(1.5))", "float32", 2.0),
    ("round(T([-2.5, 0.4]))", "float32", [-3.0, 0.0]),
    ("math.floor(T(2.5))", "float32", 2.0),
    ("math.ceil(T([2.5, -1.2]))", "float32", [3.0, -1.0]),
    ("T([1, 2]) << 1", "int32", [2, 4]),
    ("T([4, 9]) >> 1", "int32", [2, 4]),
    ("1 << T([1, 2])", "int32", [2, 4]),
]


@pytest.mark.parametrize("expr,dtype,want", MEGENGINE, ids=[c[0] for c in MEGENGINE])
def test_arithmetic_dtypes_and_values_are_megengines(expr, dtype, want):
    """A bool mask beside a number or another dtype computes in float32, float16 beside
    another dtype counts as float32, integer % floors, floor/ceil/round keep integers,
    and round()/math.floor()/<< give Tensors."""
    got = eval(expr, {"F": F, "T": T, "math": math}, _operands())
    assert isinstance(got, T) and got.dtype == np.dtype(dtype)
    assert got.numpy().tolist() == want


def test_integer_modulo_and_floor_compiled_agree_with_eager():
    """The compiled graph (Relax floor_mod for integers, fmod for floats) and a replayed
    call give MegEngine's values too."""
    a, b = T([3, -4, 5, -7, 7]), T([3, 3, -3, 2, -2])

    @trace(symbolic=True, capture_as_const=True)
    def f(x, y):
        return x % y, x % 3, F.floor(x) + 1, T([3., -4., 5.5]) % 2.0
    for _ in range(2):
        r = [t.numpy().tolist() for t in f(a, b)]
    assert r == [[0, 2, -1, 1, -1], [0, 2, 2, 2, 1], [4, -3, 6, -6, 8], [1.0, -0.0, 1.5]]


def test_tensors_copy_the_arrays_they_are_made_from():
    """Writing to the NumPy array afterwards leaves the Tensor, a Parameter, a view's
    Tensor, set_value's and load_state_dict's values as they were (MegEngine copies)."""
    arr = np.zeros(3, "float32")
    t, p, v = T(arr), mge.Parameter(arr), T(arr[::2])
    arr[0] = 5
    s, src = T([1., 2., 3.]), np.ones(3, "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        s.set_value(src)
    src[1] = 7
    lin, w = M.Linear(2, 1), np.ones((1, 2), "float32")
    lin.load_state_dict({"weight": w, "bias": np.zeros(1, "float32")})
    w[0, 0] = 9
    assert [t.numpy().tolist(), p.numpy().tolist(), v.numpy().tolist(), s.numpy().tolist(),
            lin.weight.numpy().tolist()] == [[0.0] * 3, [0.0] * 3, [0.0] * 2, [1.0] * 3,
                                             [[1.0, 1.0]]]


def test_numpy_scalars_keep_their_dtype():
    assert T(np.float16(1.5)).dtype == np.float16 and T(np.float64(1.5)).dtype == np.float32


def test_inf_and_nan_come_without_numpy_warnings():
    """MegEngine's kernels give log(0) = -inf and 0/0 = nan silently; NumPy would warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = [F.log(T([0., 1.])).numpy(), (T([1., 0.]) / T([0., 0.])).numpy(),
             F.sqrt(T([-1.])).numpy()]
    assert r[0][0] == -np.inf and r[1][0] == np.inf and np.isnan(r[1][1]) and np.isnan(r[2][0])


def test_scatter_writes_into_its_input_and_returns_it():
    """MegEngine's F.scatter is `inp[idx] = source; return inp`, eager and traced."""
    x = T([[1., 2., 3.], [4., 5., 6.]])
    r = F.scatter(x, 0, T([[1, 0, 1]], dtype="int32"), T([[10., 20., 30.]]))
    assert r is x and x.numpy().tolist() == [[1.0, 20.0, 3.0], [10.0, 5.0, 30.0]]

    @trace(symbolic=True)
    def f(a):
        b = a * 2
        F.scatter(b, 1, T([[2, 0, 1]], dtype="int32"), T([[7., 8., 9.]]))
        return b
    assert [f(T([[1., 2., 3.]])).numpy().tolist() for _ in range(3)] == [[[8.0, 9.0, 7.0]]] * 3


def test_a_float16_mean_is_computed_and_returned_in_float32():
    """MegEngine's reduce_rule converts a MEAN's input to float32 (var follows)."""
    h = T([1., 2., 4.], dtype="float16")
    mean, var = F.mean(h), F.var(h)
    assert mean.dtype == np.float32 and var.dtype == np.float32
    assert round(float(mean.numpy()), 5) == 2.33333 and round(float(var.numpy()), 5) == 1.55556


@pytest.mark.parametrize("symbolic", [None, False, True])
def test_adaptive_pooling_takes_megengines_windows(symbolic):
    """5 -> 3: windows of 3 at stride 1 (MegEngine 1.13's values for arange(25); PyTorch's
    bins of 2-3 gave [3, 4.5, 6, ...]), eager and compiled."""
    x = T(np.arange(25, dtype="float32").reshape(1, 1, 5, 5))

    def pools(a):
        return F.adaptive_avg_pool2d(a, 3), F.adaptive_max_pool2d(a, 3)
    run = pools if symbolic is None else trace(pools, symbolic=symbolic)
    for _ in range(2):
        avg, mx = run(x)
    assert avg.numpy().ravel().tolist() == [6, 7, 8, 11, 12, 13, 16, 17, 18]
    assert mx.numpy().ravel().tolist() == [12, 13, 14, 17, 18, 19, 22, 23, 24]
