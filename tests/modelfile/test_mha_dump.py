"""M.MultiHeadAttention against real MegEngine 1.13 on CPU (its proxy kernel;
tests/data/make_megengine_mha.py): megtrace's module computes MegEngine's outputs, and
MegEngine's dump (a MultiHeadAttn opr) loads and runs to them."""
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
