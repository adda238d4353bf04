"""F.nn.interpolate(x, size=y.shape[2:]) in a dumped trace: MegEngine 1.13 feeds Resize the
size as a shape var, so its dump follows the input's spatial size in Lite (checked with the
real MegEngine in the megref chroot); MegEngine/Models' DeepLabV3+ and FPN heads resize
this way. megtrace's resize op takes its size as a parameter, so the size read while
tracing is written as a constant and a new input size breaks the file (strict xfail: delete
the mark when resize takes a traced size)."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _upsample_to_skip(x, skip):
    """The decoder step of DeepLabV3+/FPN: bring x to skip's size and add them."""
    return F.nn.interpolate(x, skip.shape[2:], mode="bilinear") + skip


def _inputs(rng, h, w):
    return {"x": rng.uniform(size=(1, 2, h // 2, w // 2)).astype(np.float32),
            "skip": rng.uniform(size=(1, 2, h, w)).astype(np.float32)}


@pytest.mark.lite
def test_dump_traced_at_one_size_runs_at_the_traced_size_in_lite(rng, lite, tmp_path):
    traced = trace(symbolic=True, capture_as_const=True)(_upsample_to_skip)
    feeds = _inputs(rng, 8, 10)
    traced(*[mge.tensor(v) for v in feeds.values()])
    path = tmp_path / "resize.mge"
    traced.dump(path, arg_names=list(feeds), output_names=["out"])
    want = _upsample_to_skip(*[mge.tensor(v) for v in feeds.values()]).numpy()
    assert rel_err(lite.run_model(path, feeds)["out"], want) <= 1e-5


@pytest.mark.lite
@pytest.mark.xfail(strict=True, raises=RuntimeError, reason="resize's size is a parameter: the traced size is "
                   "dumped as a constant, where MegEngine writes a shape var")
def test_dump_follows_a_new_spatial_size_in_lite_as_megengines_does(rng, lite, tmp_path):
    traced = trace(symbolic=True, capture_as_const=True)(_upsample_to_skip)
    traced(*[mge.tensor(v) for v in _inputs(rng, 8, 10).values()])
    path = tmp_path / "resize.mge"
    traced.dump(path, arg_names=["x", "skip"], output_names=["out"])
    feeds = _inputs(rng, 12, 6)
    want = _upsample_to_skip(*[mge.tensor(v) for v in feeds.values()]).numpy()
    assert rel_err(lite.run_model(path, feeds)["out"], want) <= 1e-5
