"""Our .mge files run in the real MegEngine Lite 1.13 runtime and match megtrace."""
import numpy as np
import pytest
from conftest import rel_err
from models import MLP, ConvNet, GapNet, randomize_bn

import megtrace as mge
from megtrace.jit import trace

pytestmark = pytest.mark.lite


@pytest.mark.parametrize("model,shape", [(MLP, (1, 64)), (ConvNet, (1, 3, 32, 32)),
                                         (GapNet, (1, 3, 16, 16))],
                         ids=["mlp", "convnet", "gapnet"])
def test_our_dump_runs_in_megengine_lite(model, shape, lite, rng, tmp_path):
    net = randomize_bn(model(), rng).eval()

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    infer(mge.tensor(x))
    path = tmp_path / "model.mge"
    infer.dump(path, arg_names=["data"], output_names=["out"])
    for batch in (1, 8):       # traced at batch 1; flatten keeps the batch symbolic
        xb = rng.uniform(-1, 1, size=(batch,) + shape[1:]).astype(np.float32)
        outs = lite.run_model(path, {"data": xb})
        assert list(outs) == ["out"]
        assert rel_err(outs["out"], net(mge.tensor(xb)).numpy()) <= 1e-4


def test_lite_agrees_with_megengine_fixture(lite, fixtures_dir):
    """The harness itself: Lite reproduces MegEngine's own expected output."""
    x = np.load(fixtures_dir / "convnet_in_b1.npy")
    outs = lite.run_model(fixtures_dir / "convnet_plain.mge", {"data": x})
    assert rel_err(outs["out"], np.load(fixtures_dir / "convnet_out_b1.npy")) <= 1e-6
