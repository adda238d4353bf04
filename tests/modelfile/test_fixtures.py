"""Files written by the real MegEngine 1.13 load in megtrace and reproduce its outputs."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge

CASES = [(m, v) for m in ("mlp", "convnet") for v in ("plain", "opt", "fuse", "fbs1")]


@pytest.mark.parametrize("model,variant", CASES, ids=[f"{m}_{v}" for m, v in CASES])
def test_fixture_reproduces_megengine(model, variant, fixtures_dir):
    loaded = mge.load_graph(fixtures_dir / f"{model}_{variant}.mge")
    assert [i.name for i in loaded.inputs] == ["data"]
    assert loaded.output_names == ["out"]
    for batch in ("b1", "b8"):
        x = np.load(fixtures_dir / f"{model}_in_{batch}.npy")
        want = np.load(fixtures_dir / f"{model}_out_{batch}.npy")
        got = loaded.run(data=x)["out"]
        assert rel_err(got, want) <= 1e-5, (model, variant, batch)


def test_fixture_metadata_is_not_unpickled_on_load(fixtures_dir):
    loaded = mge.load_graph(fixtures_dir / "mlp_plain.mge")
    assert loaded.metadata.is_valid
    assert loaded.metadata.user_info_bytes == b"\x80\x04N."   # pickle of None, left as bytes
    assert loaded.metadata.user_info() is None


def test_plain_convnet_keeps_megengine_structure(fixtures_dir):
    from megtrace.fbs.reader import read_model
    model = read_model((fixtures_dir / "convnet_plain.mge").read_bytes())
    types = [o.type for o in model.oprs]
    assert types.count("BatchNormV1") == 2 and "GetVarShapeV1" in types
    conv = next(o for o in model.oprs if o.type == "Convolution")
    assert [t for t, _ in conv.params] == ["Convolution", "ExecutionPolicy"]
    assert conv.params[0][1]["pad_h"] == 1 and conv.params[0][1]["sparse"] == "DENSE"


def test_mobilenetv2_fixture(fixtures_dir):
    loaded = mge.load_graph(fixtures_dir / "mobilenetv2_fuse.mge")
    x = np.load(fixtures_dir / "mobilenetv2_in_b1.npy")
    want = np.load(fixtures_dir / "mobilenetv2_out_b1.npy")
    assert rel_err(loaded.run(data=x)["out"], want) <= 1e-5
