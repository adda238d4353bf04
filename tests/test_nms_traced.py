"""F.vision.nms inside a trace (a detector's inference: Faster R-CNN's RPN, the
batched_nms of MegEngine's Models): the kept count depends on the scores, so the traced
graph, its default dump in the real MegEngine Lite and the dump read back must follow each
call's boxes, not the traced ones. Reference: greedy suppression in NumPy."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _numpy_nms(boxes, scores, thresh, max_output):
    order = np.argsort(-scores, kind="stable")
    kept = []
    for i in order:
        b = boxes[i]
        ok = True
        for j in kept:
            c = boxes[j]
            w = max(min(b[2], c[2]) - max(b[0], c[0]), 0)
            h = max(min(b[3], c[3]) - max(b[1], c[1]), 0)
            inter = w * h
            union = (b[2] - b[0]) * (b[3] - b[1]) + (c[2] - c[0]) * (c[3] - c[1]) - inter
            if inter > union * thresh:
                ok = False
                break
        if ok:
            kept.append(i)
        if len(kept) == max_output:
            break
    return np.array(kept, np.int32)


def _boxes(rng, n=24):
    xy = rng.uniform(0, 16, (n, 2))
    wh = rng.uniform(4, 12, (n, 2))
    return {"boxes": np.concatenate([xy, xy + wh], 1).astype(np.float32),
            "scores": rng.permutation(n).astype(np.float32) / n}


def _detect(boxes, scores):
    keep = F.vision.nms(boxes, scores, iou_thresh=0.4, max_output=20)
    return keep, boxes[keep] * 2


@pytest.mark.lite
def test_traced_nms_follows_each_calls_boxes_in_trace_lite_and_load_graph(lite, rng,
                                                                          tmp_path):
    traced = trace(symbolic=True, capture_as_const=True)(_detect)
    first = _boxes(rng)
    traced(*map(mge.tensor, first.values()))
    path = tmp_path / "nms.mge"
    traced.dump(path, arg_names=list(first), output_names=["keep", "kept_boxes"])
    counts = set()
    for feeds in (first, _boxes(rng), _boxes(rng), _boxes(rng)):
        keep = _numpy_nms(feeds["boxes"], feeds["scores"], 0.4, 20)
        counts.add(len(keep))
        want = [keep, feeds["boxes"][keep] * 2]
        got_trace = [t.numpy() for t in traced(*map(mge.tensor, feeds.values()))]
        got_lite = lite.run_model(path, feeds)
        got_loaded = [t.numpy() for t in mge.load_graph(path)(**feeds)]
        for i, name in enumerate(["keep", "kept_boxes"]):
            np.testing.assert_array_equal(got_trace[i], want[i])
            np.testing.assert_array_equal(got_lite[name], want[i])
            np.testing.assert_array_equal(got_loaded[i], want[i])
    assert len(counts) > 1 and max(counts) < 20      # the count changed, under the cap
