"""F.nn.region_restricted_conv / M.RegionRestrictedConv against real MegEngine 1.13
(golden outputs and gradients from tests/data/make_megengine_region_restricted_conv.py,
MegEngine's own dump) and the real MegEngine Lite."""
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.autodiff import GradManager
from megtrace.errors import DTypeError, ShapeError
from megtrace.fbs.reader import read_model
from megtrace.jit import trace

DATA = Path(__file__).parent / "data"
GOLDEN = np.load(DATA / "megengine_region_restricted_conv.npz")
TAGS = sorted({k.split("/")[0] for k in GOLDEN.files})


def _case(tag):
    d = {k.split("/")[1]: GOLDEN[k] for k in GOLDEN.files if k.startswith(tag + "/")}
    g, ph, pw, dh, dw = (int(v) for v in d["geometry"])
    return d, dict(padding=(ph, pw), dilation=(dh, dw), groups=g)


@pytest.mark.parametrize("tag", TAGS)
def test_eager_output_and_gradients_match_megengine(tag):
    d, geo = _case(tag)
    x, w = mge.tensor(d["x"]), mge.tensor(d["w"])
    gm = GradManager().attach([x, w])
    with gm:
        y = F.nn.region_restricted_conv(x, w, mge.tensor(d["rin"]), mge.tensor(d["rout"]), **geo)
        gm.backward(y, mge.tensor(d["dy"]))
    assert y.dtype == np.float32
    assert rel_err(y.numpy(), d["y"]) < 1e-5
    assert rel_err(x.grad.numpy(), d["gx"]) < 1e-5
    assert rel_err(w.grad.numpy(), d["gw"]) < 1e-5


@pytest.mark.parametrize("tag", TAGS)
def test_traced_step_matches_megengine(tag):
    d, geo = _case(tag)
    x, w = mge.Parameter(d["x"]), mge.Parameter(d["w"])
    gm = GradManager().attach([x, w])

    @trace(symbolic=True)
    def step(rin, rout, dy):
        with gm:
            y = F.region_restricted_conv(x, w, rin, rout, **geo)
            gm.backward(y, dy)
        return y

    for _ in range(2):
        x.grad = w.grad = None
        y = step(mge.tensor(d["rin"]), mge.tensor(d["rout"]), mge.tensor(d["dy"]))
        assert rel_err(y.numpy(), d["y"]) < 1e-5
        assert rel_err(x.grad.numpy(), d["gx"]) < 1e-5
        assert rel_err(w.grad.numpy(), d["gw"]) < 1e-5


def test_our_dump_runs_in_lite_and_megengines_dump_loads(lite, tmp_path):
    d, geo = _case("pad")
    w = mge.tensor(d["w"])

    @trace(symbolic=True, capture_as_const=True)
    def rrconv(x, rin, rout):
        return F.region_restricted_conv(x, w, rin, rout, **geo)

    rrconv(mge.tensor(d["x"]), mge.tensor(d["rin"]), mge.tensor(d["rout"]))
    path = tmp_path / "rr.mge"
    rrconv.dump(str(path), arg_names=["x", "rin", "rout"], output_names=["y"])
    feeds = {"x": d["x"], "rin": d["rin"], "rout": d["rout"]}
    got = lite.run_model(path, feeds)["y"]
    assert rel_err(got, d["y"]) < 1e-5
    # written as MegEngine writes it: one RegionRestrictedConvolution opr, same params
    ours = {o.type: o.params for o in read_model(path.read_bytes()).oprs}
    theirs_file = read_model((DATA / "megengine-1.13" / "region_restricted_conv.mge")
                             .read_bytes())
    want = {o.type: o.params for o in theirs_file.oprs}
    assert ours["RegionRestrictedConvolution"] == want["RegionRestrictedConvolution"]
    theirs = mge.load_graph(str(DATA / "megengine-1.13" / "region_restricted_conv.mge"))
    assert rel_err(theirs(**feeds).numpy(), d["y"]) < 1e-5


def test_module_layout_bias_and_forward():
    d, geo = _case("pad")
    m = M.RegionRestrictedConv(4, 6, (2, 3), groups=2, padding=(1, 0))
    assert m.weight.shape == (2, 3, 2, 2, 3) and m.bias.shape == (1, 6, 1, 1)
    m.weight[...] = d["w"]
    m.bias[...] = np.arange(6, dtype=np.float32).reshape(1, 6, 1, 1)
    y = m(mge.tensor(d["x"]), mge.tensor(d["rin"]), mge.tensor(d["rout"]))
    assert rel_err(y.numpy(), d["y"] + np.arange(6).reshape(1, 6, 1, 1)) < 1e-5


def test_clear_errors():
    x = mge.tensor(np.ones((1, 2, 4, 4), np.float32))
    w = mge.tensor(np.ones((2, 1, 1, 3, 3), np.float32))
    rin = mge.tensor(np.zeros((1, 4, 4), np.int32))
    rout = mge.tensor(np.zeros((1, 2, 2), np.int32))
    with pytest.raises(ValueError, match="stride 1"):
        F.region_restricted_conv(x, w, rin, rout, stride=2, groups=2)
    with pytest.raises(DTypeError, match="Int32 or Uint8"):
        F.region_restricted_conv(x, w, rin.astype("float32"), rout.astype("float32"),
                                 groups=2)
    with pytest.raises(ShapeError, match="rout"):
        F.region_restricted_conv(x, w, rin, mge.tensor(np.zeros((1, 3, 2), np.int32)),
                                 groups=2)
