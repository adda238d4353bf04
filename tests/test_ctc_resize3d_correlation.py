"""F.nn.ctc_loss, trilinear F.nn.interpolate and F.nn.correlation: real MegEngine 1.13's
results (tests/data/make_megengine_ctc_resize3d_correlation.py), independent NumPy
references, traced/compiled runs and our dumps in the real Lite runtime."""
import itertools
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace

GOLDEN = Path(__file__).parent / "data" / "megengine_ctc_resize3d_correlation.npz"
BLANKS = {"ctc_2d": 0, "ctc_flat": 0, "ctc_blank_last": 2}


# -- ctc ---------------------------------------------------------------------------------
def _ctc_reference(pred, pred_len, labels, blank):
    """-log P(labels | pred) by the textbook forward recursion in probability space."""
    ext = [blank]
    for s in labels:
        ext += [int(s), blank]
    alpha = np.zeros(len(ext))
    alpha[0] = pred[0, ext[0]]
    alpha[1] = pred[0, ext[1]]
    for t in range(1, pred_len):
        new = np.zeros_like(alpha)
        for s in range(len(ext)):
            total = alpha[s] + (alpha[s - 1] if s >= 1 else 0)
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                total += alpha[s - 2]
            new[s] = total * pred[t, ext[s]]
        alpha = new
    return -np.log(alpha[-1] + alpha[-2])


def _ctc_args(d, name):
    return [mge.tensor(d[f"{name}.{k}"]) for k in ("pred", "pred_lengths", "label",
                                                    "label_lengths")]


@pytest.mark.parametrize("name", list(BLANKS))
def test_ctc_loss_matches_megengine_and_a_reference(name):
    d = np.load(GOLDEN)
    for reduction in ("none", "mean", "sum"):
        got = F.nn.ctc_loss(*_ctc_args(d, name), blank=BLANKS[name], reduction=reduction)
        assert rel_err(got.numpy(), d[f"{name}.{reduction}"]) <= 1e-5
    pred, lengths = d[f"{name}.pred"].astype(np.float64), d[f"{name}.label_lengths"]
    label = d[f"{name}.label"]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    seqs = [label[i, :n] if label.ndim == 2 else label[starts[i]:starts[i + 1]]
            for i, n in enumerate(lengths)]
    want = [_ctc_reference(pred[:, i], d[f"{name}.pred_lengths"][i], s, BLANKS[name])
            for i, s in enumerate(seqs)]
    got = F.nn.ctc_loss(*_ctc_args(d, name), blank=BLANKS[name], reduction="none")
    assert rel_err(got.numpy(), np.array(want)) <= 1e-5


def test_ctc_loss_checks_like_megengine():
    d = np.load(GOLDEN)
    pred, pred_len, label, label_len = _ctc_args(d, "ctc_2d")
    with pytest.raises(AssertionError, match="blank must be in label range"):
        F.nn.ctc_loss(pred, pred_len, label, label_len, blank=9)
    with pytest.raises(AssertionError, match="pred_lengths must be in range"):
        F.nn.ctc_loss(pred, pred_len * 9, label, label_len)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.nn.ctc_loss(pred, pred_len, label, label_len, reduction="max")


def test_ctc_loss_traced_matches_eager():
    d = np.load(GOLDEN)
    args = _ctc_args(d, "ctc_2d")

    @trace(symbolic=True)
    def loss(pred):
        return F.nn.ctc_loss(pred, *args[1:], reduction="none")
    want = d["ctc_2d.none"]
    for _ in range(2):
        assert rel_err(loss(args[0]).numpy(), want) <= 1e-5


# -- trilinear ---------------------------------------------------------------------------
TRILINEAR = {"tri_up": dict(size=(5, 7, 9), align_corners=False),
             "tri_up_align": dict(size=(5, 7, 9), align_corners=True),
             "tri_down": dict(size=(2, 3, 2), align_corners=False),
             "tri_down_align": dict(size=(2, 3, 1), align_corners=True),
             "tri_scale": dict(scale_factor=1.7, align_corners=False)}


def _trilinear_reference(x, size, align):
    """Every output voxel from its 8 neighbours (the unseparated formula), float64."""
    n, c, *ins = x.shape
    out = np.zeros((n, c, *size))

    def coord(i, a, b):
        if align:
            return i * ((a - 1) / (b - 1) if b > 1 else 0.0)
        return max((i + 0.5) * a / b - 0.5, 0.0)
    for o in itertools.product(*(range(s) for s in size)):
        src = [coord(i, a, b) for i, a, b in zip(o, ins, size)]
        lo = [int(s) for s in src]
        hi = [min(l + 1, a - 1) for l, a in zip(lo, ins)]
        lam = [s - l for s, l in zip(src, lo)]
        acc = 0.0
        for corner in itertools.product((0, 1), repeat=3):
            idx = tuple(h if k else l for k, l, h in zip(corner, lo, hi))
            w = np.prod([lm if k else 1 - lm for k, lm in zip(corner, lam)])
            acc = acc + w * x[(slice(None), slice(None)) + idx]
        out[(slice(None), slice(None)) + o] = acc
    return out


@pytest.mark.parametrize("name", list(TRILINEAR))
def test_trilinear_matches_megengine_and_a_reference(name):
    d = np.load(GOLDEN)
    kw = TRILINEAR[name]
    got = F.nn.interpolate(mge.tensor(d["tri.x"]), mode="trilinear", **kw).numpy()
    assert rel_err(got, d[name]) <= 1e-5
    assert rel_err(got, _trilinear_reference(d["tri.x"].astype(np.float64), got.shape[2:],
                                             kw["align_corners"])) <= 1e-5


def test_trilinear_arguments():
    x = mge.tensor(np.zeros((1, 1, 2, 2, 2), np.float32))
    with pytest.raises(AssertionError, match="must have 5 dimensions"):
        F.nn.interpolate(mge.tensor(np.zeros((1, 1, 2, 2), np.float32)), size=(2, 2, 2),
                         mode="trilinear")
    with pytest.raises(AssertionError, match=r"must be equal to \(3, \)"):
        F.nn.interpolate(x, scale_factor=(2.0, 2.0), mode="trilinear")
    assert F.nn.interpolate(x, size=3, mode="trilinear").shape == (1, 1, 3, 1, 1)


# -- correlation -------------------------------------------------------------------------
CORRELATION = {"corr_default": dict(),
               "corr_k3_d2_pad2": dict(kernel_size=3, max_displacement=2, pad_size=2),
               "corr_strides": dict(kernel_size=1, max_displacement=4, stride1=2, stride2=2,
                                    pad_size=3),
               "corr_absdiff": dict(kernel_size=3, max_displacement=1, stride1=2, pad_size=1,
                                    is_multiply=False)}


def _correlation_reference(a, b, kernel_size=1, max_displacement=1, stride1=1, stride2=1,
                           pad_size=0, is_multiply=True):
    """Loops over every output element, reading 0 outside the unpadded inputs."""
    n, c, h, w = a.shape
    r = (kernel_size - 1) // 2
    border = max_displacement + r
    th = int(np.ceil((h + 2 * pad_size - 2 * border) / stride1))
    tw = int(np.ceil((w + 2 * pad_size - 2 * border) / stride1))
    gr = max_displacement // stride2
    gw = 2 * gr + 1
    out = np.zeros((n, gw * gw, th, tw))

    def at(img, y, x):
        return img[:, :, y, x] if 0 <= y < h and 0 <= x < w else np.zeros((n, c))
    for ch, y, x in itertools.product(range(gw * gw), range(th), range(tw)):
        y1 = y * stride1 + border - pad_size
        x1 = x * stride1 + border - pad_size
        dx, dy = (ch % gw - gr) * stride2, (ch // gw - gr) * stride2
        total = np.zeros(n)
        for i, j in itertools.product(range(-r, r + 1), repeat=2):
            p, q = at(a, y1 + j, x1 + i), at(b, y1 + dy + j, x1 + dx + i)
            total += (p * q if is_multiply else np.abs(p - q)).sum(axis=1)
        out[:, ch, y, x] = total / ((2 * r + 1) ** 2 * c)
    return out


@pytest.mark.parametrize("name", list(CORRELATION))
def test_correlation_matches_megengine_and_a_reference(name):
    d = np.load(GOLDEN)
    kw = CORRELATION[name]
    got = F.nn.correlation(mge.tensor(d["corr.a"]), mge.tensor(d["corr.b"]), **kw).numpy()
    assert rel_err(got, d[name]) <= 1e-5
    want = _correlation_reference(d["corr.a"].astype(np.float64),
                                  d["corr.b"].astype(np.float64), **kw)
    assert rel_err(got, want) <= 1e-5
    assert F.vision.correlation is F.nn.correlation


def test_correlation_arguments():
    a = mge.tensor(np.zeros((1, 2, 5, 5), np.float32))
    with pytest.raises(ValueError, match="must be at least 1"):
        F.nn.correlation(a, a, kernel_size=0)
    with pytest.raises(ValueError, match="one shape"):
        F.nn.correlation(a, mge.tensor(np.zeros((1, 2, 5, 6), np.float32)))
    with pytest.raises(ValueError, match="smaller than the border"):
        F.nn.correlation(a, a, max_displacement=3)


# -- traced, compiled, dumped ------------------------------------------------------------
@pytest.mark.lite
def test_trilinear_and_correlation_dump_run_in_lite(lite, tmp_path):
    d = np.load(GOLDEN)

    @trace(symbolic=True, capture_as_const=True)
    def both(x, a, b):
        return (F.nn.interpolate(x, size=(5, 7, 9), mode="trilinear", align_corners=True),
                F.nn.correlation(a, b, kernel_size=3, max_displacement=2, pad_size=2))
    feeds = {"x": d["tri.x"], "a": d["corr.a"], "b": d["corr.b"]}
    args = [mge.tensor(v) for v in feeds.values()]
    for _ in range(2):
        vol, cost = both(*args)
        assert rel_err(vol.numpy(), d["tri_up_align"]) <= 1e-5
        assert rel_err(cost.numpy(), d["corr_k3_d2_pad2"]) <= 1e-5
    path = tmp_path / "both.mge"
    both.dump(path, arg_names=list(feeds), output_names=["vol", "cost"])
    outs = lite.run_model(path, feeds)
    assert rel_err(outs["vol"], d["tri_up_align"]) <= 1e-5
    assert rel_err(outs["cost"], d["corr_k3_d2_pad2"]) <= 1e-5
