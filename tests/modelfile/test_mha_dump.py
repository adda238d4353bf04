"""M.MultiHeadAttention against real MegEngine 1.13 on CPU (its proxy kernel;
tests/data/make_megengine_mha.py): megtrace's module computes MegEngine's outputs,
MegEngine's dump (a MultiHeadAttn opr) loads and runs to them, and megtrace writes the
same opr with MegEngine's params, which the real Lite runs to MegEngine's outputs."""
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.module as M
from megtrace import load_graph
from megtrace.fbs.reader import read_model

DATA = Path(__file__).resolve().parents[1] / "data"
CONFIGS = {"self_bias": (8, 2, {"bias": True}), "self_nobias": (8, 4, {"bias": False}),
           "cross": (6, 3, {"bias": True})}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_module_computes_megengines_outputs(name):
    d = np.load(DATA / "megengine_mha.npz")
    embed, heads, kwargs = CONFIGS[name]
    m = M.MultiHeadAttention(embed, heads, **kwargs).eval()
    m.load_state_dict({**m.state_dict(), "io_weight_bias": d[f"{name}.w"]})
    y = m(*(mge.tensor(d[f"{name}.{t}"]) for t in "qkv"))[0]
    assert rel_err(y.numpy(), d[f"{name}.y"]) <= 1e-5


def test_megengine_dump_loads_and_computes_megengines_outputs():
    d = np.load(DATA / "megengine_mha.npz")
    path = DATA / "megengine_mha.mge"
    assert "MultiHeadAttn" in [o.type for o in read_model(path.read_bytes()).oprs]
    got = load_graph(path).run(x=d["self_bias.q"])
    assert rel_err(got["y"], d["self_bias.y"]) <= 1e-5


def _dump_ours(tmp_path) -> Path:
    from megtrace.jit import trace
    d = np.load(DATA / "megengine_mha.npz")
    m = M.MultiHeadAttention(8, 2, bias=True).eval()
    m.load_state_dict({**m.state_dict(), "io_weight_bias": d["self_bias.w"]})
    f = trace(lambda x: m(x, x, x)[0], symbolic=True, capture_as_const=True)
    f(mge.tensor(d["self_bias.q"]))
    path = tmp_path / "mha.mge"
    f.dump(path, arg_names=["x"], output_names=["y"])
    return path


def _mha_opr(path: Path):
    (opr,) = [o for o in read_model(path.read_bytes()).oprs if o.type == "MultiHeadAttn"]
    return opr


def test_megtrace_writes_megengines_opr_with_megengines_params(tmp_path):
    ours, theirs = _mha_opr(_dump_ours(tmp_path)), _mha_opr(DATA / "megengine_mha.mge")
    (table, fields), = ours.params
    (their_table, their_fields), = theirs.params
    assert table == their_table == "MultiHeadAttn"
    their_fields = {k: v for k, v in their_fields.items() if k != "seed"}    # dropout's seed
    assert {k: v for k, v in fields.items() if k != "seed"} == their_fields
    assert len(ours.outputs) == len(theirs.outputs) and len(ours.inputs) == 4


@pytest.mark.lite
def test_lite_runs_megtraces_dump_to_megengines_outputs(lite, tmp_path):
    d = np.load(DATA / "megengine_mha.npz")
    path = _dump_ours(tmp_path)
    got = lite.run_model(path, {"x": d["self_bias.q"]})
    assert rel_err(got["y"], d["self_bias.y"]) <= 1e-5
    back = load_graph(path).run(x=d["self_bias.q"])
    assert rel_err(back["y"], d["self_bias.y"]) <= 1e-5
