"""megtrace.utils.bn_fusion (MegEngine's): the fused module computes what the separate
modules compute; folding happens in eval mode only, training keeps a BatchNorm copy."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.module as M
from megtrace.utils.bn_fusion import (fold_weight_bias, fuse_conv_bn_relu_module,
                                      fuse_linear_bn_relu_module)


def _randomize_bn(bn, rng):
    bn.weight[...] = rng.uniform(0.5, 2, bn.weight.shape).astype("float32")
    bn.bias[...] = rng.normal(size=bn.bias.shape).astype("float32")
    bn.running_mean[...] = rng.normal(size=bn.running_mean.shape).astype("float32")
    bn.running_var[...] = rng.uniform(0.5, 2, bn.running_var.shape).astype("float32")


@pytest.mark.parametrize("kind", ["conv", "grouped", "transpose"])
def test_conv_bn_relu_folds_in_eval_mode(kind):
    rng = np.random.RandomState(0)
    if kind == "transpose":
        conv = M.ConvTranspose2d(4, 6, 3, stride=2)
    else:
        conv = M.Conv2d(4, 6, 3, padding=1, groups=2 if kind == "grouped" else 1)
    bn, relu = M.BatchNorm2d(6), M.ReLU()
    _randomize_bn(bn, rng)
    conv.eval(), bn.eval()
    fused = fuse_conv_bn_relu_module(conv, bn, relu)
    assert type(fused).__name__ == ("ConvTransposeRelu2d" if kind == "transpose" else "ConvRelu2d")
    fused.eval()
    x = mge.tensor(rng.normal(size=(2, 4, 7, 7)).astype("float32"))
    ref = np.maximum(bn(conv(x)).numpy(), 0)
    np.testing.assert_allclose(fused(x).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_training_mode_keeps_a_batchnorm_copy():
    conv, bn = M.Conv2d(3, 5, 3), M.BatchNorm2d(5)
    fused = fuse_conv_bn_relu_module(conv, bn, None)
    assert type(fused).__name__ == "ConvBn2d" and fused.bn is not bn and fused.training
    np.testing.assert_array_equal(fused.conv.weight.numpy(), conv.weight.numpy())
    linear, bn1 = M.Linear(4, 3), M.BatchNorm1d(3)
    fused = fuse_linear_bn_relu_module(linear, bn1, M.ReLU())
    assert type(fused).__name__ == "LinearBnRelu1d"
    np.testing.assert_array_equal(fused.linear.weight.numpy(), linear.weight.numpy())


def test_linear_bn_folds_and_fold_weight_bias_matches_numpy():
    rng = np.random.RandomState(1)
    linear, bn = M.Linear(6, 4), M.BatchNorm1d(4)
    _randomize_bn(bn, rng)
    linear.eval(), bn.eval()
    fused = fuse_linear_bn_relu_module(linear, bn, None)
    fused.eval()
    x = mge.tensor(rng.normal(size=(5, 6)).astype("float32"))
    np.testing.assert_allclose(fused(x).numpy(), bn(linear(x)).numpy(), rtol=1e-4, atol=1e-4)
    w, b = fold_weight_bias(linear.weight, linear.bias, bn.weight, bn.bias, bn.running_mean,
                            bn.running_var, bn.eps)
    istd = 1 / np.sqrt(bn.running_var.numpy().reshape(-1) + bn.eps)
    g = bn.weight.numpy().reshape(-1)
    np.testing.assert_allclose(w.numpy(), linear.weight.numpy() * (g * istd)[:, None], rtol=1e-6)
    np.testing.assert_allclose(
        b.numpy(), bn.bias.numpy().reshape(-1) + g * (linear.bias.numpy() -
                                                      bn.running_mean.numpy().reshape(-1)) * istd,
        rtol=1e-5, atol=1e-6)


def test_mismatched_modules_are_refused():
    with pytest.raises(AssertionError, match="num_features"):
        fuse_conv_bn_relu_module(M.Conv2d(3, 5, 3), M.BatchNorm2d(4), None)
    conv, bn = M.Conv2d(3, 5, 3), M.BatchNorm2d(5)
    bn.eval()
    with pytest.raises(AssertionError, match="same mode"):
        fuse_conv_bn_relu_module(conv, bn, None)
