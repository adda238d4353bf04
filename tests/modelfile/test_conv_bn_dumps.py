"""MegEngine's optimized dumps of a biased conv + BatchNorm, against real MegEngine 1.13
(tests/data/make_megengine_conv_bn_dumps.py): MegEngine writes the BN as a
FUSE_MUL_ADD3 whose operand is Broadcast(conv, GetVarShape(bias, conv)), a GetVarShape
of two inputs that stands for their broadcast shape. megtrace's readers (load_graph,
GraphInference, Network.load) run these files to MegEngine's outputs, at the traced
batch and at another, and a loaded Network dumps again into a file the real Lite runs."""
import io
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

from megtrace import load_graph
from megtrace.fbs.reader import read_model
from megtrace.utils.comp_graph_tools import GraphInference
from megtrace.utils.network import Network

DATA = Path(__file__).resolve().parents[1] / "data" / "megengine_conv_bn"
FILES = [f"{net}_{opt}" for net in ("conv_bn", "grouped_bn_deconv") for opt in ("opt", "fuse")]


def _golden(name: str) -> tuple[np.ndarray, np.ndarray]:
    io_ = np.load(DATA / "io.npz")
    return io_["x"], io_[name.rsplit("_", 1)[0]]


@pytest.mark.parametrize("name", FILES)
def test_file_has_a_getvarshape_of_two_inputs(name):
    """The files hold the pattern under test (what MegEngine's make script printed)."""
    oprs = read_model((DATA / f"{name}.mge").read_bytes()).oprs
    assert [len(o.inputs) for o in oprs if o.type.startswith("GetVarShape")] == [2]


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("batch", [2, 1])
def test_load_graph_computes_megengines_output(name, batch):
    x, want = _golden(name)
    got = load_graph(DATA / f"{name}.mge").run(x=x[:batch])
    assert list(got) == ["y"]
    assert rel_err(got["y"], want[:batch]) <= 1e-5


@pytest.mark.parametrize("name", FILES)
def test_graph_inference_computes_megengines_output(name):
    x, want = _golden(name)
    g = GraphInference(str(DATA / f"{name}.mge"))
    assert rel_err(g.run(x)["y"], want) <= 1e-5
    assert rel_err(g.run(inp_dict={"x": x})["y"], want) <= 1e-5


def _redumped(name: str) -> bytes:
    net = Network.load(str(DATA / f"{name}.mge"))
    assert [v.name for v in net.input_vars] == ["x"]
    f = io.BytesIO()
    net.dump(f, optimize_for_inference=False)
    return f.getvalue()


@pytest.mark.parametrize("name", FILES)
def test_network_load_dumps_again_to_megengines_output(name):
    x, want = _golden(name)
    got = GraphInference(io.BytesIO(_redumped(name))).run(inp_dict={"x": x})
    assert rel_err(got["y"], want) <= 1e-5


@pytest.mark.lite
@pytest.mark.parametrize("name", ["conv_bn_opt", "grouped_bn_deconv_fuse"])
def test_network_redump_runs_in_lite_to_megengines_output(name, lite, tmp_path):
    x, want = _golden(name)
    path = tmp_path / f"{name}.mge"
    path.write_bytes(_redumped(name))
    got = lite.run_model(path, {"x": x})
    assert rel_err(got["y"], want) <= 1e-5


def test_megbrain_graph_module_loads_and_dumps_again():
    """MegEngine's `from megengine.core.tensor import megbrain_graph as G` path."""
    from megtrace.core.tensor import megbrain_graph as G
    x, want = _golden("conv_bn_opt")
    with open(DATA / "conv_bn_opt.mge", "rb") as f:
        _, outputs_by_name, outputs, _ = G.load_graph(f)
    assert list(outputs_by_name) == ["y"]
    data, _ = G.dump_graph(outputs)
    assert rel_err(GraphInference(io.BytesIO(data)).run(x)["y"], want) <= 1e-5
