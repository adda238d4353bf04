"""traced_module.optimize (MegEngine's passes): "FuseConvBn" removes eval-mode BatchNorms
after convolutions, "BackwardFoldScale" folds constant scalings into convolution weights,
"FuseAddMul" joins chains of constant additions / multiplications;
the results stay those of the original module run eagerly."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.traced_module as tm


class SubConv(M.Conv2d):       # user subclasses: flatten() leaves F.conv2d / F.batch_norm
    pass


class SubBN(M.BatchNorm2d):
    pass


class Block(M.Module):
    def __init__(self, conv_cls, bn_cls, rng):
        super().__init__()
        self.conv, self.bn = conv_cls(3, 4, 3, padding=1), bn_cls(4)
        self.conv2, self.bn2 = conv_cls(3, 4, 1, bias=False), bn_cls(4)
        for bn in (self.bn, self.bn2):
            bn.weight[...] = rng.uniform(0.5, 2, bn.weight.shape).astype("float32")
            bn.bias[...] = rng.normal(size=bn.bias.shape).astype("float32")
            bn.running_mean[...] = rng.normal(size=bn.running_mean.shape).astype("float32")
            bn.running_var[...] = rng.uniform(0.5, 2, bn.running_var.shape).astype("float32")

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))) + self.bn2(self.conv2(x))


class Net(M.Module):
    def __init__(self, conv_cls, bn_cls):
        super().__init__()
        rng = np.random.RandomState(0)
        self.a, self.b = Block(conv_cls, bn_cls, rng), Block(conv_cls, bn_cls, rng)

    def forward(self, x):
        return self.a(x) * 2 + self.b(x)


@pytest.mark.parametrize("conv_cls", [M.Conv2d, SubConv])
@pytest.mark.parametrize("bn_cls", [M.BatchNorm2d, SubBN])
def test_fuse_conv_bn_removes_batchnorm_and_keeps_results(conv_cls, bn_cls):
    net = Net(conv_cls, bn_cls)
    net.eval()
    x = mge.tensor(np.random.RandomState(1).normal(size=(2, 3, 8, 8)).astype("float32"))
    want = net(x).numpy()
    traced = tm.trace_module(net, x).flatten()
    fused = tm.optimize(traced, "FuseConvBn")
    np.testing.assert_allclose(fused(x).numpy(), want, rtol=1e-5, atol=1e-5)
    assert not fused.graph.get_function_by_type(F.batch_norm).as_list()
    assert not fused.graph.get_module_by_type(M.BatchNorm2d).as_list()
    # the original traced module is untouched
    np.testing.assert_allclose(traced(x).numpy(), want, rtol=1e-6, atol=1e-6)
    assert traced.graph.get_function_by_type(F.batch_norm).as_list() or \
        traced.graph.get_module_by_type(M.BatchNorm2d).as_list()


def test_training_mode_batchnorm_and_unknown_passes_are_left_alone():
    net = Net(M.Conv2d, M.BatchNorm2d)
    net.train()
    x = mge.tensor(np.ones((1, 3, 8, 8), "float32"))
    traced = tm.trace_module(net, x).flatten()
    fused = tm.optimize(traced, "FuseConvBn")
    assert len(fused.graph.get_module_by_type(M.BatchNorm2d).as_list()) == 4
    same = tm.optimize(traced, ["NoSuchPass"])      # MegEngine ignores unknown names
    assert same is not traced and str(same.graph) == str(traced.graph)



class Scaled(M.Module):
    def __init__(self, conv_cls, sign=1):
        super().__init__()
        self.conv, self.bn = conv_cls(3, 4, 3, padding=1), M.BatchNorm2d(4)
        self.conv2 = conv_cls(3, 4, 1)
        self.scale = mge.tensor([3.0, 0.5 * sign])

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x))) * self.scale[0] + F.relu(self.conv2(x)) * self.scale[1]
        y = F.add(y, 2) * 4
        return F.reshape(y, (-1,)) * 2


@pytest.mark.parametrize("conv_cls", [M.Conv2d, SubConv])
def test_backward_fold_scale_moves_constant_scales_into_convolutions(conv_cls):
    net = Scaled(conv_cls)
    net.eval()
    x = mge.tensor(np.random.RandomState(2).normal(size=(2, 3, 6, 6)).astype("float32"))
    want = net(x).numpy()
    out = tm.optimize(tm.trace_module(net, x).flatten(), "BackwardFoldScale")
    np.testing.assert_allclose(out(x).numpy(), want, rtol=1e-5, atol=1e-4)
    assert not out.graph.get_method_by_type("__mul__").as_list()
    assert not out.graph.get_module_by_type(M.BatchNorm2d).as_list()


def test_negative_scale_does_not_cross_relu():
    net = Scaled(M.Conv2d, sign=-1)
    net.eval()
    x = mge.tensor(np.random.RandomState(3).normal(size=(1, 3, 6, 6)).astype("float32"))
    want = net(x).numpy()
    out = tm.optimize(tm.trace_module(net, x).flatten(), ["FuseConvBn", "BackwardFoldScale"])
    np.testing.assert_allclose(out(x).numpy(), want, rtol=1e-5, atol=1e-4)
    assert len(out.graph.get_method_by_type("__mul__").as_list()) == 1   # the -0.5 stays


class Chains(M.Module):
    def forward(self, x):
        y = (x + 1) + 2.5
        z = F.mul(x * 2, 3)
        w = (x * 4) * 0.5
        return y, z, w + w           # w is read twice: (x * 4) * 0.5 still folds


def test_fuse_add_mul_folds_constant_chains():
    x = mge.tensor(np.random.RandomState(4).normal(size=(3,)).astype("float32"))
    net = Chains()
    want = [t.numpy() for t in net(x)]
    out = tm.optimize(tm.trace_module(net, x), "FuseAddMul")
    for got, ref in zip(out(x), want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6)
    graph = out.graph
    adds = graph.get_method_by_type("__add__").as_list()
    muls = graph.get_method_by_type("__mul__").as_list() + \
        graph.get_function_by_type(F.mul).as_list()
    assert len(adds) == 2 and len(muls) == 2      # x + 3.5, w + w; x * 6, x * 2
