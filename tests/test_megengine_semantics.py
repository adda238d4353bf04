"""megtrace's functional API against outputs of the real MegEngine 1.13 (golden data in
tests/data/megengine_ops.npz, made by tests/data/make_megengine_ops.py in the megref
chroot): same names, defaults and results, eagerly and traced."""
import numpy as np
import pytest
from conftest import TESTS, rel_err

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace

DATA = np.load(TESTS / "data" / "megengine_ops.npz")

CASES = {
    "interp_nearest": lambda a: F.nn.interpolate(a, size=(9, 4), mode="nearest"),
    "interp_bilinear": lambda a: F.nn.interpolate(a, size=(9, 11), mode="bilinear"),
    "interp_bilinear_align": lambda a: F.nn.interpolate(a, size=(9, 11), mode="bilinear",
                                                        align_corners=True),
    "interp_scale": lambda a: F.nn.interpolate(a, scale_factor=2.0, mode="bilinear"),
    "topk_default": lambda a: F.topk(a, 3),
    "topk_desc": lambda a: F.topk(a, 3, descending=True),
    "softmax_default": lambda a: F.softmax(a),
    "logsoftmax": lambda a: F.logsoftmax(a, axis=-1),
    "layer_norm": lambda a, w, b: F.nn.layer_norm(a, (6,), True, w, b),
    "gelu": lambda a: F.gelu(a),
    "silu": lambda a: F.silu(a),
    "hswish": lambda a: F.hswish(a),
    "hsigmoid": lambda a: F.hsigmoid(a),
    "relu6": lambda a: F.relu6(a),
    "softplus": lambda a: F.softplus(a),
    "logsigmoid": lambda a: F.logsigmoid(a),
    "leaky_relu": lambda a: F.leaky_relu(a, 0.2),
    "clip": lambda a: F.clip(a, -0.5, 1.0),
    "adaptive_avg": lambda a: F.adaptive_avg_pool2d(a, (2, 3)),
    "adaptive_max": lambda a: F.adaptive_max_pool2d(a, (2, 3)),
    "avg_pool_default": lambda a: F.avg_pool2d(a, 3, 2, 1),
    "max_pool_pad": lambda a: F.max_pool2d(a, 3, 2, 1),
    "pad_constant": lambda a: F.nn.pad(a, ((0, 0), (1, 2), (2, 1)), constant_value=0.5),
    "pad_reflect": lambda a: F.nn.pad(a, ((0, 0), (1, 2), (2, 1)), mode="reflect"),
    "pad_replicate": lambda a: F.nn.pad(a, ((0, 0), (1, 2), (2, 1)), mode="replicate"),
    "cumsum": lambda a: F.cumsum(a, axis=1),
    "argmax": lambda a: F.argmax(a, axis=1),
    "argmin_all": lambda a: F.argmin(a),
    "mean_axes": lambda a: F.mean(a, axis=(2, 3)),
    "sum_keep": lambda a: F.sum(a, axis=1, keepdims=True),
    "prod": lambda a: F.prod(a, axis=2),
    "floor_div": lambda a, b: F.floor_div(a, b),
    "mod": lambda a, b: a % b,
    "where": lambda m, a, b: F.where(m, a, b),
    "getitem": lambda a: a[1, :, ::2, None, -3:],
    "split": lambda a: F.split(a, [1, 3], axis=1),
    "stack": lambda a, b: F.stack([a, b], axis=1),
    "transpose": lambda a: a.transpose(3, 1, 0, 2),
    "linspace": lambda: F.linspace(0, 1, 7),
    "arange": lambda: F.arange(1, 10, 2),
    "int_div": lambda a: a / 4,
    "int_scalar": lambda a: a * 2 + 1,
    "int_float_scalar": lambda a: a * 0.5,
    "embedding": lambda i, w: F.nn.embedding(i, w),
    "matmul_batched": lambda a, b: F.matmul(a, b),
    "matmul_3d_2d": lambda a, b: F.matmul(a, b),
    "matmul_f32_f16": lambda a, b: F.matmul(a, b),
    "matmul_i32_f16": lambda a, b: F.matmul(a, b),
    "matmul_bool_i8": lambda a, b: F.matmul(a, b),
    "leaky_relu_int": lambda a: F.leaky_relu(a, 0.1),
    "relu6_int32": lambda a: F.relu6(a),
    "relu6_int8": lambda a: F.relu6(a),
    "conv_transpose2d_pad_w_only": lambda a, w: F.conv_transpose2d(
        a, w, stride=(2, 2), padding=(1, 1), dilation=(1, 1), output_padding=(0, 1)),
    "conv_transpose2d_pad_h_only": lambda a, w: F.conv_transpose2d(
        a, w, stride=2, padding=1, output_padding=(1, 0)),      # int forms work here
    "conv_transpose3d_pad_w_only": lambda a, w: F.conv_transpose3d(
        a, w, stride=2, output_padding=(0, 0, 1)),
    "avg_pool_mode_max": lambda a: F.avg_pool2d(a, 2, mode="max"),
    "max_pool_empty_windows": lambda a: F.max_pool2d(a, 2, 1, 2),
    "sign_nan": lambda a: F.sign(a),
    "roi_align_no_samples": lambda a, r: F.vision.roi_align(a, r, 2, sample_points=(0, 2)),
    "correlation_even_kernel": lambda a, b: F.vision.correlation(
        a, b, kernel_size=2, max_displacement=1, pad_size=1),
    "correlation_kernel_4": lambda a, b: F.vision.correlation(
        a, b, kernel_size=4, max_displacement=1, stride2=1, pad_size=2, is_multiply=False),
}


def _case(name):
    inputs, outputs, i = [], [], 0
    while f"{name}.in{i}" in DATA:
        inputs.append(DATA[f"{name}.in{i}"])
        i += 1
    j = 0
    while f"{name}.out{j}" in DATA:
        outputs.append(DATA[f"{name}.out{j}"])
        j += 1
    return inputs, outputs


def _check(got, want, name):
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        g = g.numpy()
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            assert rel_err(g, w) <= 1e-5, name
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def test_every_golden_case_is_checked():
    names = {k.split(".")[0] for k in DATA.files}
    assert names == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_matches_megengine(name):
    inputs, want = _case(name)
    _check(CASES[name](*[mge.tensor(a) for a in inputs]), want, name)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n not in ("linspace", "arange")))
def test_traced_matches_megengine(name):
    inputs, want = _case(name)
    fn = trace(CASES[name], symbolic=True)
    tensors = [mge.tensor(a) for a in inputs]
    fn(*tensors)
    _check(fn(*tensors), want, name)


def test_average_pool_of_a_window_lying_wholly_in_the_padding_is_zero():
    """MegEngine's own kernels misbehave here (eager: zeros everywhere; traced: "The pooling
    window lies outside completely" aborts), so the reference is NumPy: the mean over the
    window's pixels inside the image, 0 where there are none (as TVM's avg_pool2d gives)."""
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2)
    padded = np.pad(x[0, 0], 2, constant_values=np.nan)
    want = np.array([[np.nan_to_num(np.nanmean(padded[i:i + 2, j:j + 2]))
                      if not np.isnan(padded[i:i + 2, j:j + 2]).all() else 0.0
                      for j in range(5)] for i in range(5)], np.float32)[None, None]
    fn = lambda a: F.avg_pool2d(a, 2, 1, 2)                          # noqa: E731
    np.testing.assert_allclose(fn(mge.tensor(x)).numpy(), want)
    traced = trace(fn, symbolic=True)
    traced(mge.tensor(x))
    np.testing.assert_allclose(traced(mge.tensor(x)).numpy(), want)


def test_nvof_exists_and_refuses_on_cpu():
    """MegEngine 1.13 has F.vision.nvof as a CUDA kernel only (on CPU it aborts)."""
    assert "nvof" in F.vision.__all__
    with pytest.raises(NotImplementedError, match="CUDA"):
        F.vision.nvof(mge.tensor(np.zeros((1, 2, 4, 4, 4), np.uint8)))
