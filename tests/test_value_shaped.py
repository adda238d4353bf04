"""Value-dependent shapes inside a trace: F.cond_take and boolean-mask indexing with a
mask the traced graph computes. The graph runs on the NumPy interpreter (compiled graphs
have static shapes), gives NumPy's results for every new mask, and dumps as MegEngine
dumps it (CondTake, IndexingSetMultiAxisVec), which the real Lite runtime runs."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _pick_full(x, m):
    return x[m]


def _pick_leading(x, m):
    return x[m]


def _pick_middle(x, m):
    return x[:, m]


def _pick_last(x, m):
    return x[..., m]


def _set_from_pick(x, m):
    y = x * 1
    y[m] = x[m] * 3
    return y


CASES = [(_pick_full, (2, 3, 4), (2, 3, 4)), (_pick_leading, (2, 3, 4), (2, 3)),
         (_pick_leading, (2, 3, 4), (2,)), (_pick_middle, (2, 3, 4), (3, 4)),
         (_pick_last, (2, 3, 4), (4,)), (_set_from_pick, (2, 3, 4), (2, 3, 4)),
         (_set_from_pick, (2, 3, 4), (2, 3))]


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("fn,x_shape,mask_shape", CASES,
                         ids=[f"{c[0].__name__}-{len(c[2])}d" for c in CASES])
def test_mask_indexing_follows_each_calls_mask(fn, x_shape, mask_shape, symbolic, rng):
    traced = trace(symbolic=symbolic)(lambda x, v: fn(x, v > 0))
    for _ in range(3):                  # a new mask, so a new result size, every call
        x = rng.standard_normal(x_shape).astype(np.float32)
        v = rng.standard_normal(mask_shape).astype(np.float32)
        want = fn(x.copy(), v > 0)
        got = traced(mge.tensor(x), mge.tensor(v)).numpy()
        assert got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("symbolic", [False, True])
def test_cond_take_traced_with_changing_masks_and_shapes(symbolic, rng):
    @trace(symbolic=symbolic)
    def take(x):
        values, index = F.cond_take(x > 0, x)
        return values * 2, index
    for shape in [(3, 3, 3), (3, 3, 3), (0,), (3, 0, 3)]:
        x = rng.standard_normal(shape).astype(np.float32)
        values, index = take(mge.tensor(x))
        assert np.array_equal(values.numpy(), x[x > 0] * 2)
        assert np.array_equal(index.numpy(), np.flatnonzero(x > 0))
        assert index.dtype == np.int32


def test_cond_take_checks_its_operands():
    x = mge.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="^mask must be bool$"):
        F.cond_take(x, x)
    with pytest.raises(TypeError, match="^mask must be a tensor$"):
        F.cond_take(np.ones((2, 3), bool), x)
    with pytest.raises(ValueError, match="differs from input shape"):
        F.cond_take(mge.tensor(np.ones((3, 2), bool)), x)


def _ops_of(path):
    from megtrace.fbs.reader import read_model
    model = read_model(path.read_bytes())
    return [o.type for o in model.oprs]


@pytest.mark.lite
@pytest.mark.parametrize("optimize", [False, True])
def test_mask_dumps_run_in_megengine_lite(optimize, lite, rng, tmp_path):
    def pick(x):
        return x[x.sum(axis=2) > 0] * 2

    def take(x):
        return F.cond_take(x > 0, x)

    for fn, names in ((pick, ["y"]), (take, ["v", "i"]), (_set_from_pick_traced, ["y"])):
        traced = trace(symbolic=True, capture_as_const=True)(fn)
        traced(mge.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32)))
        path = tmp_path / f"{fn.__name__}.mge"
        traced.dump(path, arg_names=["x"], output_names=names,
                    optimize_for_inference=optimize)
        assert "CondTake" in _ops_of(path)
        for _ in range(2):           # the file is not tied to the traced mask
            x = rng.standard_normal((2, 3, 4)).astype(np.float32)
            want = fn(mge.tensor(x))
            want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
            outs = lite.run_model(path, {"x": x})
            loaded = mge.load_graph(path)(x=x)
            loaded = loaded if isinstance(loaded, list) else [loaded]
            for name, w, ours in zip(names, want, loaded):
                assert np.array_equal(outs[name], w)
                assert np.array_equal(np.asarray(ours.numpy()), w)


def _set_from_pick_traced(x):
    return _set_from_pick(x, x > 0)


@pytest.mark.lite
def test_picked_rows_combined_after_the_pick_dump_with_default_options(lite, rng, tmp_path):
    """A detector's proposal filter (boxes[keep], scores[keep], concatenated): the nodes
    after a value-shaped pick stay out of TVM's passes in the default (optimized) dump, so
    the file neither fails to write nor keeps the traced count."""
    def rois(boxes, scores):
        keep = scores > 0.5
        picked = F.concat([boxes[keep], scores[keep].reshape(-1, 1)], axis=1)
        return picked * 2 + 1

    def numpy_rois(boxes, scores):
        keep = scores > 0.5
        return np.concatenate([boxes[keep], scores[keep][:, None]], axis=1) * 2 + 1

    def inputs():
        return {"boxes": rng.uniform(size=(20, 4)).astype(np.float32),
                "scores": rng.uniform(size=(20,)).astype(np.float32)}

    traced = trace(symbolic=True, capture_as_const=True)(rois)
    first = inputs()
    traced(*map(mge.tensor, first.values()))
    path = tmp_path / "rois.mge"
    traced.dump(path, arg_names=list(first), output_names=["rois"])
    counts = set()
    for feeds in (first, inputs(), inputs()):
        want = numpy_rois(**feeds)
        counts.add(want.shape[0])
        np.testing.assert_allclose(lite.run_model(path, feeds)["rois"], want, rtol=1e-6)
        np.testing.assert_allclose(mge.load_graph(path)(**feeds).numpy(), want, rtol=1e-6)
    assert len(counts) > 1


@pytest.mark.lite
def test_shape_read_from_a_pick_follows_each_call(lite, rng, tmp_path):
    """A shape read from a picked result (Faster R-CNN's F.full((rois.shape[0], 1), bid)
    beside rois): the traced graph's shape arithmetic runs at each call, in megtrace's
    replay, in the dump MegEngine Lite runs and in that dump loaded by megtrace."""
    def tagged(x):
        picked = x[x > 0]
        tag = F.full((picked.shape[0], 1), 7)
        return F.concat([tag, picked.reshape(-1, 1)], axis=1)

    def numpy_tagged(x):
        picked = x[x > 0]
        return np.concatenate([np.full((picked.size, 1), 7, np.float32), picked[:, None]], 1)

    traced = trace(symbolic=True, capture_as_const=True)(tagged)
    first = rng.standard_normal(24).astype(np.float32)
    traced(mge.tensor(first))
    path = tmp_path / "tagged.mge"
    traced.dump(path, arg_names=["x"], output_names=["y"])
    loaded = mge.load_graph(path)
    counts = set()
    for x in (first, *(rng.standard_normal(24).astype(np.float32) for _ in range(3))):
        want = numpy_tagged(x)
        counts.add(want.shape[0])
        np.testing.assert_array_equal(traced(mge.tensor(x)).numpy(), want)
        np.testing.assert_array_equal(lite.run_model(path, {"x": x})["y"], want)
        np.testing.assert_array_equal(loaded(x=x).numpy(), want)
    assert len(counts) > 1


@pytest.mark.lite
def test_slice_bounds_read_from_a_pick_follow_each_call(lite, rng, tmp_path):
    """Slice bounds computed from a picked result's size (`x[:y.shape[0]]`,
    `x[y.shape[0] - 1]`) follow each call in megtrace's replay, in Lite and in megtrace's
    load_graph of the dump."""
    def head(x):
        picked = x[x > 0]
        return x[:picked.shape[0]] * 2, x[picked.shape[0] - 1]

    traced = trace(symbolic=True, capture_as_const=True)(head)
    first = rng.standard_normal(24).astype(np.float32)
    traced(mge.tensor(first))
    path = tmp_path / "head.mge"
    traced.dump(path, arg_names=["x"], output_names=["h", "last"])
    loaded = mge.load_graph(path)
    counts = set()
    for x in (first, *(rng.standard_normal(24).astype(np.float32) for _ in range(3))):
        n = int((x > 0).sum())
        counts.add(n)
        want = [x[:n] * 2, x[n - 1]]
        got = [t.numpy() for t in traced(mge.tensor(x))]
        outs = lite.run_model(path, {"x": x})
        ours = loaded.run(x=x)
        for g, name, w in zip(got, ["h", "last"], want):
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(outs[name].reshape(np.shape(w)), w)
            np.testing.assert_array_equal(ours[name].reshape(np.shape(w)), w)
    assert len(counts) > 1


def test_value_shaped_model_loaded_keeps_the_value_size_limit(rng, tmp_path, monkeypatch):
    """A loaded model with CondTake runs opr by opr on each call's values; every value is
    still checked against MEGTRACE_MAX_VALUE_BYTES before it is allocated."""
    def grow(x):
        picked = x[x > 0]
        return F.broadcast_to(picked.reshape(1, -1), (64, picked.shape[0]))

    traced = trace(symbolic=True, capture_as_const=True)(grow)
    x = rng.standard_normal(32).astype(np.float32)
    traced(mge.tensor(x))
    path = tmp_path / "grow.mge"
    traced.dump(path, arg_names=["x"], output_names=["y"])
    loaded = mge.load_graph(path)
    assert loaded.value_shaped_oprs == ["CondTake"]
    want = np.broadcast_to(x[x > 0], (64, int((x > 0).sum())))
    np.testing.assert_array_equal(loaded(x=x).numpy(), want)
    monkeypatch.setenv("MEGTRACE_MAX_VALUE_BYTES", "1024")
    with pytest.raises(mge.errors.UnsupportedModelError, match="MEGTRACE_MAX_VALUE_BYTES"):
        loaded(x=x)
