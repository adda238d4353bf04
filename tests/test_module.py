"""Modules: parameter naming/shapes, state dicts, train/eval, BatchNorm statistics."""
import numpy as np
import pytest
from conftest import rel_err
from models import ConvNet

import megtrace as mge
import megtrace.module as M


def test_parameter_names_and_shapes_follow_megengine():
    net = ConvNet()
    shapes = {n: p.shape for n, p in net.named_parameters()}
    assert shapes == {"bn.bias": (1, 16, 1, 1), "bn.weight": (1, 16, 1, 1),
                      "conv.bias": (1, 16, 1, 1), "conv.weight": (16, 3, 3, 3),
                      "fc.bias": (10,), "fc.weight": (10, 4096)}
    assert {n for n, _ in net.named_buffers()} == {"bn.running_mean", "bn.running_var"}
    grouped = M.Conv2d(4, 8, 3, groups=2)
    assert grouped.weight.shape == (2, 4, 2, 3, 3)


def test_state_dict_round_trip(tmp_path):
    a, b = ConvNet(), ConvNet()
    mge.save(a.state_dict(), tmp_path / "ckpt.pkl")
    b.load_state_dict(mge.load(tmp_path / "ckpt.pkl"))
    for (na, ta), (nb, tb) in zip(a.named_tensors(), b.named_tensors()):
        assert na == nb and np.array_equal(ta.numpy(), tb.numpy())


def test_load_state_dict_accepts_flat_batchnorm_and_checks_keys():
    net = ConvNet()
    state = net.state_dict()
    assert state["bn.weight"].shape == (16,)                  # (C,) as MegEngine saves it
    state["bn.weight"] = np.arange(16, dtype=np.float32)
    net.load_state_dict(state)
    assert net.bn.weight.shape == (1, 16, 1, 1)
    assert np.array_equal(net.bn.weight.numpy().ravel(), np.arange(16))
    del state["fc.bias"]
    with pytest.raises(KeyError, match="fc.bias"):
        net.load_state_dict(state)


def test_batchnorm_train_uses_batch_stats_and_updates_running_stats(rng):
    bn = M.BatchNorm2d(3, momentum=0.9)
    x = rng.normal(2.0, 3.0, size=(8, 3, 5, 5)).astype(np.float32)
    y = bn(mge.tensor(x)).numpy()
    mean = x.astype(np.float64).mean(axis=(0, 2, 3), keepdims=True)
    var = x.astype(np.float64).var(axis=(0, 2, 3), keepdims=True)
    assert rel_err(y, (x - mean) / np.sqrt(var + 1e-5)) <= 1e-5
    unbiased = var * x.size / 3 / (x.size / 3 - 1)
    assert rel_err(bn.running_mean.numpy(), 0.1 * mean) <= 1e-5
    assert rel_err(bn.running_var.numpy(), 0.9 + 0.1 * unbiased) <= 1e-5
    bn.eval()
    y_eval = bn(mge.tensor(x)).numpy()
    want = (x - bn.running_mean.numpy()) / np.sqrt(bn.running_var.numpy() + 1e-5)
    assert rel_err(y_eval, want) <= 1e-5


def test_train_eval_flags_recurse():
    net = ConvNet()
    assert all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())


def test_sequential():
    seq = M.Sequential(M.Linear(4, 3), M.ReLU(), M.Linear(3, 2))
    assert [n for n, _ in seq.named_parameters()] == ["0.bias", "0.weight", "2.bias", "2.weight"]
    x = mge.tensor(np.ones((1, 4), np.float32))
    assert seq(x).shape == (1, 2)


def test_megengine_checkpoint_loads_and_matches_megengine_output():
    """State dict and output written by the real MegEngine 1.13 (tests/data/, made by
    make_megengine_checkpoints.py in the megref chroot)."""
    from conftest import TESTS
    data = TESTS / "data"
    state = mge.load(data / "megengine_convnet_state.pkl")
    assert state["bn.weight"].shape == (16,) and state["conv.bias"].shape == (1, 16, 1, 1)
    net = ConvNet()
    net.load_state_dict(state)
    net.eval()
    assert {k: v.shape for k, v in net.state_dict().items()} == \
        {k: v.shape for k, v in state.items()}
    x = np.load(data / "megengine_convnet_in.npy")
    assert rel_err(net(mge.tensor(x)).numpy(), np.load(data / "megengine_convnet_out.npy")) <= 1e-5


def test_megengine_pickled_tensors_load():
    from conftest import TESTS
    obj = mge.load(TESTS / "data" / "megengine_tensor_dict.pkl")
    assert obj["step"] == 3 and isinstance(obj["w"], mge.Tensor)
    assert np.array_equal(obj["w"].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_saved_state_dict_is_numpy1_loadable(tmp_path):
    """MegEngine runs with NumPy 1.x, which cannot import NumPy 2's `numpy._core`; our
    pickles avoid it (real MegEngine 1.13 loaded one and matched megtrace's output, see
    tests/data/check_megtrace_state_in_megengine.py)."""
    net = ConvNet()
    mge.save(net.state_dict(), tmp_path / "s.pkl")
    raw = (tmp_path / "s.pkl").read_bytes()
    assert b"numpy._core" not in raw and b"numpy.core" not in raw
    back = mge.load(tmp_path / "s.pkl")
    for name, value in net.state_dict().items():
        assert back[name].flags.writeable and np.array_equal(back[name], value)


def test_numpy_scalars_and_string_arrays_pickle_as_numpy_1_does(tmp_path):
    """A checkpoint's np.float32 accuracy, np.int64 epoch or string array: NumPy 2 names
    numpy._core, which MegEngine's NumPy 1.x cannot import; ours name only
    numpy.core.multiarray.scalar, numpy.ndarray and numpy.dtype (real MegEngine 1.13 loaded
    such a file: tests/data/check_megtrace_numpy_scalars_in_megengine.py), and load back."""
    import pickletools
    import sys
    obj = {"best_acc": np.float32(2.5), "epoch": np.int64(3), "flag": np.bool_(True),
           "h": np.float16(1.5), "names": np.array(["a", "bc"]), "dt": np.dtype("float32")}
    shim = sys.modules.get("numpy.core.multiarray")
    mge.save(obj, tmp_path / "n.pkl")
    assert sys.modules.get("numpy.core.multiarray") is shim      # the stand-in is gone
    raw = (tmp_path / "n.pkl").read_bytes()
    strings = [arg for op, arg, _ in pickletools.genops(raw) if op.name == "SHORT_BINUNICODE"]
    assert b"numpy._core" not in raw and "multiarray" not in " ".join(
        s for s in strings if s != "numpy.core.multiarray")
    assert "numpy.core.multiarray" in strings and "scalar" in strings
    back = mge.load(tmp_path / "n.pkl")
    for key, value in obj.items():
        assert type(back[key]) is type(value) and np.array_equal(back[key], value), key
    assert back["names"].dtype == np.dtype("<U2")


def test_pickled_tensors_name_megengine_classes(tmp_path):
    """Tensors pickle as megengine.tensor.Tensor/Parameter(value, dtype, device), which real
    MegEngine 1.13 loads (tests/data/check_megtrace_tensors_in_megengine.py) and we too."""
    import sys
    obj = {"w": mge.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
           "p": mge.Parameter(np.ones(2, np.float32)), "step": 3}
    mge.save(obj, tmp_path / "t.pkl")
    raw = (tmp_path / "t.pkl").read_bytes()
    assert b"megengine.tensor" in raw and b"megtrace" not in raw
    assert "megengine.tensor" not in sys.modules          # the stand-in is gone again
    back = mge.load(tmp_path / "t.pkl")
    assert type(back["w"]) is mge.Tensor and type(back["p"]) is mge.Parameter
    assert np.array_equal(back["w"].numpy(), obj["w"].numpy()) and back["step"] == 3


def _quantized_net():
    from megtrace.quantization import quantize, quantize_qat
    net = M.Sequential(M.QuantStub(), M.ConvRelu2d(2, 3, 3, padding=1), M.DequantStub())
    rng = np.random.RandomState(0)
    for p in net.parameters():
        p._reset(mge.tensor(rng.uniform(-1, 1, p.shape).astype("float32")))
    x = mge.tensor(rng.uniform(-2, 2, (2, 2, 4, 4)).astype("float32"))
    qat = quantize_qat(net)
    qat(x)
    qat.eval()
    z = quantize(qat)
    z.eval()
    return qat, z, x


@pytest.mark.parametrize("weights_only", [True, False])
def test_quantized_checkpoints_keep_their_scales(tmp_path, weights_only):
    """A quantized dtype's scale lives in the NumPy dtype's metadata, which pickles only
    with the dtype object itself (numpy.dtype plus its state, as NumPy 1.x writes it): the
    saved int8 weights load with their scale into a quantized net, as whole modules do (real
    MegEngine 1.13 loads such a file: tests/data/check_megtrace_quantized_state_in_megengine.py)."""
    import copy
    from megtrace.core.tensor.dtype import get_scale, qint8
    qat, z, x = _quantized_net()
    weight = z.state_dict()["1.weight"]
    mge.save({"state": z.state_dict(), "tensor": z[1].weight}, tmp_path / "z.pkl")
    assert b"numpy._core" not in (tmp_path / "z.pkl").read_bytes()
    back = mge.load(tmp_path / "z.pkl", weights_only=weights_only)
    assert back["state"]["1.weight"].dtype.metadata == weight.dtype.metadata
    assert np.array_equal(back["state"]["1.weight"].view(np.int8), weight.view(np.int8))
    assert back["tensor"].dtype.metadata == weight.dtype.metadata
    blank = copy.deepcopy(z)           # another scale: the loaded dtype must replace it
    blank[1].weight._reset(mge.tensor(np.zeros(weight.shape, np.int8).view(qint8(1.0))))
    blank.load_state_dict(back["state"])
    assert get_scale(blank[1].weight.dtype) == get_scale(weight.dtype)
    assert np.array_equal(blank(x).numpy(), z(x).numpy())
    for whole in (z, qat):
        mge.save(whole, tmp_path / "m.pkl")
        again = mge.load(tmp_path / "m.pkl", weights_only=weights_only)
        assert np.array_equal(again(x).numpy(), whole(x).numpy())


def test_plain_dtypes_still_pickle_by_their_short_name(tmp_path):
    """Only quantized dtypes need the dtype object: plain arrays keep the (shape, 'dtype
    string', bytes) form that MegEngine's NumPy 1.x loads."""
    import pickletools
    mge.save({"w": np.ones(2, np.float32), "t": mge.tensor([1, 2])}, tmp_path / "p.pkl")
    strings = [arg for op, arg, _ in pickletools.genops((tmp_path / "p.pkl").read_bytes())
               if op.name == "SHORT_BINUNICODE"]
    assert "<f4" in strings and "int32" in strings and "dtype" not in strings


def test_module_call_passes_any_keyword_and_input_count_to_forward():
    """Module.__call__'s one-input shortcut must not take a forward parameter's name
    (its own first parameter is positional-only), and calls with none, several or
    keyword inputs reach forward unchanged."""
    class Net(M.Module):
        def forward(self, x=None, first=0, *rest, **extra):
            return x, first, rest, extra

    net = Net()
    assert net(1) == (1, 0, (), {})
    assert net() == (None, 0, (), {})
    assert net(1, first=2) == (1, 2, (), {})
    assert net(1, 2, 3, rest=4) == (1, 2, (3,), {"rest": 4})
    assert net(x=5) == (5, 0, (), {})


def test_zero_grad_zeroes_grads_in_place_and_warns():
    """Deprecated since MegEngine 1.0 yet working: each existing grad is zeroed in place
    (reset_zero, which warns too) and missing ones stay None (MegEngine 1.13's messages:
    tests/data/show_megengine_zero_grad.py)."""
    from megtrace.autodiff import GradManager
    net = M.Linear(2, 1)
    gm = GradManager().attach(net.parameters())
    with gm:
        gm.backward(net(mge.Tensor([[1.0, 2.0]])).sum())
    grads = [p.grad for p in net.parameters()]
    with pytest.warns(DeprecationWarning) as caught:
        net.zero_grad()
    assert [str(w.message) for w in caught] == [
        "Call to deprecated method zero_grad. -- Deprecated since version 1.0."] + [
        "Call to deprecated method reset_zero. (use ``*= 0`` instead) -- "
        "Deprecated since version 1.0."] * 2
    assert all(p.grad is g for p, g in zip(net.parameters(), grads))
    assert [p.grad.numpy().tolist() for p in net.parameters()] == [[0.0], [[0.0, 0.0]]]
    fresh = M.Linear(2, 1)
    with pytest.warns(DeprecationWarning, match="zero_grad"):
        fresh.zero_grad()
    assert [p.grad for p in fresh.parameters()] == [None, None]


def test_save_takes_megengines_pickle_module_argument(tmp_path):
    """save(obj, f, pickle_module=pickle, pickle_protocol=4), MegEngine's signature: the
    standard module keeps the MegEngine-loadable pickler; another writes with its dump."""
    import pickle
    import types
    mge.save({"w": np.ones(2, np.float32)}, tmp_path / "a.pkl", pickle, 2)
    assert np.array_equal(mge.load(tmp_path / "a.pkl")["w"], np.ones(2))
    calls = []
    other = types.SimpleNamespace(dump=lambda obj, fh, protocol: calls.append((obj, protocol)))
    mge.save({"k": 1}, tmp_path / "b.pkl", pickle_module=other, pickle_protocol=3)
    assert calls == [({"k": 1}, 3)]
