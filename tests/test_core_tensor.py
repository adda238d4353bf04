"""MegEngine's Tensor surface: `tensor` is the class, constructor rules, CompNode devices,
in-place operators, None operands, pickling in MegEngine's format (golden pickle from
tests/data/make_megengine_tensor_pickles.py)."""
import copy
import io
import pickle
from pathlib import Path

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace import Parameter, Tensor
from megtrace.jit import trace

DATA = Path(__file__).parent / "data"


def test_tensor_is_the_class():
    assert mge.tensor is Tensor
    assert isinstance(mge.tensor([1]), mge.tensor) and isinstance(Parameter(1), mge.tensor)


@pytest.mark.parametrize("data,dtype", [(1, "int32"), (1.5, "float32"), (True, "bool"),
                                        ([1, 2], "int32"), (np.arange(3), "int32"),
                                        (np.float64(2), "float32"),
                                        (np.array([1], np.uint16), "uint16")])
def test_constructor_infers_megengines_dtypes(data, dtype):
    assert Tensor(data).dtype == np.dtype(dtype)


def test_constructing_from_a_tensor():
    x = Tensor(0, dtype=np.float32, device="xpu0:1", name="MyName")
    assert x.name == "MyName" and Tensor(x).name == "" and Tensor(1).name == ""
    assert Tensor(x.astype(np.int32)).dtype == np.int32
    with pytest.raises(RuntimeError, match="dtype mismatch"):
        Tensor(x.astype(np.int32), dtype=np.float32)
    with pytest.raises(RuntimeError, match="device mismatch"):
        Tensor(x.to("xpu0:2"), device="xpu0:1")
    assert Tensor(x.to("xpu0:2")).device == "xpu0:2"
    Tensor([1], is_const=True, no_cache=True)


def test_devices_are_compnodes():
    x = Tensor([1, 2, 3], device="cpu0")
    assert str(x.device) == "cpu0:0" and x.device.logical_name == "cpu0:0"
    assert repr(x.device) == 'CompNode("cpu0:0" from "cpu0:0")'
    assert x.device == "cpu0" and x.device != "cpu1"
    assert repr(Tensor([1.5, 2])) == "Tensor([1.5 2. ], device=xpux:0)"
    assert repr(Tensor([1, 2], device="cpu0")) == "Tensor([1 2], dtype=int32, device=cpu0:0)"
    assert Tensor(1).to("xpu0:1").device.physical_name == "cpu0:1"
    assert (x + 1).device == x.device and np.add(x, np.array([1, 0, 3])).device == x.device
    with pytest.raises(ValueError, match="invalid device name"):
        x.to("tpu0")


def test_none_operand_is_a_type_error():
    import megtrace.functional as F
    for op in (lambda a: a + None, lambda a: None * a, lambda a: a < None,
               lambda a: F.add(a, None), lambda a: F.equal(None, a)):
        with pytest.raises(TypeError, match="the operand is None and is not supported."):
            op(Tensor(1.0))


def test_inplace_operators_update_the_tensor_object():
    x = Tensor([1.0, 2.0])
    alias = x
    x += 1
    x *= Tensor([2.0, 3.0])
    assert alias is x and x.numpy().tolist() == [4.0, 9.0]
    x[...] = np.array([7.0], np.float32)          # MegEngine's x[...] = v rebinds to v
    assert x.numpy().tolist() == [7.0]


def test_reshape_and_item_forms():
    x = Tensor(np.arange(6, dtype=np.float32))
    assert x.reshape(Tensor([3, 2])).shape == (3, 2) and x.reshape(2, -1).shape == (2, 3)
    assert x.reshape((3, 2)).item(1, 0) == 2.0 and x.detach() is not x
    assert x.detach().numpy().tolist() == x.numpy().tolist()


def test_trace_argument_assignment_keeps_the_argument_binding():
    @trace(symbolic=True)
    def f(x):
        x[0] = 5.0
        return x * 2
    for _ in range(3):
        assert f(Tensor([1.0, 2.0])).numpy().tolist() == [10.0, 4.0]


def test_pickle_format_is_megengines():
    x = Tensor([1, 2, 3], dtype=np.float32, device="cpu0")
    value, dtype, device = x.__getnewargs__()
    assert np.array_equal(value, x.numpy()) and dtype == np.float32 and device == "cpu0:0"
    assert x.__getstate__() == {}
    x.qparams.scale = Tensor(2.0)
    assert set(x.__getstate__()) == {"qparams"}
    for clone in (copy.copy(x), copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert np.array_equal(clone.numpy(), x.numpy()) and clone.device == "cpu0:0"
        assert clone.qparams.scale.numpy() == 2.0


def test_megengines_tensor_pickles_load():
    objects = mge.load(DATA / "megengine_tensors_v113.pkl")
    t = objects["int8_cpu0"]
    assert type(t) is Tensor and t.dtype == np.int8 and t.device.logical_name == "cpu0:0"
    assert t.numpy().tolist() == [1, 2, 3]
    assert type(objects["param"]) is Parameter
    assert objects["param"].numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert objects["with_scale"].qparams.scale.numpy() == 1.5


def test_save_load_round_trip_with_map_location():
    buf = io.BytesIO()
    a = Tensor(np.arange(4, dtype=np.int32), device="cpu0")
    a.qparams.scale = Tensor(1.0)
    mge.save({"a": a, "p": Parameter([1.0])}, buf)
    buf.seek(0)
    got = mge.load(buf, map_location="cpu1")
    assert got["a"].device == "cpu1" and got["a"].numpy().tolist() == [0, 1, 2, 3]
    assert type(got["p"]) is Parameter and got["a"].qparams.scale.numpy() == 1.0


def test_tensor_of_an_eager_tensor_inside_a_trace_is_a_constant():
    @trace(symbolic=False)
    def f(x):
        scale = Tensor(np.add(Tensor([1.0, 2.0]), 1))    # ufunc result wrapped, then copied
        return x * scale
    for _ in range(3):
        assert f(Tensor([1.0, 1.0])).numpy().tolist() == [2.0, 3.0]


def test_zero_dim_results_are_zero_dim_arrays():
    """MegEngine's Tensor.numpy() of a 0-d result is a 0-d ndarray, never a NumPy scalar
    (MegEngine's opr_test helper asserts isinstance(x, np.ndarray))."""
    x = mge.tensor(np.array([[3.0, 1.0, 2.0]], np.float32))
    for t in (F.argmax(x), F.argmin(x), F.sum(x), x[0, 1]):
        got = t.numpy()
        assert type(got) is np.ndarray and got.ndim == 0


def test_concat_and_stack_promote_mixed_dtypes():
    """MegEngine converts Concat/Stack inputs to their promoted dtype first (int32 with
    float32 joins as float32), as NumPy's concatenate does."""
    a = np.arange(3, dtype=np.int32)
    b = np.array([0.5, 1.5, 2.5], np.float32)
    joined = F.concat([mge.tensor(a), mge.tensor(b)])
    assert joined.dtype == np.float32
    np.testing.assert_array_equal(joined.numpy(), np.concatenate([a, b]).astype(np.float32))
    stacked = F.stack([mge.tensor(a), mge.tensor(b)], axis=0)
    np.testing.assert_array_equal(stacked.numpy(), np.stack([a, b]).astype(np.float32))


def test_format_follows_megengines_tensor_and_reset_rules():
    """As real MegEngine 1.13 does (checked in its chroot): a tensor made from a tensor
    keeps its format, another format is refused; x[...] = v takes v's format (an array's:
    default); in-place arithmetic keeps it."""
    data = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    a = mge.tensor(data, format="nhwc")
    assert mge.tensor(a).format == "nhwc"
    assert mge.tensor(a, format="nhwc").format == "nhwc"
    with pytest.raises(RuntimeError, match="format mismatch: nchw vs nhwc"):
        mge.tensor(a, format="nchw")
    b = mge.tensor(a)
    b[...] = mge.tensor(data, format="nchw")
    assert b.format == "nchw"
    b.format = "nhwc"
    b[...] = data
    assert b.format == "default"
    np.testing.assert_array_equal(b.numpy(), data)
    b.format = "nhwc"
    b += 1
    assert b.format == "nhwc"
