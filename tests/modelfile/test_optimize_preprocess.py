"""enable_fuse_preprocess: MegEngine 1.13's passes for it (FuseNCHW4Int8Preprocess,
FuseWarpPerspectiveDimshufflePass) rewrite only uint8/quantized image preprocessing, so a
float model's dump is the plain one with Metadata bit 5 set -- as real MegEngine's dumps
of the same models show (tests/data/make_megengine_layout_models.py)."""
import io

import numpy as np
import pytest
from conftest import TESTS, rel_err

from megtrace.fbs.reader import read_model
from megtrace.graph_io import load_graph

from .mge_summary import counts, golden_counts
from .optimize_models import LAYOUT_GOLDEN, dumped, traced

DATA = TESTS / "data" / "megengine_optimize"


@pytest.mark.parametrize("name", ["padnet", "blocknet"])
def test_fuse_preprocess_changes_no_float_opr(name):
    real = LAYOUT_GOLDEN[name]
    assert golden_counts(real["enable_fuse_preprocess"]) == golden_counts(real["none"])
    assert counts(dumped(name, "enable_fuse_preprocess")) == counts(dumped(name, "none"))


@pytest.mark.parametrize("name", ["convnet", "padnet", "blocknet"])
def test_fuse_preprocess_metadata_bit_is_megengines(name):
    real = "convnet2" if name == "convnet" else name
    want = read_model((DATA / f"{real}_enable_fuse_preprocess.mge").read_bytes()) \
        .metadata.optimize_options
    assert want == 1 << 5 | 1 << 6                      # fuse_preprocess, fuse_grain
    assert read_model(dumped(name, "enable_fuse_preprocess")).metadata.optimize_options == want


@pytest.mark.parametrize("name", ["convnet", "padnet"])
def test_fuse_preprocess_dumps_run(name):
    """Ours in load_graph (the Lite run is the plain dump's) and real MegEngine's."""
    _, x, want = traced(name)
    (got,) = load_graph(io.BytesIO(dumped(name, "enable_fuse_preprocess"))).run(x).values()
    assert rel_err(got, want) <= 1e-5
    real = "convnet2" if name == "convnet" else name
    io_ = np.load(DATA / f"{real}_io.npz")
    (got,) = load_graph(DATA / f"{real}_enable_fuse_preprocess.mge").run(io_["data"]).values()
    assert rel_err(got, io_["out"]) <= 1e-5
