"""megtrace.utils.comp_graph_tools.GraphInference (MegEngine 1.13's runner of a dumped
graph) and traced functions returning a shape element (a Tensor, as in MegEngine)."""
import io
import re
from pathlib import Path

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.utils.comp_graph_tools as cgtools
from megtrace.jit import trace


def _arange_length(inp):
    """The element count of arange(4, 8 * W + 4, 8) for an input of width W: W."""
    width = inp.shape[-1]
    return F.arange(4, width * 8 + 4, 8).shape[0]


def test_returned_shape_element_is_an_int32_tensor_on_every_call(rng):
    traced = trace(symbolic=True, capture_as_const=True)(_arange_length)
    for width in (7, 7, 12):       # record, replay, record again for the new shape
        out = traced(mge.tensor(rng.uniform(size=(1, 2, 3, width)).astype(np.float32)))
        assert isinstance(out, mge.Tensor) and out.dtype == np.int32 and out.ndim == 0
        assert int(out.numpy()) == width


@pytest.mark.parametrize("optimize", [False, True])
def test_graph_inference_runs_a_dump_at_a_new_input_shape(optimize, rng, tmp_path):
    traced = trace(symbolic=True, capture_as_const=True)(_arange_length)
    traced(mge.tensor(rng.uniform(size=(1, 3, 24, 24)).astype(np.float32)))
    path = tmp_path / "len.mge"
    traced.dump(path, arg_names=["data"], optimize_for_inference=optimize)
    net = cgtools.GraphInference(str(path))
    out = net.run(inp_dict={"data": rng.uniform(size=(1, 3, 40, 40)).astype(np.float32)})
    assert list(out) == ["output_0"] and int(np.asarray(out["output_0"]).reshape(-1)[0]) == 40


def test_graph_inference_inputs_and_outputs_by_name(rng, tmp_path):
    @trace(symbolic=True, capture_as_const=True)
    def two(a, b):
        return a + b, a * b
    a, b = (rng.uniform(size=(2, 3)).astype(np.float32) for _ in range(2))
    two(mge.tensor(a), mge.tensor(b))
    path = tmp_path / "two.mge"
    two.dump(path, arg_names=["a", "b"], output_names=["sum", "prod"])
    with open(path, "rb") as f:                  # a file object works too
        net = cgtools.GraphInference(f, outputs=["prod"])
    assert list(net.run(a, inp_dict={"b": b})) == ["prod"]
    np.testing.assert_allclose(net.run(a, b)["prod"], a * b, rtol=1e-6)
    full = cgtools.GraphInference(str(path))
    np.testing.assert_allclose(full.run(inp_dict={"a": a, "b": b})["sum"], a + b, rtol=1e-6)
    with pytest.raises(AssertionError, match="This model expects 2 inputs"):
        full.run(a, b, a)
    with pytest.raises(AssertionError, match=r"This model expects inputs \['a', 'b'\]"):
        full.run(inp_dict={"a": a})
    with pytest.raises(KeyError, match="no output named"):
        cgtools.GraphInference(str(path), outputs=["nope"])


@pytest.mark.lite
@pytest.mark.parametrize("optimize", [False, True])
def test_dumped_where_keeps_unselected_inf_and_nan_out(optimize, lite, tmp_path):
    """MegEngine writes where as switch_gt0(m, x) + switch_gt0(1 - m, y): an inf or NaN
    in the branch not taken must not reach the result (m * x would make it NaN)."""
    m = np.array([[1, 0], [0, 1]], np.float32)
    x = np.array([[1, np.inf], [np.nan, 4]], np.float32)
    y = np.array([[5, 6], [7, 8]], np.float32)
    traced = trace(symbolic=True, capture_as_const=True)(lambda m, x, y: F.where(m > 0, x, y))
    traced(mge.tensor(m), mge.tensor(x), mge.tensor(y))
    path = tmp_path / "where.mge"
    traced.dump(path, arg_names=["m", "x", "y"], output_names=["o"],
                optimize_for_inference=optimize)
    want = np.where(m > 0, x, y)
    feeds = {"m": m, "x": x, "y": y}
    assert np.array_equal(cgtools.GraphInference(str(path)).run(inp_dict=feeds)["o"], want)
    assert np.array_equal(lite.run_model(path, feeds)["o"], want)


def test_graph_inference_takes_a_scalar_for_a_dumped_scalar_input(tmp_path):
    """0-d traced inputs are written as shape (1,); GraphInference feeds a 0-d array
    into them, as MegEngine does (its opr_test runs F.where on scalars this way)."""
    traced = trace(symbolic=True, capture_as_const=True)(lambda x, y: x * y + 1)
    traced(mge.tensor(np.float32(2)), mge.tensor(np.float32(3)))
    path = tmp_path / "scalar.mge"
    info = traced.dump(path)
    names = info[4]
    out = cgtools.GraphInference(str(path)).run(
        inp_dict=dict(zip(names, [np.float32(4), np.float32(5)])))
    assert float(np.asarray(list(out.values())[0]).reshape(-1)[0]) == 21.0


# MegEngine 1.13's GraphInference input order for its own dumps, and the subset an
# output selection needs (tests/data/make_megengine_graph_inference_order.py)
MEGENGINE_ORDER = [
    ("f", None, ["b", "a"]), ("f", ["y"], ["b", "a"]), ("f", ["s"], ["a"]),
    ("g", None, ["z", "y", "x"]), ("g", ["d"], ["z", "x"]), ("g", ["e"], ["y"]),
]
ORDER_DATA = Path(__file__).resolve().parent / "data" / "megengine_graph_inference"


@pytest.mark.parametrize("name, outputs, order", MEGENGINE_ORDER)
def test_positional_inputs_in_megengines_order(name, outputs, order):
    """Breadth first from the outputs through the graph, not the traced arguments'
    order; positional inputs in that order give MegEngine's outputs."""
    io_ = np.load(ORDER_DATA / "io.npz")
    net = cgtools.GraphInference(str(ORDER_DATA / f"{name}.mge"), outputs=outputs)
    got = net.run(*[io_[f"{name}.{k}"] for k in order])
    for out, value in got.items():
        np.testing.assert_allclose(value, io_[f"{name}.{out}"], rtol=1e-5, atol=1e-6)
    assert list(got) == (outputs or {"f": ["y", "s"], "g": ["d", "e"]}[name])
    with pytest.raises(AssertionError, match=re.escape(f"This model expects inputs {order}")):
        net.run(inp_dict={})


def test_inputs_no_output_reads_are_still_taken():
    """F.arange of traced scalars bakes them in (megtrace reads them as ints), so the file's
    inputs feed nothing; run() still takes them by position after the ones the outputs
    read, as before MegEngine's dependency order (MegEngine's own tests feed them)."""
    @trace(symbolic=True, capture_as_const=True)
    def f(a, b, c):
        return F.arange(a, b, c)
    args = [mge.tensor(1.0), mge.tensor(5.0), mge.tensor(1.0)]
    f(*args)
    buf = io.BytesIO()
    f.dump(buf, arg_names=["a", "b", "c"])
    (out,) = cgtools.GraphInference(io.BytesIO(buf.getvalue())).run(1.0, 5.0, 1.0).values()
    np.testing.assert_array_equal(out, np.arange(1, 5, dtype=np.float32))


def test_megbrain_graph_vars_report_megengine_operator_types():
    """cgtools on the vars of megbrain_graph.load_graph (MegEngine's test_dump_volatile):
    an outside tensor captured as a constant is an ImmutableTensor input of the Elemwise."""
    from megtrace.core.tensor import megbrain_graph as G
    p = mge.tensor([2])

    @trace(symbolic=True, capture_as_const=True)
    def f(x):
        return F.relu(x * p)
    f(mge.tensor([3]))
    buf = io.BytesIO()
    f.dump(buf, optimize_for_inference=False)
    buf.seek(0)
    (out,) = G.load_graph(buf).output_vars_list
    assert cgtools.get_owner_opr_type(out) == "Elemwise"
    mul = cgtools.get_owner_opr_inputs(out)[0]
    assert [cgtools.get_owner_opr_type(v) for v in cgtools.get_owner_opr_inputs(mul)] == \
        ["Host2DeviceCopy", "ImmutableTensor"]
