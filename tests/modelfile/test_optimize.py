"""optimize_for_inference (the default): TVM folds BatchNorm and constants, MegEngine's
fusions are applied, Metadata says so, and Lite runs the result (any batch)."""
import numpy as np
import pytest
from conftest import rel_err
from models import ConvNet, GapNet, randomize_bn
from zoo import MobileNetV2, ResNet18

import megtrace as mge
import megtrace.module as M
from megtrace.jit import trace
from megtrace.fbs.reader import read_model


def _traced(net, shape, rng):
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True)
    f(mge.tensor(rng.uniform(-1, 1, size=shape).astype(np.float32)))
    return f


def _kinds(path):
    model = read_model(open(path, "rb").read())
    kinds = []
    for o in model.oprs:
        mode = o.params[0][1].get("mode") if o.type == "Elemwise" else \
            o.params[0][1].get("nonlineMode") if o.type == "ConvBiasForward" else None
        kinds.append(f"{o.type}({mode})" if mode else o.type)
    return kinds, model.metadata


def test_default_dump_folds_batchnorm_like_megengine(rng, tmp_path):
    f = _traced(randomize_bn(ConvNet(), rng).eval(), (1, 3, 32, 32), rng)
    f.dump(tmp_path / "opt.mge", arg_names=["data"], output_names=["out"])
    kinds, meta = _kinds(tmp_path / "opt.mge")
    assert "BatchNormV1" not in kinds and "Elemwise(FUSE_ADD_RELU)" in kinds
    assert meta.optimize_options == 64                     # fuse_grain, as MegEngine's default
    f.dump(tmp_path / "fuse.mge", arg_names=["data"], enable_fuse_conv_bias_nonlinearity=True)
    kinds, meta = _kinds(tmp_path / "fuse.mge")
    assert "ConvBiasForward(RELU)" in kinds and "Convolution" not in kinds
    assert meta.optimize_options == 64 | 4
    f.dump(tmp_path / "plain.mge", optimize_for_inference=False)
    kinds, meta = _kinds(tmp_path / "plain.mge")
    assert "BatchNormV1" in kinds and meta.optimize_options == 0


class _ConvBn(M.Module):
    """A convolution of each kind, each followed by an inference BatchNorm."""

    def __init__(self):
        super().__init__()
        self.depthwise = M.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.grouped = M.Conv2d(8, 12, 3, padding=1, groups=4)
        self.dense = M.Conv2d(12, 8, 1)
        self.deconv = M.ConvTranspose2d(8, 6, 2, stride=2, groups=2)
        self.bns = [M.BatchNorm2d(c) for c in (8, 12, 8, 6)]

    def forward(self, x):
        for conv, bn in zip((self.depthwise, self.grouped, self.dense, self.deconv), self.bns):
            x = bn(conv(x))
        return x


def test_batchnorm_folds_into_every_convolution_kind(rng, tmp_path):
    net = randomize_bn(_ConvBn(), rng).eval()
    f = _traced(net, (1, 8, 8, 8), rng)
    f.dump(tmp_path / "m.mge", arg_names=["data"], output_names=["out"])
    kinds, _ = _kinds(tmp_path / "m.mge")
    for unfolded in ("BatchNormV1", "Elemwise(SUB)", "Elemwise(TRUE_DIV)", "Elemwise(MUL)"):
        assert unfolded not in kinds, kinds
    x = rng.uniform(-1, 1, size=(2, 8, 8, 8)).astype(np.float32)
    want = net(mge.tensor(x)).numpy()
    assert rel_err(mge.load_graph(tmp_path / "m.mge").run(data=x)["out"], want) <= 1e-5


def test_global_mean_becomes_adaptive_pooling(rng, tmp_path):
    f = _traced(GapNet().eval(), (1, 3, 16, 16), rng)
    f.dump(tmp_path / "g.mge")
    kinds, _ = _kinds(tmp_path / "g.mge")
    assert "AdaptivePoolingV1" in kinds and "ReduceV2" not in kinds
    f.dump(tmp_path / "g2.mge", enable_fuse_grain=False)
    assert "ReduceV2" in _kinds(tmp_path / "g2.mge")[0]


def test_unsupported_optimization_flags_are_refused(rng, tmp_path):
    f = _traced(ConvNet().eval(), (1, 3, 32, 32), rng)
    with pytest.raises(NotImplementedError, match="enable_weight_preprocess"):
        f.dump(tmp_path / "x.mge", enable_weight_preprocess=True)
    f.dump(tmp_path / "x.mge", optimize_for_inference=False, enable_hwcd4=True)  # ignored


@pytest.mark.lite
@pytest.mark.parametrize("make,shape,fuse", [
    (ConvNet, (3, 32, 32), False), (ConvNet, (3, 32, 32), True),
    (lambda: ResNet18(num_classes=10), (3, 32, 32), True),
    (lambda: MobileNetV2(num_classes=10, width_mult=0.5), (3, 32, 32), True),
    (lambda: MobileNetV2(num_classes=10, width_mult=0.5), (3, 32, 32), False),
], ids=["convnet", "convnet-fuse", "resnet18-fuse", "mobilenetv2-fuse", "mobilenetv2"])
def test_optimized_files_run_in_lite(make, shape, fuse, lite, rng, tmp_path):
    net = randomize_bn(make(), rng).eval()
    f = _traced(net, (1,) + shape, rng)
    path = tmp_path / "m.mge"
    f.dump(path, arg_names=["data"], output_names=["out"],
           enable_fuse_conv_bias_nonlinearity=fuse)
    for batch in (1, 8):
        x = rng.uniform(-1, 1, size=(batch,) + shape).astype(np.float32)
        want = net(mge.tensor(x)).numpy()
        assert rel_err(lite.run_model(path, {"data": x})["out"], want) <= 1e-4
        assert rel_err(mge.load_graph(path).run(data=x)["out"], want) <= 1e-5
