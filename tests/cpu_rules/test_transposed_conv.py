"""Transposed convolutions build as sub-pixel stride-1 convolutions (the CPU conv rule runs
them) and still compute MegEngine's ConvolutionBackwardData: checked against a float64
reference that scatters each input pixel's weighted kernel into the output."""
import itertools

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace
from megtrace.relay_bridge.cpu.transposed_conv import as_subpixel_convs


def _scatter_ref(x, w, stride, padding, output_padding, groups):
    """x (N, C, *S), w (C, OCg, *K) or (G, ICg, OCg, *K): out_full[i*s + k] += x[i] w[k]."""
    nd = x.ndim - 2
    x = x.astype(np.float64)
    w = w.astype(np.float64).reshape((groups, -1) + w.shape[-nd - 1:])
    icg, ocg, kernel = w.shape[1], w.shape[2], w.shape[3:]
    full = tuple((x.shape[2 + i] - 1) * stride[i] + kernel[i] + output_padding[i]
                 for i in range(nd))
    out = np.zeros((x.shape[0], groups * ocg) + full)
    for pos in itertools.product(*(range(s) for s in x.shape[2:])):
        for g in range(groups):
            pix = x[(slice(None), slice(g * icg, (g + 1) * icg)) + pos]       # (N, ICg)
            contrib = np.einsum("nc,cok->nok", pix, w[g].reshape(icg, ocg, -1))
            contrib = contrib.reshape((x.shape[0], ocg) + kernel)
            window = tuple(slice(p * s, p * s + k) for p, s, k in zip(pos, stride, kernel))
            out[(slice(None), slice(g * ocg, (g + 1) * ocg)) + window] += contrib
    crop = tuple(slice(p, f - p) for p, f in zip(padding, full))
    return out[(slice(None), slice(None)) + crop]


CASES = [  # x shape, w shape, stride, padding, output_padding, groups
    ((2, 4, 5, 6), (4, 3, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((1, 6, 7, 5), (2, 3, 2, 4, 3), (3, 2), (2, 1), (1, 0), 2),
    ((1, 3, 4, 4), (3, 5, 1, 1), (2, 2), (0, 0), (0, 0), 1),
    ((2, 8, 6, 6), (8, 4, 4, 4), (2, 2), (1, 1), (0, 0), 1),
    ((1, 2, 5, 5), (2, 2, 5, 5), (1, 1), (2, 2), (0, 0), 1),
    ((1, 3, 3, 4), (3, 2, 2, 3), (4, 3), (0, 2), (3, 2), 1),
    ((2, 4, 3, 5, 6), (4, 3, 3, 5, 2), (3, 2, 2), (0, 2, 1), (2, 1, 1), 1),
    # stride-1 input gradients of "same" convs (ResNet's 3x3 pad 1, on a 1x1 map too)
    ((2, 8, 1, 1), (8, 6, 3, 3), (1, 1), (1, 1), (0, 0), 1),
    ((2, 4, 4, 3), (4, 5, 3, 3), (1, 1), (1, 1), (0, 0), 1),
    # padding beyond the taps: the phase grid starts past its first position
    ((1, 3, 6, 5), (3, 2, 3, 3), (1, 1), (2, 2), (0, 0), 1),
    ((1, 4, 4, 4), (4, 4, 3, 3), (2, 2), (3, 3), (1, 1), 1),
    # strided input gradients on small maps (ResNet's 3x3/2 and 1x1/2 on 1x1 and 2x2 maps),
    # phases without taps (kernel smaller than the stride), mixed strides
    ((2, 6, 1, 1), (6, 5, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((2, 6, 2, 2), (6, 5, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((2, 6, 3, 2), (6, 4, 1, 1), (2, 2), (0, 0), (1, 1), 1),
    ((1, 3, 4, 3), (3, 4, 3, 2), (3, 3), (1, 0), (2, 0), 1),
    ((1, 4, 3, 5), (4, 2, 3, 3), (2, 1), (1, 1), (1, 0), 1),
    ((1, 4, 5, 5), (4, 3, 5, 5), (2, 2), (2, 2), (1, 1), 1),
    # stride 1 grouped and 3-d (the weight transposed and flipped rather than gathered)
    ((1, 6, 5, 4), (2, 3, 4, 3, 2), (1, 1), (1, 0), (0, 0), 2),
    ((1, 4, 3, 4, 5), (4, 2, 3, 2, 3), (1, 1, 1), (1, 0, 1), (0, 0, 0), 1),
]


@pytest.mark.parametrize("xs, ws, stride, padding, output_padding, groups", CASES)
def test_compiled_transposed_conv_matches_scatter_reference(xs, ws, stride, padding,
                                                            output_padding, groups, rng):
    x = rng.standard_normal(xs).astype("float32")
    w = rng.standard_normal(ws).astype("float32")
    fn = F.conv_transpose2d if len(xs) == 4 else F.conv_transpose3d
    infer = trace(symbolic=True)(lambda a, b: fn(a, b, stride=stride, padding=padding,
                                                 output_padding=output_padding,
                                                 groups=groups))
    got = infer(mge.tensor(x), mge.tensor(w)).numpy()
    want = _scatter_ref(x, w, stride, padding, output_padding, groups)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    built = as_subpixel_convs(infer.graph)
    names = [n.op.name for n in built.nodes]
    assert f"conv{len(xs) - 2}d" in names and not any("transpose" in n and "conv" in n
                                                      for n in names)


def test_dilated_transposed_conv_keeps_tvm_lowering(rng):
    x = mge.tensor(rng.standard_normal((1, 2, 4, 4)).astype("float32"))
    w = mge.tensor(rng.standard_normal((2, 3, 3, 3)).astype("float32"))
    infer = trace(symbolic=True)(lambda a, b: F.conv_transpose2d(a, b, stride=2, dilation=2))
    got = infer(x, w).numpy()
    np.testing.assert_allclose(got, F.conv_transpose2d(x, w, stride=2, dilation=2).numpy(),
                               rtol=1e-5, atol=1e-5)
    assert [n.op.name for n in as_subpixel_convs(infer.graph).nodes] == ["conv_transpose2d"]


def test_stride1_subpixel_conv_computes_only_the_output(rng):
    """A stride-1 transposed conv (every conv's input gradient) is a plain conv of the
    flipped weight with padding k-1-p: no rows or columns computed to be cropped away."""
    infer = trace(symbolic=True)(lambda a, b: F.conv_transpose2d(a, b, padding=1))
    infer(mge.tensor(rng.standard_normal((2, 8, 1, 1)).astype("float32")),
          mge.tensor(rng.standard_normal((8, 6, 3, 3)).astype("float32")))
    convs = [n for n in as_subpixel_convs(infer.graph).nodes if n.op.name == "conv2d"]
    assert [n.outputs[0].type.shape for n in convs] == [(2, 6, 1, 1)]
    assert tuple(convs[0].kwargs["padding"]) == (1, 1)
    # its weight is transposed and flipped (fused into the weight packing), not gathered
    assert "take" not in {n.op.name for n in as_subpixel_convs(infer.graph).nodes}


def test_strided_subpixel_convs_take_each_phases_own_taps(rng):
    """A 3x3 stride-2 transposed conv is four convs with the phases' own 2x2, 2x1, 1x2 and
    1x1 taps (9 in all, not four zero-filled 2x2), no weight gather; on a 1x1 input (the
    input gradient of ResNet-18's last stride-2 conv on 32x32 images) each phase computes
    its one output position from its one live tap."""
    def convs(xs):
        infer = trace(symbolic=True)(lambda a, b: F.conv_transpose2d(
            a, b, stride=2, padding=1, output_padding=1))
        infer(mge.tensor(rng.standard_normal(xs).astype("float32")),
              mge.tensor(rng.standard_normal((8, 6, 3, 3)).astype("float32")))
        built = as_subpixel_convs(infer.graph)
        assert "take" not in {n.op.name for n in built.nodes}
        return [n for n in built.nodes if n.op.name == "conv2d"]
    found = convs((2, 8, 5, 5))
    assert sorted(n.inputs[1].type.shape[2:] for n in found) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    found = convs((2, 8, 1, 1))
    assert [n.inputs[1].type.shape[2:] for n in found] == [(1, 1)] * 4
    assert [n.outputs[0].type.shape for n in found] == [(2, 6, 1, 1)] * 4
