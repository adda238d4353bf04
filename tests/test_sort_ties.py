"""Which of several equal elements F.topk / F.argsort / F.sort put first, as real MegEngine
1.13 does (megdnn: ascending is stable, descending is that order reversed), in eager mode,
in a compiled trace and in the dump Lite runs; and TopK's k beyond its row's length.
The expected indices are real MegEngine's (tests/data/make_sort_ties_golden.py)."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace

ROW = np.array([2., 1., 1., 1., 1., 0.], "float32")
LONG = np.zeros(2000, "float32")
LONG[::3] = 1

# (function, input, real MegEngine 1.13's indices)
GOLDEN = [
    (lambda x: F.topk(x, k=6, descending=True)[1], ROW, [0, 4, 3, 2, 1, 5]),
    (lambda x: F.topk(x, k=6, descending=False)[1], ROW, [5, 1, 2, 3, 4, 0]),
    (lambda x: F.topk(x, k=3, descending=True)[1], ROW, [0, 4, 3]),
    (lambda x: F.argsort(x, descending=True), ROW, [0, 4, 3, 2, 1, 5]),
    (lambda x: F.argsort(x, descending=False), ROW, [5, 1, 2, 3, 4, 0]),
    (lambda x: F.sort(x, descending=True)[1], ROW, [0, 4, 3, 2, 1, 5]),
    (lambda x: F.topk(x, k=5, descending=True)[1], LONG, [1998, 1995, 1992, 1989, 1986]),
    (lambda x: F.topk(x, k=5, descending=False)[1], LONG, [1, 2, 4, 5, 7]),
]
IDS = ["topk6-desc", "topk6-asc", "topk3-desc", "argsort-desc", "argsort-asc", "sort-desc",
       "long-topk5-desc", "long-topk5-asc"]


@pytest.mark.parametrize("fn,x,want", GOLDEN, ids=IDS)
def test_equal_elements_in_megengines_order_eager_and_compiled(fn, x, want):
    assert fn(mge.tensor(x)).numpy().tolist() == want
    traced = trace(symbolic=True)(fn)
    for _ in range(2):              # the second call runs the TVM-compiled graph
        assert traced(mge.tensor(x)).numpy().tolist() == want


@pytest.mark.lite
@pytest.mark.parametrize("fn,x,want", GOLDEN[:4], ids=IDS[:4])
def test_equal_elements_in_megengines_order_in_lite(fn, x, want, lite, tmp_path):
    traced = trace(symbolic=True, capture_as_const=True)(fn)
    traced(mge.tensor(x))
    path = tmp_path / "sorted.mge"
    traced.dump(path, arg_names=["x"], output_names=["i"])
    assert lite.run_model(path, {"x": x})["i"].reshape(-1).tolist() == want
    assert mge.load_graph(path).run(x=x)["i"].reshape(-1).tolist() == want


@pytest.mark.lite
def test_topk_k_beyond_a_picked_rows_length(lite, tmp_path):
    """TopK takes the whole row when k exceeds it (megdnn clamps |k|): a k recorded for a
    long picked row still runs when a later call picks fewer elements."""
    def top4(x):
        return F.topk(x[x > 0], k=4, descending=True)

    traced = trace(symbolic=True, capture_as_const=True)(top4)
    long_pick = np.array([3, 1, -1, 2, 5, 4, 6, -2], "float32")
    short_pick = np.array([3, -1, -1, -2, -5, 4, -6, -2], "float32")
    traced(mge.tensor(long_pick))
    path = tmp_path / "top4.mge"
    traced.dump(path, arg_names=["x"], output_names=["v", "i"])
    loaded = mge.load_graph(path)
    for x in (long_pick, short_pick):
        picked = x[x > 0]
        order = np.argsort(picked, kind="stable")[::-1][:4]
        values, index = (t.numpy() for t in traced(mge.tensor(x)))
        np.testing.assert_array_equal(values, picked[order])
        np.testing.assert_array_equal(index, order)
        for outs in (lite.run_model(path, {"x": x}), loaded.run(x=x)):
            np.testing.assert_array_equal(outs["v"].reshape(-1), picked[order])
            np.testing.assert_array_equal(outs["i"].reshape(-1), order)
