"""Files that MegEngine Lite's loader must accept: oprs whose `make` collapses to an
existing var are never written, and our reader refuses them as Lite does."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.fbs.reader import read_model
from megtrace.fbs.to_graph import build_graph, find_collapses
from megtrace.fbs.writer import DumpOptions, emit_graph, serialize
from megtrace.errors import FormatError
from megtrace.jit import trace

pytestmark = pytest.mark.lite


class _ClsToken(M.Module):
    """A ViT's class token: a constant broadcast and concatenated to the patches."""

    def __init__(self):
        super().__init__()
        self.cls = mge.Parameter(np.random.rand(1, 1, 8).astype(np.float32))
        self.proj = M.Linear(8, 8)

    def forward(self, x):
        token = F.broadcast_to(self.cls, (x.shape[0], 1, 8))
        return self.proj(F.concat([token, x], axis=1))


CASES = {
    "concat": (lambda: lambda x: F.concat([F.relu(x), x * 2], axis=1), (2, 3, 4, 4), {}),
    "concat-of-constant": (_ClsToken, (2, 3, 8), {}),
    "reshape-to-static-shape": (lambda: lambda x: (x.reshape(6, 4) * 2).reshape(6, 4), (24,),
                                {"optimize_for_inference": False}),
    "concat-of-one": (lambda: lambda x: F.concat([x], axis=0) + 1, (2, 3),
                      {"optimize_for_inference": False}),
    "transpose-batched-matmul": (lambda: lambda x: F.matmul(x, x.transpose(0, 2, 1)).reshape(
        2, 3, 3), (2, 3, 4), {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_dumps_load_and_run_in_lite(case, lite, rng, tmp_path):
    make, shape, options = CASES[case]
    fn = make()
    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    traced = trace(fn, symbolic=True, capture_as_const=True)
    traced(mge.tensor(x))
    path = tmp_path / "model.mge"
    traced.dump(path, arg_names=["x"], output_names=["y"], **options)
    model = read_model(path.read_bytes())
    assert find_collapses(model) == []
    got = lite.run_model(path, {"x": x})["y"]
    assert rel_err(got, fn(mge.tensor(x)).numpy()) <= 1e-5


def _collapsing_file(tmp_path):
    """reshape(6, 4) of a var whose shape is statically (6, 4), written without the
    writer's clean-up: what megtrace wrote before."""
    fn = lambda x: (x.reshape(6, 4) * 2).reshape(6, 4)  # noqa: E731
    traced = trace(fn, symbolic=True, capture_as_const=True)
    traced(mge.tensor(np.zeros(24, np.float32)))
    em, outs = emit_graph(traced.graph, ["x"], ["y"])
    path = tmp_path / "collapsing.mge"
    path.write_bytes(serialize(em, outs, DumpOptions())[0])
    return path


def test_reader_refuses_what_lite_refuses(lite, tmp_path):
    path = _collapsing_file(tmp_path)
    with pytest.raises(FormatError, match="got_type=Elemwise expected_type=Reshape"):
        build_graph(read_model(path.read_bytes()))
    with pytest.raises(RuntimeError, match="got_type=Elemwise expected_type=Reshape"):
        lite.run_model(path, {"x": np.zeros(24, np.float32)})


@pytest.mark.parametrize("no_change_graph,modes", [(True, ["CLIP"]), (False, ["MAX_", "MIN_"])])
def test_clip_is_one_clip_unless_compat_rewrites_it(no_change_graph, modes, lite, rng, tmp_path):
    """MegEngine keeps Elemwise CLIP with no_change_graph=True; its compatibility rewrite
    (the default) spells it with older modes."""
    fn = lambda x: F.clip(x, -0.5, 0.7)  # noqa: E731
    x = rng.standard_normal((2, 3)).astype(np.float32)
    traced = trace(fn, symbolic=True, capture_as_const=True)
    traced(mge.tensor(x))
    path = tmp_path / "clip.mge"
    traced.dump(path, arg_names=["x"], output_names=["y"], no_change_graph=no_change_graph)
    written = [o.params[0][1]["mode"] for o in read_model(path.read_bytes()).oprs
               if o.type == "Elemwise"]
    assert written == modes
    assert rel_err(lite.run_model(path, {"x": x})["y"], np.clip(x, -0.5, 0.7)) <= 1e-6
