"""Golden outputs of MegEngine 1.13 functional ops (run in the megref chroot:
`../shared/megref/mpy tests/data/make_megengine_ops.py`). Writes megengine_ops.npz with,
for each case, `<case>.in<i>` inputs and `<case>.out<j>` outputs."""
import numpy as np
import megengine as mge
import megengine.functional as F

rng = np.random.RandomState(0)
x4 = rng.uniform(-2, 2, size=(2, 3, 5, 7)).astype("float32")
x3 = rng.uniform(-2, 2, size=(2, 4, 6)).astype("float32")
x2 = rng.permutation(30).reshape(3, 10).astype("float32")
ln_w = rng.uniform(0.5, 1.5, size=(6,)).astype("float32")
ln_b = rng.uniform(-0.5, 0.5, size=(6,)).astype("float32")

cases = {
    "interp_nearest": ([x4], lambda a: F.nn.interpolate(a, size=(9, 4), mode="nearest")),
    "interp_bilinear": ([x4], lambda a: F.nn.interpolate(a, size=(9, 11), mode="bilinear")),
    "interp_bilinear_align": ([x4], lambda a: F.nn.interpolate(
        a, size=(9, 11), mode="bilinear", align_corners=True)),
    "interp_scale": ([x4], lambda a: F.nn.interpolate(a, scale_factor=2.0, mode="bilinear")),
    "topk_default": ([x2], lambda a: F.topk(a, 3)),
    "topk_desc": ([x2], lambda a: F.topk(a, 3, descending=True)),
    "softmax_default": ([x4], lambda a: F.softmax(a)),
    "logsoftmax": ([x3], lambda a: F.logsoftmax(a, axis=-1)),
    "layer_norm": ([x3, ln_w, ln_b], lambda a, w, b: F.nn.layer_norm(a, (6,), True, w, b)),
    "gelu": ([x3], lambda a: F.gelu(a)),
    "silu": ([x3], lambda a: F.silu(a)),
    "hswish": ([x3], lambda a: F.hswish(a)),
    "hsigmoid": ([x3], lambda a: F.hsigmoid(a)),
    "relu6": ([x3 * 4], lambda a: F.relu6(a)),
    "softplus": ([x3], lambda a: F.softplus(a)),
    "logsigmoid": ([x3], lambda a: F.logsigmoid(a)),
    "leaky_relu": ([x3], lambda a: F.leaky_relu(a, 0.2)),
    "clip": ([x3], lambda a: F.clip(a, -0.5, 1.0)),
    "adaptive_avg": ([x4], lambda a: F.adaptive_avg_pool2d(a, (2, 3))),
    "adaptive_max": ([x4], lambda a: F.adaptive_max_pool2d(a, (2, 3))),
    "avg_pool_default": ([x4], lambda a: F.avg_pool2d(a, 3, 2, 1)),
    "max_pool_pad": ([x4], lambda a: F.max_pool2d(a, 3, 2, 1)),
    "pad_constant": ([x3], lambda a: F.nn.pad(a, ((0, 0), (1, 2), (2, 1)), constant_value=0.5)),
    "pad_reflect": ([x3], lambda a: F.nn.pad(a, ((0, 0), (1, 2), (2, 1)), mode="reflect")),
    "pad_replicate": ([x3], lambda a: F.nn.pad(a, ((0, 0), (1, 2), (2, 1)), mode="replicate")),
    "cumsum": ([x3], lambda a: F.cumsum(a, axis=1)),
    "argmax": ([x2], lambda a: F.argmax(a, axis=1)),
    "argmin_all": ([x2], lambda a: F.argmin(a)),
    "mean_axes": ([x4], lambda a: F.mean(a, axis=(2, 3))),
    "sum_keep": ([x4], lambda a: F.sum(a, axis=1, keepdims=True)),
    "prod": ([x3 * 0.5], lambda a: F.prod(a, axis=2)),
    "floor_div": ([x3, np.full((6,), 0.7, "float32")], lambda a, b: F.floor_div(a, b)),
    "mod": ([x3, np.full((6,), 0.7, "float32")], lambda a, b: a % b),
    "where": ([x3 > 0, x3, -x3], lambda m, a, b: F.where(m, a, b)),
    "getitem": ([x4], lambda a: a[1, :, ::2, None, -3:]),
    "split": ([x3], lambda a: F.split(a, [1, 3], axis=1)),
    "stack": ([x3, x3 * 2], lambda a, b: F.stack([a, b], axis=1)),
    "transpose": ([x4], lambda a: a.transpose(3, 1, 0, 2)),
    "linspace": ([], lambda: F.linspace(0, 1, 7)),
    "arange": ([], lambda: F.arange(1, 10, 2)),
    "int_div": ([np.arange(6, dtype="int32")], lambda a: a / 4),
    "int_scalar": ([np.arange(6, dtype="int32")], lambda a: a * 2 + 1),
    "int_float_scalar": ([np.arange(6, dtype="int32")], lambda a: a * 0.5),
    "embedding": ([np.array([[1, 2], [0, 2]], "int32"), x2],
                  lambda i, w: F.nn.embedding(i, w)),
    "matmul_batched": ([x3, np.swapaxes(x3, 1, 2)], lambda a, b: F.matmul(a, b)),
    "matmul_3d_2d": ([x3, x2[:, :6].T.copy()], lambda a, b: F.matmul(a, b)),
    # operands of different dtypes: float32 when either is a float (or bool)
    "matmul_f32_f16": ([x3[0], x3[1].T.astype("float16")], lambda a, b: F.matmul(a, b)),
    "matmul_i32_f16": ([np.arange(-6, 6, dtype="int32").reshape(3, 4),
                        x3[0, :, :2].astype("float16")], lambda a, b: F.matmul(a, b)),
    "matmul_bool_i8": ([x2[:, :4] > 10, np.arange(-4, 4, dtype="int8").reshape(4, 2)],
                       lambda a, b: F.matmul(a, b)),
    # integer activations: PRELU with a float slope computes in float32; RELU6 keeps ints
    "leaky_relu_int": ([np.array([-4, -2, 0, 3, 7], "int32")], lambda a: F.leaky_relu(a, 0.1)),
    "relu6_int32": ([np.array([-2, 0, 3, 9], "int32")], lambda a: F.relu6(a)),
    "relu6_int8": ([np.array([-2, 0, 3, 9], "int8")], lambda a: F.relu6(a)),
    # MegEngine applies output_padding only when its height part is non-zero
    "conv_transpose2d_pad_w_only": ([x4[:, :, :4, :5], x4[0, :, :3, :3].reshape(3, 1, 3, 3)],
                                    lambda a, w: F.conv_transpose2d(
                                        a, w, stride=(2, 2), padding=(1, 1), dilation=(1, 1),
                                        output_padding=(0, 1))),
    "conv_transpose2d_pad_h_only": ([x4[:, :, :4, :5], x4[0, :, :3, :3].reshape(3, 1, 3, 3)],
                                    lambda a, w: F.conv_transpose2d(
                                        a, w, stride=(2, 2), padding=(1, 1), dilation=(1, 1),
                                        output_padding=(1, 0))),
    "conv_transpose3d_pad_w_only": ([x4[:1, :2, :3, :4, None].repeat(3, axis=4),
                                     x4[1, :2, :3, :3, None].repeat(3, axis=3)
                                     .reshape(2, 1, 3, 3, 3)],
                                    lambda a, w: F.conv_transpose3d(
                                        a, w, stride=(2, 2, 2), padding=(0, 0, 0),
                                        dilation=(1, 1, 1), output_padding=(0, 0, 1))),
    # avg_pool2d passes its mode on to Pooling: "max" is max pooling
    "avg_pool_mode_max": ([x4], lambda a: F.avg_pool2d(a, 2, mode="max")),
    # windows lying wholly in the padding: -FLT_MAX
    "max_pool_empty_windows": ([x4[:1, :2, :2, :2]], lambda a: F.max_pool2d(a, 2, 1, 2)),
    # megdnn's SIGN: NaN gives 0
    "sign_nan": ([np.array([1, np.nan, np.inf, -np.inf, 0, -0.0, -2.5], "float32")],
                 lambda a: F.sign(a)),
    # ROIAlign with 0 sample points gives zeros
    "roi_align_no_samples": ([x4, np.array([[0, 1, 1, 5, 4], [1, 0.5, 2, 6, 4.5]], "float32")],
                             lambda a, r: F.vision.roi_align(a, r, 2, sample_points=(0, 2))),
    # an even kernel_size works as the odd size below it (taps -radius..radius)
    "correlation_even_kernel": ([x4, x4[::-1].copy()], lambda a, b: F.vision.correlation(
        a, b, kernel_size=2, max_displacement=1, pad_size=1)),
    "correlation_kernel_4": ([x4, x4[::-1].copy()], lambda a, b: F.vision.correlation(
        a, b, kernel_size=4, max_displacement=1, stride2=1, pad_size=2, is_multiply=False)),
}

out = {}
for name, (inputs, fn) in cases.items():
    res = fn(*[mge.tensor(i) for i in inputs])
    res = res if isinstance(res, (list, tuple)) else [res]
    for i, a in enumerate(inputs):
        out[f"{name}.in{i}"] = a
    for j, r in enumerate(res):
        out[f"{name}.out{j}"] = r.numpy()
np.savez("tests/data/megengine_ops.npz", **out)
print(len(cases), "cases")
