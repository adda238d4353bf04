"""Shapes computed from traced input shapes stay symbolic in dumps: a model traced and
dumped at batch 1 runs in the real MegEngine Lite 1.13 (and in load_graph) at batch 8,
as MegEngine's own dump of the same code does (megtrace/symbolic.py)."""
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace import load_graph
from megtrace.jit import trace

DATA = Path(__file__).resolve().parents[1] / "data"


class EncoderBlock(M.Module):
    """A pre-norm transformer encoder block, MHA written as users write it."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = M.Linear(dim, dim * 3)
        self.proj = M.Linear(dim, dim)
        self.norm1 = M.LayerNorm(dim)
        self.norm2 = M.LayerNorm(dim)
        self.fc1 = M.Linear(dim, dim * 2)
        self.fc2 = M.Linear(dim * 2, dim)

    def forward(self, x):
        B, S, C = x.shape
        H = self.heads
        qkv = self.qkv(self.norm1(x)).reshape(B, S, 3, H, C // H).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = F.softmax(F.matmul(q, k.transpose(0, 1, 3, 2)) * (C // H) ** -0.5, axis=-1)
        y = F.matmul(att, v).transpose(0, 2, 1, 3).reshape(B, S, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class FlattenHead(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 8, 3, padding=1)
        self.fc = M.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(F.flatten(F.relu(self.conv(x)), 1))


def reshape_batch(x):
    return x.reshape(x.shape[0], -1) * 2


def broadcast_batch(x):
    b = mge.tensor(np.arange(8, dtype="float32"))
    return F.broadcast_to(b, (x.shape[0], 4, 8)) + x


def zeros_batch(x):
    return F.concat([x, F.zeros((x.shape[0], 4))], axis=1)


def shape_arithmetic(x):
    n, c, h, w = x.shape
    y = x.reshape(n * c, h * w // 2, -1) - 1
    return F.ones((n, c * h * w)) + y.reshape(-(-n) + c % 2, -1)


def arange_batch(x):
    """CLIP's text pooling: one row per sample picked by an arange over the batch."""
    return x[F.arange(x.shape[0], dtype=np.int32), F.argmax(x, axis=-1)] + \
        F.arange(1, x.shape[1] * 3, 2)[2]


def shape_as_tensor(x):
    """BERT's transpose_for_scores: the shape as a Tensor, sliced and concatenated."""
    x_shape = mge.tensor(x.shape)
    heads = F.concat([x_shape[:-1], mge.tensor([2, 3], dtype="int32")])
    y = x.reshape(heads).transpose(0, 2, 1, 3)
    y_shape = mge.tensor(y.shape)
    return y.transpose(0, 2, 1, 3).reshape(F.concat([y_shape[:1], y_shape[2:3],
                                                     mge.tensor([6], dtype="int32")])) * 2


def slice_half(x):
    """A slice bound from a traced dim: Subtensor fed by GetVarShape arithmetic."""
    return x[:, : x.shape[1] // 2] * 2


def index_from_shape(x):
    return x[:, x.shape[1] - 1]


def vector_index_from_shape(x):
    return x[: x.shape[0] // 2 + 1, [0, 2]]


def broadcast_to_shape(x):
    """x.shape as a whole: one GetVarShape, not a constant."""
    return F.broadcast_to(mge.tensor([1.0, 2.0, 3.0]), x.shape) + x


def tensor_of_shape(x):
    return mge.Tensor(x.shape) * 2


def matmul_3d_2d(x):
    w = mge.tensor(np.linspace(-1, 1, 30, dtype="float32").reshape(6, 5))
    return F.matmul(x, w)


def matmul_4d(x):
    return F.matmul(x, x.transpose(0, 1, 3, 2))


MODELS = {
    "encoder_block": (EncoderBlock, (1, 16, 64)),
    "flatten_head": (FlattenHead, (1, 3, 6, 6)),
    "reshape_batch": (lambda: reshape_batch, (1, 3, 4)),
    "broadcast_batch": (lambda: broadcast_batch, (1, 4, 8)),
    "zeros_batch": (lambda: zeros_batch, (1, 6)),
    "shape_arithmetic": (lambda: shape_arithmetic, (1, 2, 4, 6)),
    "arange_batch": (lambda: arange_batch, (1, 5)),
    "shape_as_tensor": (lambda: shape_as_tensor, (1, 4, 6)),
    "slice_half": (lambda: slice_half, (1, 6, 4)),
    "index_from_shape": (lambda: index_from_shape, (1, 3)),
    "vector_index_from_shape": (lambda: vector_index_from_shape, (3, 4)),
    "broadcast_to_shape": (lambda: broadcast_to_shape, (1, 3)),
    "tensor_of_shape": (lambda: tensor_of_shape, (1, 3)),
    "matmul_3d_2d": (lambda: matmul_3d_2d, (1, 4, 6)),
    "matmul_4d": (lambda: matmul_4d, (1, 2, 4, 6)),
}


def _traced(name):
    make, shape = MODELS[name]
    model = make()
    if isinstance(model, M.Module):
        model.eval()
    traced = trace(lambda x: model(x), symbolic=True, capture_as_const=True)
    traced(mge.tensor(np.zeros(shape, np.float32)))
    return model, traced, shape


@pytest.mark.lite
@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "unoptimized"])
@pytest.mark.parametrize("name", list(MODELS))
def test_dump_at_batch_1_runs_at_batch_8(name, optimize, lite, rng, tmp_path):
    model, traced, shape = _traced(name)
    path = tmp_path / f"{name}.mge"
    traced.dump(path, arg_names=["x"], output_names=["y"], optimize_for_inference=optimize)
    loaded = load_graph(path)
    for batch in (1, 8):
        x = rng.uniform(-1, 1, size=(batch,) + shape[1:]).astype(np.float32)
        want = model(mge.tensor(x)).numpy()
        got = lite.run_model(path, {"x": x})["y"]
        assert rel_err(got, want) <= 1e-5, (name, batch)
        if batch == 8:
            assert rel_err(loaded.run(x=x)["y"], want) <= 1e-5, name


@pytest.mark.parametrize("name", list(MODELS))
def test_optimized_dump_has_no_more_oprs_than_unoptimized(name, tmp_path):
    """optimize_for_inference never makes a file bigger (the shape arithmetic it keeps
    out of TVM is written once, as unoptimized)."""
    from megtrace.fbs.reader import read_model
    _, traced, _ = _traced(name)
    counts = {}
    for optimize in (False, True):
        path = tmp_path / f"{name}-{optimize}.mge"
        traced.dump(path, arg_names=["x"], optimize_for_inference=optimize)
        counts[optimize] = len(read_model(path.read_bytes()).oprs)
    assert counts[True] <= counts[False], (name, counts)


# -- the same oprs as MegEngine's own dump ----------------------------------------------
def _opr_sequence(path) -> list[dict]:
    """A dump's oprs as tests/data/make_megengine_symbolic_shapes.py lists MegEngine's:
    ImmutableTensors left out, inputs as indexes of earlier oprs (None: a constant), types
    by MegEngine's class names (the serialized name without its version)."""
    import re

    from megtrace.fbs.reader import read_model
    model = read_model(Path(path).read_bytes())
    index: dict[int, int | None] = {}
    rows = []
    for opr in model.oprs:
        if opr.type == "ImmutableTensor":
            index.update({o: None for o in opr.outputs})
            continue
        index.update({o: len(rows) for o in opr.outputs})
        params = opr.params[0][1] if opr.params else {}
        rows.append({"type": re.sub(r"V\d$", "", opr.type),
                     "inputs": [index[i] for i in opr.inputs],
                     "mode": params.get("mode"), "axis": params.get("axis")})
    return rows


def _megengine_sequence(key: str) -> list[dict]:
    golden = json.loads((DATA / "megengine_symbolic_shapes.json").read_text())[key]
    rows = []
    for r in golden:
        p = r["params"] if isinstance(r["params"], dict) else {}
        rows.append({"type": r["type"], "inputs": r["inputs"], "mode": p.get("mode"),
                     "axis": p.get("axis")})
    return rows


def _expression(rows: list[dict]) -> tuple:
    """The computation of the last opr as a tree (order of the list and of commutative
    operands aside): (type, mode, axis, operands), a constant operand as "const".
    Subtracting a constant is adding one (MegEngine's optimizer writes x - c as
    x + (-c); constants' values are not compared)."""
    def tree(i):
        if i is None:
            return "const"
        r = rows[i]
        operands = [tree(j) for j in r["inputs"]]
        mode = r["mode"]
        if r["type"] == "Elemwise" and mode == "SUB" and operands[1] == "const":
            mode = "ADD"
        if r["type"] == "Elemwise" and mode in ("ADD", "MUL"):
            operands.sort(key=repr)
        axis = None if r["type"] in ("Reshape", "GetVarShape") and r["axis"] == 7 else r["axis"]
        return (r["type"], mode, axis, tuple(operands))
    return tree(len(rows) - 1)


@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "unoptimized"])
@pytest.mark.parametrize("name", ["reshape_batch", "broadcast_batch", "zeros_batch",
                                  "matmul_3d_2d", "matmul_4d", "slice_half",
                                  "index_from_shape", "vector_index_from_shape",
                                  "broadcast_to_shape", "tensor_of_shape"])
def test_opr_sequence_matches_megengine_dump(name, optimize, tmp_path):
    """The same oprs (type, Elemwise/Reduce mode, axis), wired the same way, as MegEngine
    1.13's dump of the same code (tests/data/make_megengine_symbolic_shapes.py)."""
    _, traced, _ = _traced(name)
    path = tmp_path / "m.mge"
    traced.dump(path, arg_names=["x"], optimize_for_inference=optimize)
    ours = _opr_sequence(path)
    theirs = _megengine_sequence(f"{name}/{'opt' if optimize else 'noopt'}")
    assert len(ours) == len(theirs)
    assert _expression(ours) == _expression(theirs)


# -- tracing: Python sees ints, TVM sees static shapes ------------------------------------
def test_traced_shapes_are_ints_that_record_their_expression():
    from megtrace.symbolic import SymInt
    seen = {}

    @trace(symbolic=True, capture_as_const=True)
    def f(x):
        n, c = x.shape
        np.testing.assert_array_equal(x.shape.numpy(), [2, 4])    # MegEngine: a shape Tensor
        seen["n"], seen["half"] = n, c // 2
        assert n == 2 and isinstance(n, int) and list(range(c)) == [0, 1, 2, 3]
        return x.reshape(n * 2, c // 2)

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(f(mge.tensor(x)).numpy(), x.reshape(4, 2))
    assert isinstance(seen["n"], SymInt) and isinstance(seen["half"], SymInt)
    assert seen["half"] == 2 and not isinstance(seen["n"] / 2, SymInt)
    ops = [n.op.name for n in f.graph.nodes]
    assert ops.count("shape_of") == 1 and "make_shape" in ops


def test_compiled_graph_has_no_shape_arithmetic_and_follows_the_batch():
    """TVM compiles the static graph (the shape nodes never reach kernels); a call at a
    new batch size traces again (symbolic_shape=True keeps a trace per input shape)."""
    f = trace(zeros_batch, symbolic=True, capture_as_const=True)
    for batch in (1, 8, 1):
        x = np.full((batch, 6), 0.5, np.float32)
        np.testing.assert_array_equal(f(mge.tensor(x)).numpy(), zeros_batch(mge.tensor(x)).numpy())
    entry = f._last_entry
    exec_ops = {n.op.name for n in entry.exec_graph().nodes}
    assert {"shape_of", "make_shape", "subtensor"}.isdisjoint(exec_ops)
    assert {"shape_of", "make_shape"} <= {n.op.name for n in entry.graph.nodes}


def test_symbolic_shape_false_bakes_the_traced_shape(tmp_path):
    f = trace(reshape_batch, symbolic=True, capture_as_const=True, symbolic_shape=False)
    f(mge.tensor(np.ones((1, 3, 4), np.float32)))
    assert "shape_of" not in {n.op.name for n in f.graph.nodes}
    f.dump(tmp_path / "m.mge", arg_names=["x"], optimize_for_inference=False)
    assert "GetVarShape" not in {r["type"] for r in _opr_sequence(tmp_path / "m.mge")}


@pytest.mark.lite
@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "unoptimized"])
def test_one_hot_dump_follows_the_batch(optimize, lite, tmp_path):
    """F.one_hot's zeros and ones take the index's run-time shape, as in MegEngine."""
    f = trace(lambda x: F.one_hot(x, 5), symbolic=True, capture_as_const=True)
    f(mge.tensor(np.ones((1, 3), np.int32)))
    path = tmp_path / "m.mge"
    f.dump(path, arg_names=["x"], output_names=["y"], optimize_for_inference=optimize)
    x = (np.arange(24, dtype=np.int32) % 5).reshape(8, 3)
    want = (x[..., None] == np.arange(5)).astype(np.int32)
    np.testing.assert_array_equal(lite.run_model(path, {"x": x})["y"], want)
