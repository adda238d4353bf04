"""Hostile model files (each a few hundred bytes, made by patching a real dump) raise
megtrace's errors quickly and without allocating, instead of hanging, eating memory or
crashing inside TVM or flatbuffers."""
import resource
import struct
import time

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.errors import FormatError, MegtraceError, UnsupportedModelError
from megtrace.jit import trace


def _dump(fn, *shapes, tmp_path) -> bytearray:
    f = trace(fn, symbolic=True, capture_as_const=True)
    f(*[mge.tensor(np.ones(s, np.float32)) for s in shapes])
    path = tmp_path / "m.mge"
    f.dump(path, arg_names=[f"x{i}" for i in range(len(shapes))],
           optimize_for_inference=False)
    return bytearray(path.read_bytes())


def _oprs(buf: bytes):
    from megtrace.fbs.generated import Model
    model = Model.Model.GetRootAs(bytes(buf), 4)
    return model, [model.Oprs(i) for i in range(model.OprsLength())]


def _param(buf, opr, table: str):
    from megtrace.fbs import tables
    obj = getattr(tables.generated(table), table)()
    obj.Init(bytes(buf), opr.Param().Pos)
    return obj


def _field_pos(obj, index: int) -> int:
    """Absolute position of scalar field `index` of a table (it must be stored)."""
    off = obj._tab.Offset(4 + 2 * index)
    assert off, "the field is not stored in this file"
    return obj._tab.Pos + off


def _first(oprs, type_id_name: str):
    from megtrace.fbs.oprs import name_of
    return next(o for o in oprs if name_of(o.TypeId(), o.OprVersion()) == type_id_name)


def _load_fast(buf, tmp_path, error=MegtraceError):
    """load_graph (and one run) must fail with `error` within 1 s and 100 MB."""
    path = tmp_path / "hostile.mge"
    path.write_bytes(bytes(buf))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(error) as info:
        model = mge.load_graph(path)
        model.run(**{i.name: np.ones(i.shape, i.dtype) for i in model.inputs})
    assert time.perf_counter() - start < 1.0
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) < 100 * 1024
    return info.value


def test_a_struct_vector_declaring_millions_of_items(tmp_path):
    buf = _dump(lambda x: x[1:3] * 2, (4, 8), tmp_path=tmp_path)
    _, oprs = _oprs(buf)
    sub = _param(buf, _first(oprs, "Subtensor"), "IndexDescMaskDump")
    vec = sub._tab.Vector(sub._tab.Offset(4))
    struct.pack_into("<I", buf, vec - 4, 16 << 20)
    err = _load_fast(buf, tmp_path, FormatError)
    assert "IndexDescMaskDump.items declares 16777216 items" in str(err)


def test_many_oprs_sharing_one_table(tmp_path):
    buf = _dump(lambda x: F.relu(x) * 2 + 1, (4, 8), tmp_path=tmp_path)
    model, oprs = _oprs(buf)
    vec = model._tab.Vector(model._tab.Offset(8))     # Model.oprs: field 2 of model_v2.fbs
    n = model.OprsLength()
    target = oprs[1]._tab.Pos
    for i in range(2, n):
        slot = vec + 4 * i
        struct.pack_into("<I", buf, slot, target - slot)
    err = _load_fast(buf, tmp_path, FormatError)
    assert "reuses the table of an earlier opr" in str(err)


def test_a_broadcast_to_a_huge_shape(tmp_path):
    buf = _dump(lambda x: F.broadcast_to(x, (4, 8)) * 2, (1, 8), tmp_path=tmp_path)
    _, oprs = _oprs(buf)
    shape = next(o.Tensors(0) for o in oprs if o.TensorsLength() and
                 o.Tensors(0).DataLength() == 8)             # the int32 target shape (4, 8)
    at = shape._tab.Vector(shape._tab.Offset(16))             # Tensor.data (after a union)
    assert struct.unpack_from("<ii", buf, at) == (4, 8)
    struct.pack_into("<ii", buf, at, 1 << 28, 8)              # 8 GiB of float32
    err = _load_fast(buf, tmp_path, UnsupportedModelError)
    assert "MEGTRACE_MAX_VALUE_BYTES" in str(err)


def test_a_pooling_stride_of_zero(tmp_path):
    # (stride 3: MegEngine's defaults, 2, are not stored in the file)
    buf = _dump(lambda x: F.max_pool2d(x, 3, stride=3), (1, 2, 9, 9), tmp_path=tmp_path)
    _, oprs = _oprs(buf)
    pool = _param(buf, _first(oprs, "PoolingV1"), "Pooling")
    struct.pack_into("<I", buf, _field_pos(pool, 3), 0)       # stride_h
    err = _load_fast(buf, tmp_path)
    assert "stride" in str(err) and not isinstance(err, ZeroDivisionError)


def test_a_dimension_of_two_to_the_31(tmp_path):
    buf = _dump(lambda x: x * 2, (3, 5), tmp_path=tmp_path)
    _, oprs = _oprs(buf)
    h2d = _first(oprs, "Host2DeviceCopy")
    shape = h2d.Tensors(0)
    vec = shape._tab.Vector(shape._tab.Offset(6))              # Tensor.shape
    assert struct.unpack_from("<I", buf, vec)[0] == 3
    struct.pack_into("<I", buf, vec, 1 << 31)
    err = _load_fast(buf, tmp_path)
    assert "2147483647" in str(err)


def test_a_testcase_without_its_tensor(tmp_path):
    f = trace(lambda x: x * 2, symbolic=True, capture_as_const=True)
    f(mge.tensor(np.ones(3, np.float32)))
    path = tmp_path / "t.mge"
    f.dump(path, arg_names=["x"], input_data=["#rand(0,1,3)"])
    buf = bytearray(path.read_bytes())
    model_size = struct.unpack_from("<I", buf, 12)[0]
    case_at = 12 + 4 + model_size                  # the first testcase (size-prefixed)
    _, oprs = _oprs(buf[case_at:])
    shared = oprs[0]
    vec = shared._tab.Vector(shared._tab.Offset(26))   # Operator.tensors: field 11
    struct.pack_into("<I", buf, case_at + vec - 4, 0)
    path.write_bytes(bytes(buf))
    with pytest.raises(FormatError, match="testcase 0"):
        mge.load_graph(path)

