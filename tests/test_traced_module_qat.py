"""Tracing QAT networks (MegEngine's rules): observers and fake quantizers, user
subclasses included, are called as they are (not traced into); a traced user subclass of
a QAT module keeps the QAT attributes."""
from functools import partial

import numpy as np

import megtrace as mge
import megtrace.module as M
import megtrace.module.qat as QM
import megtrace.quantization as Q
from megtrace.traced_module import TracedModule, trace_module
from megtrace.traced_module.utils import get_subattr


class MyObserver(Q.MinMaxObserver):
    pass


class MyQATConvBnRelu2d(QM.ConvBnRelu2d):
    pass


class MyConvBnRelu2d(M.ConvBnRelu2d):
    pass


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = MyConvBnRelu2d(3, 3, 3, 1, 1)
        self.conv1 = M.ConvBn2d(3, 3, 1)

    def forward(self, x):
        return self.conv1(self.conv0(x))


def test_qat_net_with_user_observer_traces_and_keeps_qparams():
    config = Q.QConfig(weight_observer=partial(MyObserver, dtype="qint8_narrow"),
                       act_observer=partial(MyObserver, dtype="qint8"),
                       weight_fake_quant=None, act_fake_quant=None)
    net = Q.quantize_qat(Net(), qconfig=config, mapping={MyConvBnRelu2d: MyQATConvBnRelu2d})
    x = mge.tensor(np.random.RandomState(0).random((2, 3, 8, 8)).astype("float32"))
    Q.enable_observer(net)
    net.eval()
    net(x)
    Q.disable_observer(net)
    want = net(x).numpy()
    traced = trace_module(net, x)
    np.testing.assert_allclose(traced(x).numpy(), want, rtol=1e-6)
    conv0 = get_subattr(traced, "conv0")
    assert isinstance(conv0, TracedModule) and conv0.is_qat
    assert conv0.act_fake_quant is None and conv0.with_act
    assert type(conv0.act_observer) is MyObserver      # called as a builtin, not traced
    np.testing.assert_array_equal(conv0.act_observer.get_qparams().scale.numpy(),
                                  net.conv0.act_observer.get_qparams().scale.numpy())
