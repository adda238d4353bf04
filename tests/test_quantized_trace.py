"""Quantized networks traced, compiled by TVM, dumped in MegEngine's format and run by the
real MegEngine Lite 1.13, and real MegEngine's quantized dumps loaded (golden data and
.mge files from the real MegEngine: tests/data/make_megengine_quantized_dumps.py).

The network (tests/quantized_models.py) is MegEngine's deployment workflow: QAT
calibration, `quantize`, `@trace(symbolic=True, capture_as_const=True)`, `dump`. Its
integers are exact everywhere: megtrace eager, the compiled trace, Lite running our dump
and megtrace running MegEngine's dump all equal real MegEngine's eager result."""
from __future__ import annotations

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.core.tensor import dtype as D
from megtrace.errors import UnsupportedOpError
from megtrace.fbs.reader import read_model
from megtrace.fbs.reader_v1 import read_model_v1
from megtrace.functional.elemwise import _elemwise_multi_type
from megtrace.jit import trace
from megtrace.relay_bridge.build import CompiledGraph
from quantized_models import DATA, golden, quantized_net

TAGS = ("net", "resnet")      # tests/quantized_models.py's two networks
GOLDEN = {tag: golden(tag) for tag in TAGS}
FORMATS = {"FBS_V2": ("v2", read_model), "FBS": ("v1", read_model_v1)}


def raw(arr: np.ndarray) -> np.ndarray:
    assert D.is_quantize(arr.dtype), arr.dtype
    return arr.view(np.dtype(arr.dtype.str))


@pytest.fixture(scope="module", params=TAGS)
def model(request):
    """(tag, golden data, converted network, its trace after one call)."""
    tag = request.param
    gold = GOLDEN[tag]
    net = quantized_net(gold, tag)

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)
    infer(mge.tensor(gold["x"]))
    return tag, gold, net, infer


def _compiled(fn) -> list:
    """The graphs a traced function built (TVM's, or the NumPy interpreter's)."""
    return [e.compiled[1] for e in fn._entries.values() if e.compiled is not None]


def test_converted_net_runs_eagerly_as_megengine(model):
    _, gold, net, _ = model
    np.testing.assert_array_equal(net(mge.tensor(gold["x"])).numpy(), gold["eager_y"])


def test_traced_net_compiles_to_megengine_integers(model):
    """The second call runs the TVM-compiled graph (no NumPy interpreter): its result
    equals real MegEngine's eager output exactly."""
    _, gold, _, traced = model
    out = traced(mge.tensor(gold["x"]))
    np.testing.assert_array_equal(out.numpy(), gold["eager_y"])
    assert all(isinstance(c, CompiledGraph) for c in _compiled(traced))
    kinds = [n.op.name for n in traced.graph.nodes]
    assert {"quantized_astype", "quantized_conv_bias", "quantized_elemwise",
            "matmul", "pool2d"} <= set(kinds)
    quantized = [v.type.quant for n in traced.graph.nodes for v in n.outputs if v.type.quant]
    assert {q.name for q in quantized} == {"QuantizedS8", "QuantizedS32"}


def test_traced_quantized_output_keeps_its_dtype(model):
    """A trace returning the qint8 result before DequantStub gives real MegEngine's
    integers with the dtype's scale, from the compiled graph."""
    _, gold, net, _ = model

    @trace(symbolic=True, capture_as_const=True)
    def logits(data):
        return net.logits(data)

    for _ in range(2):
        got = logits(mge.tensor(gold["x"])).numpy()
        np.testing.assert_array_equal(raw(got), gold["eager_q"])
        assert D.get_scale(got.dtype) == float(gold["odt.fc"])
    compiled = _compiled(logits)
    assert compiled and all(isinstance(c, CompiledGraph) for c in compiled)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_dump_writes_the_oprs_and_dtypes_megengine_writes(model, tmp_path, fmt):
    """Opr for opr (as multisets: the two traces order a TypeCvt differently), with the
    same quantized dtypes and scales on every opr, constant and TypeCvt."""
    tag, _, _, traced = model
    path = tmp_path / "net.mge"
    traced.dump(str(path), arg_names=["data"], output_names=["y"], dump_format=fmt)
    suffix, reader = FORMATS[fmt]
    ours = _signature(reader(path.read_bytes()))
    theirs = _signature(reader((DATA / f"{tag}_{suffix}.mge").read_bytes()))
    assert ours == theirs


def _signature(model) -> list[tuple]:
    out = []
    for o in model.oprs:
        params = [(t, {k: v for k, v in f.items() if k != "items"}) for t, f in o.params
                  if t not in ("ExecutionPolicy", "IndexDescMaskDump")]
        tensors = [(t.shape, str(t.dtype)) for t in o.tensors if t.dtype != "int32"]
        out.append((o.type, repr(params), str(o.output_dtype), repr(tensors)))
    return sorted(out)


@pytest.mark.lite
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_lite_runs_our_quantized_dump_as_megengine(model, tmp_path, lite, fmt):
    """Real MegEngine Lite (its x86 int8 kernels) runs our dump and real MegEngine's dump
    of the same model to the same floats, MegEngine's eager ones: the same integers (one
    step of the output scale is about 0.016)."""
    tag, gold, _, traced = model
    path = tmp_path / "net.mge"
    traced.dump(str(path), arg_names=["data"], output_names=["y"], dump_format=fmt)
    theirs_path = DATA / f"{tag}_{FORMATS[fmt][0]}.mge"
    ours, theirs = lite.run_models([(path, {"data": gold["x"]}),
                                    (theirs_path, {"data": gold["x"]})])
    np.testing.assert_array_equal(ours["y"], gold["eager_y"])
    np.testing.assert_array_equal(ours["y"], theirs["y"])


@pytest.mark.parametrize("tag", TAGS)
@pytest.mark.parametrize("suffix", ["v2", "v1"])
def test_load_graph_runs_megengine_quantized_dump(tag, suffix):
    gold = GOLDEN[tag]
    model = mge.load_graph(DATA / f"{tag}_{suffix}.mge")
    got = model(data=gold["x"])
    np.testing.assert_array_equal(np.asarray(got.numpy()), gold["eager_y"])
    ops = {n.op.name for n in model.graph.nodes}
    assert {"quantized_astype", "quantized_conv_bias", "quantized_elemwise"} <= ops


QAT_DUMPS = DATA.parent / "qat_dumps"       # tests/data/make_megengine_qat_dumps.py


@pytest.mark.parametrize("name,op", [("fake_quant", "fake_quant"), ("fake_quant_v1", "fake_quant"),
                                     ("tqt", "tqt"), ("lsq", "lsq")])
def test_load_graph_runs_megengine_qat_dump(name, op):
    """MegEngine's QAT dumps hold FakeQuant / TQT / LSQ oprs: read back as megtrace's ops
    with their qmin/qmax, they give MegEngine's eager QAT output (activations snapped to
    the int8 grid, so a flipped rounding would show as a whole step)."""
    gold = np.load(QAT_DUMPS / f"{name.replace('_v1', '')}.npz")
    model = mge.load_graph(QAT_DUMPS / f"{name}.mge")
    nodes = [n for n in model.graph.nodes if n.op.name == op]
    assert len(nodes) >= 4
    assert {(dict(n.params)["qmin"], dict(n.params)["qmax"]) for n in nodes} <= {
        (-128, 127), (-127, 127)}
    np.testing.assert_allclose(np.asarray(model(data=gold["x"]).numpy()), gold["y"],
                               rtol=1e-5, atol=1e-5)


# -- single quantized ops: the compiled trace equals eager (eager equals real MegEngine:
# tests/test_quantized_eager.py) ------------------------------------------------------
QGOLD = np.load(DATA.parent / "quantized_golden.npz")


def _q(name: str, dtype) -> mge.Tensor:
    return mge.tensor(QGOLD[name].astype(np.dtype(dtype.str)).view(dtype))


def _traced_equals_eager(fn, *args):
    want = fn(*args).numpy()
    t = trace(fn, symbolic=True, capture_as_const=True)
    for _ in range(2):
        got = t(*args).numpy()
        assert got.dtype == want.dtype and got.dtype.metadata == want.dtype.metadata
        np.testing.assert_array_equal(got.view(np.dtype(got.dtype.str)),
                                      want.view(np.dtype(want.dtype.str)))
    assert all(isinstance(c, CompiledGraph) for c in _compiled(t))
    return want


CASES = {
    "typecvt-quint8": (lambda x: x.astype(D.quint8(0.05, 128)), ["cvt_x"]),
    "typecvt-qint32": (lambda x: x.astype(D.qint32(0.01)).astype(D.qint8(0.07)), ["cvt_x"]),
    "requantize": (lambda x: x.astype(D.qint8(0.5)).astype(D.quint8(0.1, 100))
                   .astype("float32"), ["cvt_x"]),
    "avg-pool-exclude-padding": (lambda x: F.avg_pool2d(x, 3, 2, 1), ["pool_x"]),
    "avg-pool-ties": (lambda x: F.avg_pool2d(x, 2), ["pool_ties"]),
    "avg-pool-ties-padding": (lambda x: F.avg_pool2d(x, 2, 2, 1), ["pool_ties"]),
    "avg-pool-include-padding": (lambda x: F.avg_pool2d(x, 3, 1, 1, mode="average"),
                                 ["pool_x"]),
    "adaptive-avg-pool": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), ["pool_x"]),
    "max-pool-nearest": (lambda x: F.nn.interpolate(F.max_pool2d(x, 2), scale_factor=2,
                                                    mode="nearest"), ["pool_x"]),
    "matmul": (lambda a, b: F.matmul(a, b, transpose_b=True), ["mm_a", "mm_b"]),
    "integer-ops": (lambda a, b: F.concat([F.relu(a + b), a - b, F.maximum(a, -b)], 1),
                    ["int_a", "int_b"]),
    "qmul-qsub": (lambda a, b: _elemwise_multi_type(
        _elemwise_multi_type(a, b, mode="qmul", dtype=D.qint8(0.025)), b, mode="qsub",
        dtype=D.qint8(0.03)), ["emt_a", "emt_b"]),
    "qfloor-qceil-qround-qcond_leq_mov": (lambda a, b: F.concat([
        _elemwise_multi_type(a, mode=m, dtype=D.qint8(0.025))
        for m in ("qfloor", "qceil", "qround")] + [
        _elemwise_multi_type(a, b, a, mode="qcond_leq_mov", dtype=D.qint8(0.025))], 0),
        ["emt_a", "emt_b"]),
}
_SCALES = {"pool_x": D.qint8(0.1), "pool_ties": D.qint8(1.0), "mm_a": D.qint8(0.01),
           "mm_b": D.qint8(0.02), "int_a": D.qint8(0.5), "int_b": D.qint8(0.5),
           "emt_a": D.qint8(0.03), "emt_b": D.qint8(0.02)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantized_op_compiles_to_eager_integers(case):
    fn, names = CASES[case]
    args = [mge.tensor(QGOLD[n]) if n not in _SCALES else _q(n, _SCALES[n]) for n in names]
    _traced_equals_eager(fn, *args)


def test_quantized_golden_pools_still_match_megengine():
    """The traced pooling gives real MegEngine's integers (not only eager's)."""
    t = trace(lambda x: F.avg_pool2d(x, 2, 2, 1), symbolic=True, capture_as_const=True)
    for _ in range(2):
        got = t(_q("pool_ties", D.qint8(1.0))).numpy()
    np.testing.assert_array_equal(raw(got), QGOLD["pool_ties_avg_pad"])


# -- what cannot be compiled or written: clear errors -----------------------------------
def test_op_without_quantized_kernel_is_refused_by_name():
    x = mge.tensor(np.ones((2, 3), np.float32)).astype(D.qint8(0.5))
    t = trace(lambda x: x * x, symbolic=True)
    with pytest.raises(UnsupportedOpError, match="mul on quantized dtype QuantizedS8"):
        t(x)


@pytest.mark.parametrize("mode,inputs", [
    ("qsigmoid", 1), ("qtanh", 1), ("qexp", 1), ("qcos", 1), ("qsin", 1), ("qh_swish", 1),
    ("qfast_tanh", 1), ("qfuse_add_sigmoid", 2), ("qfuse_add_tanh", 2), ("qpow", 2),
    ("qfuse_add_h_swish", 2)])
def test_transcendental_elemwise_modes_compile_as_eager_tables(mode, inputs):
    """TVM's float32 sigmoid/tanh/exp may differ from NumPy's by an ulp, which would move
    quantized results: for 8-bit inputs the compiled graph looks eager's integers up in a
    table of every input combination (256 or 65536 entries), so it equals eager (and, as
    tests/test_quantized_eager.py shows, MegEngine)."""
    a = _q("emt_a", D.qint8(0.03))
    b = mge.tensor((QGOLD["emt_b"].astype(np.float32) * np.float32(0.1)).astype(np.float32)
                   ).astype(D.quint8(0.02, 128))          # an asymmetric second input
    args = (a, b)[:inputs]
    _traced_equals_eager(lambda *xs: _elemwise_multi_type(*xs, mode=mode,
                                                           dtype=D.qint8(0.025)), *args)


def test_elemwise_mode_table_too_large_is_refused_when_compiled():
    a = mge.tensor(np.arange(6, dtype=np.float32)).astype(D.qint32(0.01))
    t = trace(lambda a: _elemwise_multi_type(a, mode="qsin", dtype=D.qint8(0.025)),
              symbolic=True)
    with pytest.raises(UnsupportedOpError, match="qsin.*QuantizedS32.*65536 entries"):
        t(a)
        t(a)


def test_reduce_on_quantized_value_is_refused_when_compiled():
    a = _q("int_a", D.qint8(0.5))
    t = trace(lambda a: F.sum(a, axis=1), symbolic=True)
    with pytest.raises(UnsupportedOpError, match="reduce on quantized dtype QuantizedS8"):
        t(a)
        t(a)


@pytest.mark.lite
def test_four_bit_typecvt_runs_in_lite_but_four_bit_tensors_are_refused(tmp_path, lite):
    """TypeCvt to QuantizedS4 is written and Lite runs it; a 4-bit input or constant
    (MegEngine packs two values a byte in files) is refused by the writer."""
    x = mge.tensor(QGOLD["cvt_x"])
    _traced_equals_eager(lambda x: x.astype(D.qint4(0.5)), x)
    t = trace(lambda x: x.astype(D.qint4(0.5)).astype("float32"), symbolic=True,
              capture_as_const=True)
    want = t(x).numpy()
    t.dump(str(tmp_path / "cvt.mge"), arg_names=["x"], output_names=["y"])
    got = lite.run_model(tmp_path / "cvt.mge", {"x": QGOLD["cvt_x"]})["y"]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, QGOLD["cvt_qint4_back"])

    t4 = trace(lambda q: q + q, symbolic=True, capture_as_const=True)
    t4(x.astype(D.qint4(0.5)))
    with pytest.raises(UnsupportedOpError, match="QuantizedS4"):
        t4.dump(str(tmp_path / "q4.mge"), arg_names=["q"])
    assert not (tmp_path / "q4.mge").exists()


def _asymmetric_conv(w_dtype):
    rng = np.random.default_rng(0)
    w = mge.tensor(rng.normal(size=(6, 4, 3, 3)).astype(np.float32)).astype(w_dtype)
    b = mge.tensor(rng.normal(size=(1, 6, 1, 1)).astype(np.float32)).astype(
        D.qint32(0.05 * 0.02))

    def f(x):
        q = x.astype(D.quint8(0.05, 128))
        y = F.quantized.conv_bias_activation(q, w, b, D.quint8(0.1, 120), padding=1,
                                             nonlinear_mode="relu")
        return y.astype("float32")
    return f, rng.normal(size=(2, 4, 9, 9)).astype(np.float32)


@pytest.mark.lite
def test_asymmetric_conv_with_zero_points_runs_in_lite_as_compiled(tmp_path, lite):
    """quint8 input, weight and output (zero points 128, 125, 120): the compiled trace
    equals eager, and real MegEngine Lite running the dump gives the same values."""
    f, x = _asymmetric_conv(D.quint8(0.02, 125))
    want = f(mge.tensor(x)).numpy()
    got = _traced_equals_eager(f, mge.tensor(x))
    t = trace(f, symbolic=True, capture_as_const=True)
    t(mge.tensor(x))
    t.dump(str(tmp_path / "qu8.mge"), arg_names=["x"], output_names=["y"])
    np.testing.assert_array_equal(lite.run_model(tmp_path / "qu8.mge", {"x": x})["y"], want)
    np.testing.assert_array_equal(got, want)


def test_conv_of_mixed_quantized_kinds_is_refused():
    """MegEngine multiplies the input and weight scales only for equal dtype kinds (its
    loader refuses quint8 x qint8)."""
    f, x = _asymmetric_conv(D.qint8(0.02))
    with pytest.raises(Exception, match="same quantized dtype kind"):
        f(mge.tensor(x))


def test_traced_quantized_conv_transpose_gives_megengine_integers(tmp_path):
    """ConvolutionBackwardData on qint8: compiled equal to real MegEngine's integers,
    written with its quantized output dtype and read back."""
    x, w = _q("tconv_x", D.qint8(0.05)), _q("tconv_w", D.qint8(0.04))

    def f(x):
        return F.quantized.conv_transpose2d(x, w, dtype=D.qint8(0.05), stride=(2, 1),
                                            padding=(1, 0))
    got = _traced_equals_eager(f, x)
    np.testing.assert_array_equal(raw(got), QGOLD["tconv_y"])
    t = trace(f, symbolic=True, capture_as_const=True)
    t(x)
    t.dump(str(tmp_path / "deconv.mge"), arg_names=["x"], output_names=["y"])
    model = mge.load_graph(tmp_path / "deconv.mge")
    assert [n.op.name for n in model.graph.nodes] == ["quantized_conv_transpose"]
    np.testing.assert_array_equal(raw(model(x=x.numpy()).numpy()), QGOLD["tconv_y"])
