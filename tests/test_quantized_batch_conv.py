"""F.quantized.batch_conv_bias_activation (MegEngine's BatchConvBias) eager, traced,
dumped and read back, against a NumPy reference and real MegEngine 1.13's eager result and
dumps (tests/data/make_megengine_batch_conv_bias.py)."""
from __future__ import annotations

import io
import pathlib

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.core.tensor import dtype as D
from megtrace.jit import trace
from megtrace.utils.comp_graph_tools import GraphInference
from megtrace.utils.network import Network

DATA = pathlib.Path(__file__).parent / "data" / "megengine_batch_conv_bias"
GOLD = dict(np.load(DATA / "bcb.npz"))


def raw(arr: np.ndarray) -> np.ndarray:
    """The stored integers of a quantized array."""
    assert D.is_quantize(arr.dtype), arr.dtype
    return arr.view(np.dtype(arr.dtype.str))


def inputs():
    """As the generator made them: MegEngine's Tensor(array, dtype=qint8(s)) stores the
    array's values as they are."""
    g = GOLD
    sx, sw = float(g["sx"]), float(g["sw"])
    x = mge.Tensor(g["x_i"].astype("float32"), dtype=D.qint8(sx))
    w = mge.Tensor(g["w_i"].astype("float32"), dtype=D.qint8(sw))
    b = mge.Tensor(g["b_i"].astype("float32"), dtype=D.qint32(sx * sw))
    for t, stored in ((x, "x_i"), (w, "w_i"), (b, "b_i")):
        np.testing.assert_array_equal(raw(t.numpy()), g[stored])
    return x, w, b


def fn(x, w, b):
    return F.quantized.batch_conv_bias_activation(
        x, w, b, dtype=D.qint8(float(GOLD["so"])), stride=2, padding=1, nonlinear_mode="relu")


def numpy_reference() -> np.ndarray:
    """Per sample: direct int64 correlation, + bias, relu, rescale, round half away from
    zero, saturate to int8."""
    g = GOLD
    x, w, b = (g[k].astype(np.int64) for k in ("x_i", "w_i", "b_i"))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    n, oc, _, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // 2 + 1
    ow = (xp.shape[3] - kw) // 2 + 1
    acc = np.zeros((n, oc, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, 2 * i:2 * i + kh, 2 * j:2 * j + kw]          # n, ic, kh, kw
            acc[:, :, i, j] = np.einsum("nchw,nochw->no", patch, w)
    acc = np.maximum(acc + b, 0)
    v = acc.astype(np.float64) * (float(g["sx"]) * float(g["sw"])) / float(g["so"])
    return np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -128, 127).astype(np.int8)


def test_golden_is_the_numpy_reference():
    np.testing.assert_array_equal(GOLD["out_q"], numpy_reference())


def test_eager_matches_megengine():
    out = fn(*inputs()).numpy()
    assert D.get_scale(out.dtype) == pytest.approx(float(GOLD["so"]))
    np.testing.assert_array_equal(raw(out), GOLD["out_q"])


def test_compiled_trace_matches_megengine():
    traced = trace(fn, symbolic=True, capture_as_const=True)
    for _ in range(2):          # the recording call and a replay
        np.testing.assert_array_equal(raw(traced(*inputs()).numpy()), GOLD["out_q"])


@pytest.mark.parametrize("name", ["bcb_v2.mge", "bcb_v1.mge"])
def test_load_graph_runs_megengine_dump(name):
    x, w, b = inputs()
    model = mge.load_graph(DATA / name)
    got = model.run(x=x.numpy(), w=w.numpy(), b=b.numpy())["y"]
    np.testing.assert_array_equal(raw(got), GOLD["out_q"])


@pytest.mark.parametrize("fmt", ["FBS_V2", "FBS"])
def test_dump_reads_back_through_network(fmt):
    """MegEngine's graph-tools path: dump, Network.load, dump again, GraphInference."""
    x, w, b = inputs()
    traced = trace(fn, symbolic=True, capture_as_const=True)
    traced(x, w, b)
    f = io.BytesIO()
    traced.dump(f, arg_names=["x", "w", "b"], output_names=["y"],
                optimize_for_inference=False, dump_format=fmt)
    f.seek(0)
    types = [o.type for o in mge.load_graph(io.BytesIO(f.getvalue()))._model.oprs]
    assert "BatchConvBiasForward" in types
    again = io.BytesIO()
    Network.load(f).dump(again, optimize_for_inference=False)
    again.seek(0)
    got = GraphInference(again).run(inp_dict={"x": x.numpy(), "w": w.numpy(), "b": b.numpy()})
    np.testing.assert_array_equal(raw(got["y"]), GOLD["out_q"])

