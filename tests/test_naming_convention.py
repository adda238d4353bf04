"""One naming convention across trace, dump, load_graph and export, and `graph` showing
the traced shape that `dump` writes."""
import json

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.jit import trace


def _traced():
    f = trace(lambda x: F.relu(x) * 2, symbolic=True, capture_as_const=True)
    f(mge.tensor(np.ones((1, 3), "float32")))
    f(mge.tensor(np.ones((4, 3), "float32")))          # a second traced shape
    return f


def test_graph_shows_the_shape_dump_writes(tmp_path):
    f = _traced()
    assert f.graph.inputs[0].type.shape == (1, 3)
    f.dump(tmp_path / "m.mge")
    model = mge.load_graph(tmp_path / "m.mge")
    assert [(i.name, tuple(i.shape)) for i in model.inputs] == [("arg_0", (1, 3))]
    assert model.output_names == ["output_0"] == f.graph.output_names


def test_export_and_dump_share_defaults_and_arg_names(tmp_path):
    f = _traced()
    f.dump(tmp_path / "m.mge", arg_names=["data"], output_names=["out"])
    done = mge.export(f, tmp_path / "m.so", arg_names=["data"], output_names=["out"])
    manifest = json.loads(done.manifest.read_text())
    assert [i["name"] for i in manifest["inputs"]] == [i.name for i in
                                                       mge.load_graph(tmp_path / "m.mge").inputs]
    assert [o["name"] for o in manifest["outputs"]] == ["out"]
    x = np.full((1, 3), -1.5, "float32")
    assert np.array_equal(mge.load_exported(done.library).run(data=x)["out"],
                          np.zeros((1, 3), "float32"))
    plain = mge.export(f, tmp_path / "p.so")
    assert [i["name"] for i in json.loads(plain.manifest.read_text())["inputs"]] == ["arg_0"]
    with pytest.raises(ValueError, match="arg_names: expected 1 names, got 2"):
        mge.export(f, tmp_path / "q.so", arg_names=["a", "b"])
