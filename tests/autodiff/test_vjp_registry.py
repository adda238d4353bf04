"""Every registered op declares its gradient: a VJP that matches central finite
differences of its own NumPy reference (float64) on the op samples, or
NOT_DIFFERENTIABLE."""
import numpy as np
import pytest

from megtrace.autodiff.grad import Grad
from megtrace.dispatch import apply
from megtrace.ops import NOT_DIFFERENTIABLE, all_ops, get
from megtrace.tensor import Tensor
from tests.ops.samples import SAMPLES, Sample, f32

# Ops whose VJPs are being written; this set only shrinks (every op has one now).
PENDING: set[str] = set()

# (op, input index): MegEngine gives no gradient there although the function varies
# (fmod's divisor: InvalidGrad in MegEngine).
# The rois of the ROI ops: MegEngine's backward oprs give the image (and offsets) only.
NO_GRADIENT_BY_DESIGN = {("mod", 1), ("roi_align", 1), ("roi_pooling", 1),
                         ("deformable_psroi_pooling", 1)}
# (op, param, value): MegEngine has no backward opr for that form, and megtrace's VJP
# refuses it with NotImplementedError naming it (checked below instead of the gradient)
NO_GRADIENT_FOR_PARAMS = {("warp_perspective", "format", "NHWC"),
                          ("warp_affine", "imode", "NEAREST")}
# ops whose MegEngine gradient is a straight-through estimate, not the derivative of the
# (piecewise constant) forward: checked against real MegEngine in tests/test_quantization.py
STRAIGHT_THROUGH_OPS = {"fake_quant", "tqt", "lsq"}
# samples whose points sit where the function has no derivative (ties, kinks) on purpose
NON_SMOOTH_SAMPLES = {"clip-nan", "sign-float", "round-halves"}
# samples with outputs that are not functions of the input: svd's extra columns of U/Vh
# with full_matrices are any basis of a null space (LAPACK's pick; no derivative exists)
ARBITRARY_OUTPUT_SAMPLES = {"svd-full"}

_H = 1e-6


def test_every_op_declares_its_gradient():
    missing = {op.name for op in all_ops() if op.vjp is None}
    assert missing <= PENDING, f"ops without a vjp declaration: {sorted(missing - PENDING)}"


def test_pending_list_has_no_stale_entries():
    done = {name for name in PENDING if get(name).vjp is not None}
    assert not done, f"remove from PENDING (their vjp is declared now): {sorted(done)}"


def _checkable(sample) -> bool:
    """A float input to differentiate and only finite values (decided at collection with
    the same generator the `rng` fixture gives, so no case skips itself)."""
    arrays = sample.make(np.random.default_rng(0))
    return any(_float(a) and a.size for a in arrays) and \
        not any(_float(a) and not np.all(np.isfinite(a)) for a in arrays)


def _refused(sample) -> bool:
    return any(sample.op == op and sample.params.get(name) == value
               for op, name, value in NO_GRADIENT_FOR_PARAMS)


def _differentiable_samples():
    out = []
    for s in SAMPLES:
        op = get(s.op)
        if callable(op.vjp) and op.vjp is not NOT_DIFFERENTIABLE and not _refused(s) and \
                s.op not in STRAIGHT_THROUGH_OPS and str(s) not in NON_SMOOTH_SAMPLES | ARBITRARY_OUTPUT_SAMPLES and _checkable(s):
            out.append(s)
    return out


@pytest.mark.parametrize("sample", [s for s in SAMPLES if _refused(s)], ids=str)
def test_forms_without_a_gradient_are_refused_by_name(sample, rng):
    op = get(sample.op)
    tensors = [Tensor._wrap(np.array(a)) for a in sample.make(rng)]
    with Grad() as grad:
        for t in tensors:
            if t.dtype.kind == "f":
                grad.wrt(t, callback=lambda g: None)
        out = apply(op, *tensors, **sample.params)
        out = out[0] if isinstance(out, tuple) else out
        name = next(str(v) for o, k, v in NO_GRADIENT_FOR_PARAMS if o == sample.op)
        with pytest.raises(NotImplementedError, match=name):
            grad([out], [Tensor._wrap(np.ones(out.shape, out.dtype.name))])


def _float(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _loss64(op, arrays, kwargs, cotangents):
    outs = op.run_eager([a.astype(np.float64) if _float(a) else a for a in arrays], kwargs)
    return sum(float(np.sum(np.asarray(o, np.float64) * c))
               for o, c in zip(outs, cotangents) if c is not None)


def _numeric_grad(op, arrays, kwargs, cotangents, i):
    x = arrays[i].astype(np.float64)
    grad = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[j] += _H
        minus[j] -= _H
        args_p = list(arrays)
        args_m = list(arrays)
        args_p[i], args_m[i] = plus, minus
        grad[j] = (_loss64(op, args_p, kwargs, cotangents) -
                   _loss64(op, args_m, kwargs, cotangents)) / (2 * _H)
    return grad


# parameter combinations the op samples do not reach
EXTRA = [
    Sample("matmul", lambda r: [f32(3, 2)(r), f32(3, 4)(r)], {"transpose_a": True}, tag="ta"),
    Sample("matmul", lambda r: [f32(3, 2)(r), f32(4, 3)(r)],
           {"transpose_a": True, "transpose_b": True}, tag="ta-tb"),
    Sample("matmul", lambda r: [f32(2, 1, 3, 4)(r), f32(3, 4, 2)(r)], tag="batch-broadcast"),
    Sample("reduce", lambda r: [f32(2, 3, 4)(r)], {"mode": "sum", "axis": (0, 2), "keepdims": True},
           tag="keepdims"),
    Sample("reduce", lambda r: [f32(2, 3, 4)(r)], {"mode": "max", "axis": -1}, tag="max-last"),
    Sample("concat", lambda r: [f32(2, 1)(r), f32(2, 3)(r)], {"axis": 1}, tag="axis1"),
    Sample("subtensor", lambda r: [f32(5, 4)(r)],
           {"index": ((0, 1, None, 2, None), (1, None, None, None, 2))}, tag="step-idx"),
    Sample("softmax", lambda r: [f32(2, 3, 4)(r)], {"axis": 1}, tag="axis1"),
    Sample("layer_norm", lambda r: [f32(2, 3, 4)(r), f32(3, 4)(r), f32(3, 4)(r)],
           {"normalized_dim": 2}, tag="2d"),
    Sample("indexing_one_hot",
           lambda r: [f32(3, 4, 2)(r), r.integers(0, 4, (3, 2)).astype("int32")],
           {"axis": 1}, tag="axis1"),
    Sample("adaptive_pool2d", lambda r: [f32(2, 3, 5, 7)(r)], {"mode": "max", "out": (3, 4)},
           tag="max-overlapping-bins"),
    Sample("adaptive_pool2d", lambda r: [f32(1, 2, 6, 4)(r)], {"mode": "max", "out": (3, 2)},
           tag="max-tiles"),
    Sample("adaptive_pool2d", lambda r: [f32(1, 2, 5, 7)(r)], {"mode": "average", "out": (3, 4)},
           tag="avg-overlapping-bins"),
    Sample("pad", lambda r: [f32(2, 4, 3)(r)], {"pad_width": ((0, 0), (2, 1), (1, 2)),
                                                "mode": "reflect"}, tag="reflect"),
    Sample("pool2d", lambda r: [f32(1, 2, 7, 6)(r)],
           {"mode": "max", "kernel": (3, 2), "stride": (2, 1), "padding": (1, 1)},
           tag="max-overlap"),
    Sample("conv2d", lambda r: [f32(2, 4, 8, 7)(r), f32(2, 3, 2, 3, 2)(r)],
           {"stride": (2, 3), "padding": (1, 0), "dilation": (2, 1)}, tag="groups-strided"),
    # 16 input channels (full vectors in the CPU rules' layout), directly and strided
    Sample("conv2d", lambda r: [f32(2, 16, 4, 3)(r), f32(3, 16, 3, 3)(r)],
           {"padding": (1, 1)}, tag="ic16-pad1"),
    Sample("conv2d", lambda r: [f32(1, 16, 3, 4)(r), f32(2, 16, 3, 1)(r)],
           {"padding": (2, 0)}, tag="ic16-wide-padding"),
    Sample("conv2d", lambda r: [f32(1, 16, 5, 4)(r), f32(2, 16, 3, 3)(r)],
           {"stride": (2, 2), "padding": (1, 1)}, tag="ic16-strided"),
]


@pytest.mark.parametrize("sample", _differentiable_samples() + [s for s in EXTRA if _checkable(s)],
                         ids=str)
def test_vjp_matches_finite_differences(sample, rng):
    op = get(sample.op)
    arrays = sample.make(rng)
    kwargs = dict(op.bind(sample.params))
    tensors = [Tensor._wrap(np.array(a)) for a in arrays]
    got: dict[int, np.ndarray] = {}
    with Grad() as grad:
        for i, t in enumerate(tensors):
            if _float(arrays[i]):
                grad.wrt(t, callback=lambda g, i=i: got.__setitem__(i, g.numpy()))
        outs = apply(op, *tensors, **sample.params)
        outs = outs if isinstance(outs, tuple) else (outs,)
        cotangents = [rng.standard_normal(o.shape).astype(o.dtype.name)
                      if o.dtype.kind == "f" else None for o in outs]
        grad([o for o, c in zip(outs, cotangents) if c is not None],
             [Tensor._wrap(c) for c in cotangents if c is not None])
    for i, a in enumerate(arrays):
        if not _float(a) or (sample.op, i) in NO_GRADIENT_BY_DESIGN:
            continue
        want = _numeric_grad(op, arrays, kwargs, cotangents, i)
        have = got.get(i, np.zeros_like(want))
        assert have.shape == want.shape, (i, have.shape, want.shape)
        scale = max(1.0, float(np.abs(want).max(initial=0)))
        np.testing.assert_allclose(have, want, rtol=2e-3, atol=2e-3 * scale,
                                   err_msg=f"{sample}: gradient of input {i}")
