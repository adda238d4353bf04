"""F.nn.group_norm / instance_norm / general_norm / local_response_norm / prelu,
F.topk_accuracy and the modules GeneralNorm, LocalResponseNorm, Pad, PixelShuffle,
SlidingWindow(Transpose), DeformablePSROIPooling against real MegEngine 1.13
(tests/data/make_megengine_norm_extras.py): values and gradients eagerly, traced and
compiled, dumped and run by the real MegEngine Lite, loaded back; module state and
attributes; MegEngine's error messages."""
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.autodiff import GradManager
from megtrace.fbs.reader import read_model
from megtrace.ir import Graph, TensorType
from megtrace.jit import trace
from megtrace.ops import get
from megtrace.relay_bridge.lift import lift
from megtrace.relay_bridge.lower import to_relax

DATA = Path(__file__).parent / "data"
GOLD = np.load(DATA / "megengine_norm_extras.npz")
INFO = json.loads((DATA / "megengine_norm_extras.json").read_text())
T = mge.tensor

CASES = {   # name -> (function of the recorded inputs, number of inputs)
    "group_norm": (lambda x, w, b: F.nn.group_norm(x, 3, True, w, b), 3),
    "group_norm_noaffine": (lambda x: F.nn.group_norm(x, 2, False, eps=1e-3), 1),
    "instance_norm": (lambda x, w, b: F.nn.instance_norm(x, True, w, b), 3),
    "instance_norm_noaffine": (lambda x: F.instance_norm(x, False), 1),
    "general_norm": (lambda x, w, b: F.nn.general_norm(x, (1, 2), True, w, b), 3),
    "general_norm_first": (lambda x: F.general_norm(x, 0, False, eps=1e-2), 1),
    "general_norm_disc": (lambda x, w, b: F.nn.general_norm(x, (1, -1), True, w, b), 3),
    "lrn": (lambda x: F.nn.local_response_norm(x, 3, 1.0, 1e-2, 0.75), 1),
    "lrn_default": (lambda x: F.local_response_norm(x), 1),
    "prelu_scalar": (lambda x: F.nn.prelu(x, T(np.float32(0.25))), 1),
    "prelu_tensor": (lambda x, w: F.prelu(x, w), 2),
}


def _inputs(name, n):
    return [GOLD[f"{name}/in{i}"] for i in range(n)]


@pytest.mark.parametrize("name", list(CASES))
def test_forward_and_gradients_match_megengine(name):
    fn, n = CASES[name]
    ts = [T(v) for v in _inputs(name, n)]
    gm = GradManager().attach(ts)
    with gm:
        y = fn(*ts)
        gm.backward((y * T(GOLD[f"{name}/dy"])).sum())
    assert rel_err(y.numpy(), GOLD[f"{name}/out"]) <= 1e-5
    for i, t in enumerate(ts):
        assert rel_err(t.grad.numpy(), GOLD[f"{name}/grad{i}"]) <= 1e-4, f"input {i}"


@pytest.mark.parametrize("name", list(CASES))
def test_traced_compiled_matches_megengine(name):
    fn, n = CASES[name]
    traced = trace(fn, symbolic=True)
    args = [T(v) for v in _inputs(name, n)]
    for _ in range(2):      # the second call runs the compiled graph
        assert rel_err(traced(*args).numpy(), GOLD[f"{name}/out"]) <= 1e-5


@pytest.mark.lite
def test_dumps_run_in_lite_and_load_back(lite, tmp_path):
    jobs, wants = [], []
    for name, (fn, n) in CASES.items():
        feeds = {f"in{i}": v for i, v in enumerate(_inputs(name, n))}
        traced = trace(fn, symbolic=True, capture_as_const=True)
        traced(*[T(v) for v in feeds.values()])
        path = tmp_path / f"{name}.mge"
        traced.dump(path, arg_names=list(feeds), output_names=["y"])
        jobs.append((path, feeds))
        wants.append(GOLD[f"{name}/out"])
        loaded = mge.load_graph(str(path))
        assert rel_err(loaded(**feeds).numpy(), wants[-1]) <= 1e-5, name
    for (path, _), got, want in zip(jobs, lite.run_models(jobs), wants):
        assert not isinstance(got, str), f"{path.name}: Lite refused it: {got}"
        assert rel_err(got["y"], want) <= 1e-5, path.name


def test_written_as_megengine_writes_them(tmp_path):
    """GeneralNorm and LRN oprs with MegEngine's params; prelu as MIN, MAX, mul-add."""
    for fname, fn in (("general_norm", lambda x: F.nn.general_norm(x, (1, 2), False)),
                      ("lrn", lambda x: F.nn.local_response_norm(x, 3, 1.0, 1e-2, 0.75))):
        traced = trace(fn, symbolic=True, capture_as_const=True)
        traced(T(GOLD["lrn/in0"]))
        traced.dump(tmp_path / "m.mge", arg_names=["x"])
        ours = {o.type: o.params for o in read_model((tmp_path / "m.mge").read_bytes()).oprs}
        theirs = {o.type: o.params for o in
                  read_model((DATA / "megengine-1.13" / f"{fname}.mge").read_bytes()).oprs}
        opr = "GeneralNorm" if fname == "general_norm" else "LRN"
        want = dict(theirs[opr][0][1])
        got = dict(ours[opr][0][1])
        if opr == "GeneralNorm":    # we always write the affine form (ones/zeros weights)
            assert got.pop("affine") and not want.pop("affine")
        assert got == pytest.approx(want)


@pytest.mark.parametrize("fname,case", [("general_norm", None), ("lrn", "lrn")])
def test_megengine_dumps_load_and_run(fname, case):
    x = GOLD["lrn/in0"]
    got = mge.load_graph(str(DATA / "megengine-1.13" / f"{fname}.mge"))(x=x).numpy()
    if case:
        want = GOLD[f"{case}/out"]
    else:
        xs = x.astype(np.float64)
        mean = xs.mean(axis=(1, 2), keepdims=True)
        want = (xs - mean) / np.sqrt(((xs - mean) ** 2).mean(axis=(1, 2), keepdims=True) + 1e-5)
    assert rel_err(got, want) <= 1e-5


def test_topk_accuracy_matches_megengine():
    logits, target = (T(v) for v in _inputs("topk_accuracy", 2))
    top1 = F.topk_accuracy(logits, target)
    assert top1.dtype == np.float32 and top1.shape == ()
    accs = F.topk_accuracy(logits, target, (1, 3, 5))
    assert isinstance(accs, list) and len(accs) == 3
    for i, acc in enumerate(accs):
        assert acc.numpy() == pytest.approx(GOLD[f"topk_accuracy/acc{i}"])
    combined = F.topk_accuracy(logits, target, (1, 3))[1] + top1
    assert combined.numpy() == pytest.approx(GOLD["topk_accuracy/out"])
    # independent: rank of the target among the logits
    lg, tg = _inputs("topk_accuracy", 2)
    rank = (lg > lg[np.arange(len(tg)), tg][:, None]).sum(axis=1)
    assert accs[1].numpy() == pytest.approx((rank < 3).mean())


def _modules():
    return {
        "GeneralNorm": M.GeneralNorm((3, 4), (1, 2)),
        "GeneralNorm_noaffine": M.GeneralNorm(affine=False),
        "LocalResponseNorm": M.LocalResponseNorm(),
        "Pad": M.Pad(((1, 1), (2, 0)), "constant", 3.0),
        "PixelShuffle": M.PixelShuffle(2),
        "SlidingWindow": M.SlidingWindow(3, 1, 2, 1),
        "SlidingWindowTranspose": M.SlidingWindowTranspose((5, 5), 3, 1, 2, 1),
        "DeformablePSROIPooling": M.DeformablePSROIPooling(False, 2, 2, 2, 2, 0.5),
        "GroupNorm": M.GroupNorm(2, 4),
        "InstanceNorm": M.InstanceNorm(3, affine=False),
    }


def _plain(v):
    return [_plain(x) for x in v] if isinstance(v, (tuple, list)) else v


@pytest.mark.parametrize("name", list(_modules()))
def test_module_state_and_attributes_match_megengine(name):
    m, want = _modules()[name], INFO[name]
    state = {k: [list(v.shape), v.dtype.name, float(v.sum())] for k, v in m.state_dict().items()}
    assert state == want["state"]
    assert {a: _plain(getattr(m, a)) for a in want["attrs"]} == want["attrs"]
    assert repr(m) == want["repr"]


def test_module_forwards_match_megengine():
    x = T(GOLD["module_general_norm/in"])
    assert rel_err(M.GeneralNorm((3, 4), (1, 2))(x).numpy(), GOLD["module_general_norm/out"]) \
        <= 1e-5
    assert rel_err(M.LocalResponseNorm(3, 1.0, 0.1, 0.5)(x).numpy(), GOLD["module_lrn/out"]) \
        <= 1e-5
    assert rel_err(M.Pad(((1, 1), (0, 0), (2, 1)), "reflect")(x).numpy(),
                   GOLD["module_pad/out"]) <= 1e-5
    xs = GOLD["module_general_norm/in"]
    assert np.array_equal(M.PixelShuffle(2)(T(xs.reshape(2, 12, 2, 2))).numpy(),
                          F.pixel_shuffle(T(xs.reshape(2, 12, 2, 2)), 2).numpy())
    win = M.SlidingWindow(3, 1, 1)(x)
    assert win.shape == (2, 3, 4, 4, 3, 3)
    back = M.SlidingWindowTranspose((4, 4), 3, 1, 1)(win)
    assert rel_err(back.numpy(), F.sliding_window_transpose(win, (4, 4), 3, 1, 1).numpy()) == 0


def _err(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info


@pytest.mark.parametrize("key", sorted(k for k, v in INFO["errors"].items()
                                       if v[0] == "AssertionError"))
def test_bad_arguments_raise_megengine_errors(key):
    xs = T(np.zeros((2, 4, 3, 3), np.float32))
    ones4 = T(np.ones(4, np.float32))
    calls = {
        "group_norm_no_weight": lambda: F.nn.group_norm(xs, 2, True),
        "group_norm_no_bias": lambda: F.nn.group_norm(xs, 2, True, ones4),
        "instance_norm_no_weight": lambda: F.nn.instance_norm(xs, True),
        "general_norm_order": lambda: F.nn.general_norm(xs, (2, 1), False),
        "general_norm_empty": lambda: F.nn.general_norm(xs, (), False),
        "general_norm_too_big": lambda: F.nn.general_norm(xs, (1, 4), False),
        "general_norm_dup": lambda: F.nn.general_norm(xs, (1, 1), False),
        "general_norm_no_weight": lambda: F.nn.general_norm(xs, (1,), True),
        "GeneralNorm_no_shape": lambda: M.GeneralNorm(),
        "GeneralNorm_len": lambda: M.GeneralNorm((4, 3), 1),
        "GeneralNorm_dup": lambda: M.GeneralNorm((4, 4), (1, 1)),
        "GeneralNorm_shape": lambda: M.GeneralNorm((5,), 1)(xs),
        "GeneralNorm_order": lambda: M.GeneralNorm((3, 4), (2, 1))(xs),
        "GroupNorm_div": lambda: M.GroupNorm(3, 4),
    }
    info = _err(calls[key])
    assert type(info.value).__name__ == "AssertionError"
    if INFO["errors"][key][1]:      # MegEngine's bare asserts (GroupNorm_div) say nothing
        assert str(info.value) == INFO["errors"][key][1]


def test_group_and_instance_norm_need_nchw():
    """MegEngine's kernel asserts data.ndim == 4 (an async RuntimeError there)."""
    x3 = T(np.zeros((2, 4, 3), np.float32))
    for fn in (lambda: F.nn.group_norm(x3, 2, False), lambda: F.nn.instance_norm(x3, False),
               lambda: M.GroupNorm(2, 4)(x3)):
        with pytest.raises(ValueError, match="data.ndim == 4"):
            fn()
    with pytest.raises(ValueError, match="4-d"):
        F.nn.local_response_norm(x3)
    with pytest.raises(ValueError, match="odd"):
        F.nn.local_response_norm(T(np.zeros((1, 4, 2, 2), np.float32)), 4)


@pytest.mark.parametrize("shape,axes,want", [((2, 3, 4, 5), (1, 3), "general_norm"),
                                             ((4, 3, 2), (0, 1), "general_norm"),
                                             ((2, 3, 4, 5), (2, 4), "layer_norm")])
def test_relax_layer_norm_lifts_back_to_the_right_op(shape, axes, want):
    """optimize_for_inference lifts TVM's nn.layer_norm back: trailing axes are layer_norm,
    any other run of axes general_norm (never a layer_norm over the wrong axes)."""
    g = Graph()
    x = g.add_input(TensorType(shape, "float32"), "x")
    wshape = shape[axes[0]:axes[1]]
    w, b = (g.add_input(TensorType(wshape, "float32"), n) for n in ("w", "b"))
    (y,) = g.add_node(get("general_norm"), [x, w, b],
                      {"eps": 1e-5, "axis_start": axes[0], "axis_end": axes[1]})
    g.set_outputs([y], ["y"])
    (node,) = lift(to_relax(g), ["x", "w", "b"], ["y"]).nodes
    assert node.op.name == want


def test_group_norm_functional_runs_in_float32_under_autocast():
    """MegEngine's norm_rule casts GroupNorm's inputs (data, weight, bias) to float32."""
    x = GOLD["group_norm/in0"]
    w, b = (GOLD[f"group_norm/in{i}"] for i in (1, 2))
    with mge.amp.autocast():
        y = F.nn.group_norm(T(x.astype(np.float16)), 3, True, T(w.astype(np.float16)),
                            T(b.astype(np.float16)))
    assert y.dtype == np.float32
    want = F.nn.group_norm(T(x.astype(np.float16).astype(np.float32)), 3, True,
                           T(w.astype(np.float16).astype(np.float32)),
                           T(b.astype(np.float16).astype(np.float32)))
    assert rel_err(y.numpy(), want.numpy()) <= 1e-6
