"""Whole models in MegEngine's API run eagerly and traced (TVM) with equal results, at
batch 1 and 8 (small spatial/sequence sizes keep the suite quick)."""
import numpy as np
import pytest
from conftest import rel_err
from zoo import EncoderBlock, MobileNetV2, ResNet18, TinyBert, randomize_bn

import megtrace as mge
from megtrace.jit import trace

CASES = [
    ("resnet18", lambda: ResNet18(num_classes=10), (3, 32, 32), "float32"),
    ("mobilenetv2", lambda: MobileNetV2(num_classes=10, width_mult=0.5), (3, 32, 32), "float32"),
    ("encoder", lambda: EncoderBlock(hidden=64, heads=4, ffn=256), (16, 64), "float32"),
    ("tinybert", lambda: TinyBert(), (16,), "int32"),
]


@pytest.mark.parametrize("name,make,shape,dtype", CASES, ids=[c[0] for c in CASES])
def test_model_eager_equals_traced(name, make, shape, dtype, rng):
    net = randomize_bn(make(), rng).eval()

    @trace(symbolic=True, capture_as_const=True)
    def infer(x):
        return net(x)

    for batch in (1, 8):
        if dtype == "int32":
            x = mge.tensor(rng.integers(0, 100, size=(batch,) + shape).astype(np.int32))
        else:
            x = mge.tensor(rng.uniform(-1, 1, size=(batch,) + shape).astype(np.float32))
        want = net(x).numpy()
        assert rel_err(infer(x).numpy(), want) <= 1e-5, (name, batch)   # records + compiles
        assert rel_err(infer(x).numpy(), want) <= 1e-5, (name, batch)   # replays


def test_dropout_is_identity_in_eval_and_random_in_train(rng):
    net = EncoderBlock(hidden=32, heads=4, ffn=64, dropout=0.5)
    x = mge.tensor(rng.uniform(size=(1, 4, 32)).astype(np.float32))
    net.eval()
    assert np.array_equal(net(x).numpy(), net(x).numpy())
    net.train()
    assert not np.array_equal(net(x).numpy(), net(x).numpy())
