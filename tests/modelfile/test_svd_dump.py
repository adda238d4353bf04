"""SVD in .mge files, against real MegEngine 1.13 (tests/data/make_megengine_svd_dump.py):
megtrace reads MegEngine's dump of F.svd, writes the same opr, and the real Lite runs
megtrace's file. Singular vectors are unique only up to sign, so U's columns and Vh's rows
are matched to MegEngine's before comparing."""
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace import load_graph
from megtrace.jit import trace

DATA = Path(__file__).resolve().parents[1] / "data" / "megengine_svd"


def _golden():
    io = np.load(DATA / "svd_io.npz")
    return io["x"], [io["u"], io["s"], io["vh"]]


def _assert_factors_equal(got, want):
    u, s, vh = (np.asarray(g) for g in got)
    sign = np.where(np.sum(u * want[0], axis=-2, keepdims=True) < 0, -1, 1).astype(u.dtype)
    for g, w in zip((u * sign, s, vh * np.swapaxes(sign, -1, -2)), want):
        assert rel_err(g, w) <= 1e-5


def _dumped(tmp_path) -> Path:
    x, _ = _golden()
    f = trace(lambda t: F.svd(t), symbolic=True, capture_as_const=True)
    f(mge.tensor(x))
    path = tmp_path / "svd.mge"
    f.dump(path, arg_names=["x"], output_names=["u", "s", "vh"])
    return path


def test_megengine_dump_of_svd_loads_and_runs():
    x, want = _golden()
    out = load_graph(DATA / "svd.mge").run(x=x)
    _assert_factors_equal([out["u"], out["s"], out["vh"]], want)


def test_written_like_megengine(tmp_path):
    from megtrace.fbs.reader import read_model
    ours = read_model(_dumped(tmp_path).read_bytes())
    theirs = read_model((DATA / "svd.mge").read_bytes())
    shape = [(o.type, o.params) for o in ours.oprs if o.type == "SVD"]
    assert shape == [(o.type, o.params) for o in theirs.oprs if o.type == "SVD"]
    assert [o.type for o in ours.oprs] == [o.type for o in theirs.oprs]


@pytest.mark.lite
def test_megtrace_dump_of_svd_runs_in_lite_like_megengine(tmp_path, lite):
    x, want = _golden()
    got = lite.run_model(_dumped(tmp_path), {"x": x})
    _assert_factors_equal([got["u"], got["s"], got["vh"]], want)


def test_full_matrices_is_refused_with_megengine_reason(tmp_path):
    from megtrace.errors import UnsupportedOpError
    f = trace(lambda t: F.svd(t, full_matrices=True), symbolic=True, capture_as_const=True)
    f(mge.tensor(_golden()[0]))
    with pytest.raises(UnsupportedOpError, match="full singular vectors is not supported"):
        f.dump(tmp_path / "full.mge", arg_names=["x"], optimize_for_inference=False)
