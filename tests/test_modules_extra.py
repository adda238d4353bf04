"""MegEngine's conv-family, normalization and fused modules on megtrace: outputs against
MegEngine's golden data or independent NumPy, traced (TVM-compiled) against eager, and
their .mge dumps in the real MegEngine Lite runtime."""
import pickle

import numpy as np
import pytest
from conftest import TESTS, rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace

GOLDEN = np.load(TESTS / "data" / "megengine_conv_family.npz")

# The calls tests/data/make_megengine_conv_family.py made in MegEngine 1.13.
CALLS = {
    "conv1d": lambda x, w: F.conv1d(x, w, None, 2, 1, 2),
    "conv3d": lambda x, w: F.conv3d(x, w, None, (2, 1, 2), (1, 0, 1), (1, 2, 1)),
    "conv3d_group": lambda x, w: F.conv3d(x, w, None, 1, 1, 1, groups=2),
    "conv_transpose2d": lambda x, w: F.conv_transpose2d(x, w, None, (2, 3), (1, 0), (1, 2),
                                                        (1, 1)),
    "conv_transpose2d_dil": lambda x, w: F.conv_transpose2d(x, w, None, 2, 1, 0, 2),
    "conv_transpose2d_group": lambda x, w: F.conv_transpose2d(x, w, None, 2, 1, groups=2),
    "conv_transpose3d": lambda x, w: F.conv_transpose3d(x, w, None, (2, 1, 2), (0, 1, 0),
                                                        (1, 0, 1), (1, 1, 1)),
    "local_conv2d": lambda x, w: F.local_conv2d(x, w, None, 1, 1),
    "local_conv2d_stride": lambda x, w: F.local_conv2d(x, w, None, 2, 0, 1),
    "deformable_conv2d": lambda x, w, o, m: F.deformable_conv2d(x, w, o, m, None, 1, 1),
    "deformable_conv2d_groups": lambda x, w, o, m: F.deformable_conv2d(x, w, o, m, None, 2, 0,
                                                                       1, groups=2),
}


def _inputs(name):
    return [GOLDEN[f"{name}_in{i}"] for i in range(4) if f"{name}_in{i}" in GOLDEN]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_functional_matches_megengine(name):
    got = CALLS[name](*[mge.tensor(a) for a in _inputs(name)]).numpy()
    assert rel_err(got, GOLDEN[f"{name}_out"]) <= 1e-5


@pytest.mark.parametrize("name", sorted(n for n in CALLS if "deformable" not in n))
def test_functional_traced_matches_megengine(name):
    fn = trace(symbolic=True)(CALLS[name])
    for _ in range(2):
        got = fn(*[mge.tensor(a) for a in _inputs(name)]).numpy()
        assert rel_err(got, GOLDEN[f"{name}_out"]) <= 1e-5


def _eval(module):
    module.eval()          # returns None, as in MegEngine
    return module


def _module_cases():
    return {
        "Conv1d": (lambda: M.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
        "Conv2d-reflect": (lambda: M.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
                           (1, 3, 6, 6)),
        "Conv3d": (lambda: M.Conv3d(2, 4, (2, 3, 3), padding=1, groups=2), (1, 2, 4, 5, 5)),
        "ConvTranspose2d": (lambda: M.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1),
                            (1, 3, 4, 5)),
        "ConvTranspose3d": (lambda: M.ConvTranspose3d(2, 3, 2, stride=2), (1, 2, 3, 3, 2)),
        "LocalConv2d": (lambda: M.LocalConv2d(2, 4, 6, 6, 3, padding=1, groups=2),
                        (2, 2, 6, 6)),
        "ConvRelu2d": (lambda: M.ConvRelu2d(3, 4, 3), (1, 3, 5, 5)),
        "ConvBn2d": (lambda: _eval(M.ConvBn2d(3, 4, 3)), (1, 3, 5, 5)),
        "ConvBnRelu2d": (lambda: _eval(M.ConvBnRelu2d(3, 4, 3)), (1, 3, 5, 5)),
        "ConvTransposeBn2d": (lambda: _eval(M.ConvTransposeBn2d(3, 4, 2, stride=2)),
                              (1, 3, 3, 3)),
        "LinearBn1d": (lambda: _eval(M.LinearBn1d(5, 3)), (4, 5)),
        "LinearBnRelu1d": (lambda: _eval(M.LinearBnRelu1d(5, 3)), (4, 5)),
        "LinearRelu": (lambda: M.LinearRelu(5, 3), (4, 5)),
        "BatchNorm1d": (lambda: _eval(M.BatchNorm1d(3)), (4, 3, 5)),
        "GroupNorm": (lambda: M.GroupNorm(2, 4), (2, 4, 3, 3)),
        "InstanceNorm": (lambda: M.InstanceNorm(4), (2, 4, 3, 3)),
        "LayerNorm": (lambda: M.LayerNorm((3, 3)), (2, 4, 3, 3)),
        "PReLU": (lambda: M.PReLU(4, init=0.3), (2, 4, 3, 3)),
        "Elemwise": (lambda: M.Elemwise("h_swish"), (2, 5)),
        "QuantStub": (lambda: M.Sequential(M.QuantStub(), M.ReLU(), M.DequantStub()), (2, 3)),
    }


def _with_random_state(module, rng):
    """Nonzero biases and BN statistics, so that every parameter matters."""
    for name, t in module.named_tensors():
        values = rng.uniform(0.5, 1.5, size=t.shape) if "var" in name or "weight" in name \
            else rng.uniform(-0.5, 0.5, size=t.shape)
        t._set_value(values.astype(np.float32))
    return module


@pytest.mark.parametrize("case", sorted(_module_cases()))
def test_module_traced_matches_eager(case, rng):
    make, shape = _module_cases()[case]
    module = _with_random_state(make(), rng)
    x = mge.tensor(rng.uniform(-2, 2, size=shape).astype(np.float32))
    eager = module(x).numpy()
    fn = trace(symbolic=True)(lambda inp: module(inp))
    for _ in range(2):
        assert rel_err(fn(x).numpy(), eager) <= 1e-5


def test_deformable_conv2d_module_runs_megengine_layout():
    m = M.DeformableConv2d(4, 6, 3, padding=1)
    x, w, offset, mask = _inputs("deformable_conv2d")
    m.weight._set_value(w)
    out = m(mge.tensor(x), mge.tensor(offset), mge.tensor(mask)).numpy()
    assert rel_err(out, GOLDEN["deformable_conv2d_out"]) <= 1e-5


def test_group_and_instance_norm_follow_definition(rng):
    x = rng.uniform(-1, 1, size=(2, 6, 4, 3)).astype(np.float32)
    gn = _with_random_state(M.GroupNorm(3, 6), rng)
    g = x.reshape(2, 3, -1).astype(np.float64)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    want = norm.reshape(x.shape) * gn.weight.numpy().reshape(1, -1, 1, 1) + \
        gn.bias.numpy().reshape(1, -1, 1, 1)
    assert rel_err(gn(mge.tensor(x)).numpy(), want) <= 1e-5
    inorm = M.InstanceNorm(6, affine=False)
    c = x.reshape(2, 6, -1).astype(np.float64)
    want = (c - c.mean(-1, keepdims=True)) / np.sqrt(c.var(-1, keepdims=True) + 1e-5)
    assert rel_err(inorm(mge.tensor(x)).numpy(), want.reshape(x.shape)) <= 1e-5


@pytest.mark.parametrize("symbolic", [False, True])
def test_batchnorm_training_updates_statistics_inside_trace(symbolic, rng):
    eager_bn, traced_bn = M.BatchNorm1d(3, momentum=0.8), M.BatchNorm1d(3, momentum=0.8)
    fn = trace(symbolic=symbolic)(lambda inp: traced_bn(inp))
    for _ in range(3):
        x = mge.tensor(rng.normal(1.0, 2.0, size=(4, 3, 5)).astype(np.float32))
        assert rel_err(fn(x).numpy(), eager_bn(x).numpy()) <= 1e-5
        for stat in ("running_mean", "running_var"):
            assert rel_err(getattr(traced_bn, stat).numpy(),
                           getattr(eager_bn, stat).numpy()) <= 1e-5
    xs = rng.normal(1.0, 2.0, size=(4, 3, 5))
    mean = xs.mean(axis=(0, 2)).reshape(1, 3, 1, 1)
    assert not np.allclose(traced_bn.running_mean.numpy(), 0.2 * mean)   # it accumulates


def test_batchnorm_empty_batch_keeps_statistics():
    bn = M.BatchNorm2d(2)
    x = mge.tensor(np.zeros((0, 2, 0, 0), np.float32))
    assert bn(x).shape == (0, 2, 0, 0)
    assert np.array_equal(bn.running_var.numpy(), np.ones((1, 2, 1, 1), np.float32))


def test_conv_promotes_float16_input_to_the_weight_dtype(rng):
    m = M.Conv3d(2, 3, 2)
    x = rng.uniform(size=(1, 2, 3, 3, 3)).astype(np.float16)
    a, b = m(mge.tensor(x)), m(mge.tensor(x.astype(np.float32)))
    assert a.dtype == np.float32 and np.array_equal(a.numpy(), b.numpy())


def test_config_override_restores_settings():
    import megtrace.config as config
    assert config._compute_mode == "default"
    with config._override(compute_mode="float32", deterministic_kernel=True):
        assert config._compute_mode == "float32" and config.deterministic_kernel
    assert config._compute_mode == "default" and not config.deterministic_kernel
    with pytest.raises(AssertionError, match="async_level"):
        config.async_level = 3


def test_init_fans_and_initializers():
    init = M.init
    assert init.calculate_fan_in_and_fan_out(M.Conv1d(2, 3, 5).weight) == (10, 15)
    assert init.calculate_fan_in_and_fan_out(M.Conv2d(2, 4, (5, 7), groups=2).weight) == \
        (35, 70)
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(np.sqrt(2 / 1.04))
    with pytest.raises(ValueError, match="fewer than 2"):
        init.calculate_fan_in_and_fan_out(mge.tensor(np.zeros(3, np.float32)))
    t = mge.tensor(np.zeros((200, 300), np.float32))
    init.xavier_uniform_(t)
    bound = np.sqrt(6 / 500)
    assert np.abs(t.numpy()).max() <= bound and np.abs(t.numpy()).max() > 0.9 * bound
    init.msra_normal_(t, mode="fan_out", nonlinearity="relu")
    assert t.numpy().std() == pytest.approx(np.sqrt(2 / 200), rel=0.05)
    init.fill_(t, 3)
    assert t.dtype == np.float32 and (t.numpy() == 3).all()


def test_module_hooks_apply_and_parents():
    seq = M.Sequential(M.ReLU(), M.Sequential(M.Identity()))
    calls = []
    handles = []
    seq.apply(lambda m: handles.append(
        m.register_forward_hook(lambda mod, inp, out: calls.append(type(mod).__name__))))
    seq(mge.tensor(np.ones(2, np.float32)))
    assert calls == ["ReLU", "Identity", "Sequential", "Sequential"]
    for h in handles:
        h.remove()
    seq(mge.tensor(np.ones(2, np.float32)))
    assert len(calls) == 4
    assert [(n, p is None) for n, _, p in seq.named_modules(with_parent=True)] == \
        [("", True), ("0", False), ("1", False), ("1.0", False)]


def test_module_repr_and_pickle_keep_megengine_attributes():
    net = M.ConvBn2d(2, 4, 3, padding=1)
    assert repr(net) == (
        "ConvBn2d(\n"
        "  (conv): Conv2d(2, 4, kernel_size=(3, 3), padding=(1, 1))\n"
        "  (bn): BatchNorm2d(4, eps=1e-05, momentum=0.9, affine=True, "
        "track_running_stats=True)\n)")
    assert sorted(net.state_dict()) == ["bn.bias", "bn.running_mean", "bn.running_var",
                                        "bn.weight", "conv.bias", "conv.weight"]
    assert net.state_dict()["bn.weight"].shape == (4,)
    clone = pickle.loads(pickle.dumps(net))
    assert set(vars(clone)) == {"_modules", "name", "training", "quantize_disabled",
                                "_forward_pre_hooks", "_forward_hooks", "_name",
                                "_short_name", "conv", "bn"}
    net.eval()
    clone.eval()
    x = mge.tensor(np.ones((1, 2, 4, 4), np.float32))
    assert np.array_equal(clone(x).numpy(), net(x).numpy())


DUMPED = ["Conv1d", "Conv3d", "ConvTranspose2d", "ConvTranspose3d", "LocalConv2d",
          "ConvBn2d", "GroupNorm", "PReLU"]


def _dump(case, rng, tmp_path):
    """(path, input, traced output) of the case's module dumped to a .mge file."""
    make, shape = _module_cases()[case]
    module = _eval(_with_random_state(make(), rng))

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return module(data)

    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    want = infer(mge.tensor(x)).numpy()
    path = tmp_path / "model.mge"
    infer.dump(path, arg_names=["data"], output_names=["out"])
    return path, x, want


@pytest.mark.parametrize("case", DUMPED)
def test_conv_family_dump_loads_back(case, rng, tmp_path):
    path, x, want = _dump(case, rng, tmp_path)
    assert rel_err(mge.load_graph(path)(mge.tensor(x)).numpy(), want) <= 1e-5


@pytest.mark.lite
@pytest.mark.parametrize("case", DUMPED)
def test_conv_family_dump_runs_in_megengine_lite(case, lite, rng, tmp_path):
    path, x, want = _dump(case, rng, tmp_path)
    assert rel_err(lite.run_model(path, {"data": x})["out"], want) <= 1e-5


def test_rnn_cells_match_megengine():
    """Same parameters as MegEngine 1.13's cells (tests/data/make_megengine_rnn_cells.py)."""
    d = np.load(TESTS / "data" / "megengine_rnn_cells.npz")
    x, h, c = (mge.tensor(d[k]) for k in ("x", "h", "c"))
    cells = {"rnn_tanh": M.RNNCell(5, 4), "rnn_relu": M.RNNCell(5, 4, nonlinearity="relu"),
             "lstm": M.LSTMCell(5, 4)}
    for name, cell in cells.items():
        cell.load_state_dict({k[len(name) + 1:]: v for k, v in d.items()
                              if k.startswith(name + ".") and "_out" not in k})
        if name == "lstm":
            hn, cn = cell(x, (h, c))
            assert rel_err(hn.numpy(), d["lstm.h_out"]) <= 1e-5
            assert rel_err(cn.numpy(), d["lstm.c_out"]) <= 1e-5
            assert rel_err(cell(x)[0].numpy(), d["lstm.h_out_nohx"]) <= 1e-5
            traced = trace(symbolic=True)(lambda a, b, s: cell(a, (b, s)))
            for _ in range(2):
                th, tc = traced(x, h, c)
                assert rel_err(th.numpy(), hn.numpy()) <= 1e-5
                assert rel_err(tc.numpy(), cn.numpy()) <= 1e-5
        else:
            assert rel_err(cell(x, h).numpy(), d[f"{name}.h_out"]) <= 1e-5
            traced = trace(symbolic=True)(lambda a, b: cell(a, b))
            assert rel_err(traced(x, h).numpy(), d[f"{name}.h_out"]) <= 1e-5


def test_rnn_cell_without_bias_keeps_zero_buffers():
    cell = M.RNNCell(3, 2, bias=False)
    assert [n for n, _ in cell.named_parameters()] == ["weight_hh", "weight_ih"]
    assert [n for n, _ in cell.named_buffers()] == ["bias_hh", "bias_ih"]
    bound = 1 / np.sqrt(2)
    assert np.abs(cell.weight_ih.numpy()).max() <= bound


def test_embedding_from_pretrained_and_string_batches_as_megengine():
    """Real MegEngine 1.13's answers (tests/data/show_megengine_module_data_facts.py):
    Embedding.from_pretrained takes a 2-d table (frozen by default), and a batch's string
    field is the tuple zip gives. (Its Identity returns a copy; megtrace's returns x.)"""
    import megtrace as mge
    import megtrace.module as M
    from megtrace.data import DataLoader, SequentialSampler
    from megtrace.data.dataset import Dataset
    emb = M.Embedding.from_pretrained(mge.Tensor(np.arange(6, dtype="float32").reshape(3, 2)))
    assert emb(mge.Tensor(np.array([2, 0], "int32"))).numpy().tolist() == [[4, 5], [0, 1]]
    assert emb.freeze is True
    with pytest.raises(ValueError, match="2-dimensional"):
        M.Embedding.from_pretrained(mge.Tensor(np.zeros(3, "float32")))

    class Named(Dataset):
        def __init__(self):
            pass

        def __getitem__(self, i):
            return i, float(i), "x%d" % i

        def __len__(self):
            return 4
    batch = next(iter(DataLoader(Named(), SequentialSampler(Named(), batch_size=2))))
    assert batch[2] == ("x0", "x1") and batch[0].tolist() == [0, 1]
