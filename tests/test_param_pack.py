"""megtrace.distributed.helper's parameter packing (MegEngine's ParamPackSplit /
ParamPackConcat, used to all-reduce many gradients as one buffer), against NumPy."""
import numpy as np
import pytest

import megtrace as mge
from megtrace.distributed.helper import get_offsets, param_pack_concat, param_pack_split
from megtrace.jit import trace


def test_split_reads_each_span_in_its_shape():
    a = np.arange(13, dtype=np.float32)
    b, c, d = param_pack_split(mge.Tensor(a), [0, 1, 1, 10, 12, 13], [(1,), (3, 3), ()])
    np.testing.assert_array_equal(b.numpy(), a[:1])
    np.testing.assert_array_equal(c.numpy(), a[1:10].reshape(3, 3))
    assert d.shape == (1,) and d.numpy()[0] == 12      # a scalar comes back as (1,)


def test_concat_packs_flat_with_zero_gaps_and_round_trips():
    rng = np.random.default_rng(0)
    shapes = [(2, 3), (4,), (1, 1, 5)]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    offsets = get_offsets(shapes)
    assert offsets == [0, 6, 6, 10, 10, 15]
    packed = param_pack_concat([mge.Tensor(x) for x in arrays], mge.Tensor(offsets), offsets)
    np.testing.assert_array_equal(packed.numpy(), np.concatenate([x.ravel() for x in arrays]))
    back = param_pack_split(packed, offsets, shapes)
    for got, want in zip(back, arrays):
        np.testing.assert_array_equal(got.numpy(), want)
    aligned = [0, 6, 8, 12, 16, 21]                     # spans aligned with gaps
    gapped = param_pack_concat([mge.Tensor(x) for x in arrays], mge.Tensor(aligned), aligned)
    want = np.zeros(21, np.float32)
    for x, begin in zip(arrays, aligned[::2]):
        want[begin:begin + x.size] = x.ravel()
    np.testing.assert_array_equal(gapped.numpy(), want)


def test_packing_traces_and_compiles():
    shapes = [(2, 2), (3,)]
    offsets = get_offsets(shapes)

    @trace(symbolic=True)
    def repack(a, b):
        packed = param_pack_concat([a * 2, b + 1], None, offsets)
        x, y = param_pack_split(packed, offsets, shapes)
        return packed, x, y
    a, b = np.ones((2, 2), np.float32), np.arange(3, dtype=np.float32)
    for _ in range(2):
        packed, x, y = repack(mge.Tensor(a), mge.Tensor(b))
        np.testing.assert_array_equal(packed.numpy(), np.concatenate([2 * a.ravel(), b + 1]))
        np.testing.assert_array_equal(x.numpy(), 2 * a)
        np.testing.assert_array_equal(y.numpy(), b + 1)


def test_offsets_that_do_not_fit_are_refused():
    a = mge.Tensor(np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="a \\[begin, end\\] pair per tensor"):
        param_pack_split(a, [0, 1, 1], [(1,), (3, 3)])
    with pytest.raises(ValueError, match="tensor 1 of 9 elements cannot take offsets"):
        param_pack_split(a, [0, 1, 1, 8], [(1,), (3, 3)])
    with pytest.raises(ValueError, match="offsets reach 12, the input has 10"):
        param_pack_split(a, [0, 3, 3, 12], [(3,), (3, 3)])
    with pytest.raises(ValueError, match="tensor 0 of 4 elements"):
        param_pack_concat([mge.Tensor(np.zeros(4, np.float32))], None, [0, 5])
