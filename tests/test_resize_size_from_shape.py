"""F.nn.interpolate(x, size=y.shape[2:]) in a dumped trace: MegEngine 1.13 feeds Resize the
size as a shape var, so its dump follows the input's spatial size in Lite (checked with the
real MegEngine in the megref chroot); MegEngine/Models' DeepLabV3+ and FPN heads resize
this way. megtrace's resize op takes the traced size expression as a shape input
(OpDef.shape_input, shape_param "size") and writes it as Resize's size var."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace


def _upsample_to_skip(x, skip):
    """The decoder step of DeepLabV3+/FPN: bring x to skip's size and add them."""
    return F.nn.interpolate(x, skip.shape[2:], mode="bilinear") + skip


def _inputs(rng, h, w, channels=2):
    return {"x": rng.uniform(size=(1, channels, h // 2, w // 2)).astype(np.float32),
            "skip": rng.uniform(size=(1, channels, h, w)).astype(np.float32)}


@pytest.mark.lite
def test_dump_traced_at_one_size_runs_at_the_traced_size_in_lite(rng, lite, tmp_path):
    traced = trace(symbolic=True, capture_as_const=True)(_upsample_to_skip)
    feeds = _inputs(rng, 8, 10)
    traced(*[mge.tensor(v) for v in feeds.values()])
    path = tmp_path / "resize.mge"
    traced.dump(path, arg_names=list(feeds), output_names=["out"])
    want = _upsample_to_skip(*[mge.tensor(v) for v in feeds.values()]).numpy()
    assert rel_err(lite.run_model(path, feeds)["out"], want) <= 1e-5


def test_loaded_dump_and_replays_follow_a_new_spatial_size(rng, tmp_path):
    traced = trace(symbolic=True, capture_as_const=True)(_upsample_to_skip)
    traced(*[mge.tensor(v) for v in _inputs(rng, 8, 10).values()])
    path = tmp_path / "resize.mge"
    traced.dump(path, arg_names=["x", "skip"], output_names=["out"])
    feeds = _inputs(rng, 12, 6)
    want = _upsample_to_skip(*[mge.tensor(v) for v in feeds.values()]).numpy()
    args = [mge.tensor(v) for v in feeds.values()]
    assert rel_err(traced(*args).numpy(), want) <= 1e-5
    assert rel_err(mge.load_graph(path)(*args).numpy(), want) <= 1e-5


@pytest.mark.lite
@pytest.mark.parametrize("options", [{}, {"optimize_for_inference": True,
                                          "enable_fuse_conv_bias_nonlinearity": True},
                                     {"enable_nchw44": True}, {"enable_nchw88": True}],
                         ids=["default", "deploy", "nchw44", "nchw88"])
def test_dump_follows_a_new_spatial_size_in_lite_as_megengines_does(options, rng, lite,
                                                                    tmp_path):
    conv = M.Conv2d(8, 8, 3, padding=1)      # so that the layout options block the resize

    def decoder(x, skip):
        return _upsample_to_skip(F.relu(conv(x)), skip)
    traced = trace(symbolic=True, capture_as_const=True)(decoder)
    traced(*[mge.tensor(v) for v in _inputs(rng, 8, 10, 8).values()])
    path = tmp_path / "resize.mge"
    traced.dump(path, arg_names=["x", "skip"], output_names=["out"], **options)
    feeds = _inputs(rng, 12, 6, 8)
    want = decoder(*[mge.tensor(v) for v in feeds.values()]).numpy()
    assert rel_err(lite.run_model(path, feeds)["out"], want) <= 1e-5
