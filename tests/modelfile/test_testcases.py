"""dump(input_data=...) writes MegEngine's mgbtest0 testcases; load_graph reads them (ours
and MegEngine's) and run_testcases verifies them with TVM."""
import struct

import cv2
import numpy as np
import pytest
from conftest import rel_err
from models import ConvNet, randomize_bn

import megtrace as mge
from megtrace.jit import trace


@pytest.fixture
def traced(rng):
    net = randomize_bn(ConvNet(), rng).eval()
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True)
    f(mge.tensor(rng.uniform(size=(1, 3, 32, 32)).astype(np.float32)))
    return net, f


def test_megengine_testcase_fixture_verifies(fixtures_dir):
    loaded = mge.load_graph(fixtures_dir / "convnet_testcase.mge")
    assert len(loaded.testcases) == 1
    np.testing.assert_array_equal(loaded.testcases[0]["data"],
                                  np.load(fixtures_dir / "convnet_testcase_in.npy"))
    np.testing.assert_array_equal(loaded.testcases[0]["out:expect"],
                                  np.load(fixtures_dir / "convnet_testcase_out.npy"))
    (errors,) = loaded.run_testcases()
    assert list(errors) == ["assert_eq(out:expect,out)[168]"] and errors[list(errors)[0]] < 1e-5


def test_rand_specs_and_container_layout(traced, tmp_path):
    net, f = traced
    np.random.seed(0)
    path = tmp_path / "t.mge"
    result = f.dump(path, arg_names=["data"], output_names=["out"],
                    input_data=["#rand(0,255)", "data:#rand(-1,1,1,3,...)"], silent=True)
    assert result.inputs == ["data", "out:expect"]
    assert result.outputs == ["assert_eq(out:expect,out)"]
    raw = path.read_bytes()
    assert raw[:8] == b"mgbtest0" and struct.unpack_from("<I", raw, 8)[0] == 2
    loaded = mge.load_graph(path)
    for case in loaded.testcases:
        want = net(mge.tensor(case["data"])).numpy()
        assert rel_err(case["out:expect"], want) <= 1e-5      # TVM's answer, checked by NumPy
    assert loaded.testcases[0]["data"].max() > 2 and loaded.testcases[1]["data"].max() <= 1
    assert len(loaded.run_testcases()) == 2


def test_file_specs_repeat_transform_and_colons(traced, tmp_path, rng):
    _, f = traced
    folder = tmp_path / "a:b"                  # MegEngine cannot take paths with ':'
    folder.mkdir()
    npy = folder / "x.npy"
    np.save(npy, rng.uniform(size=(1, 3, 32, 32)).astype(np.float32))
    image = folder / "img.png"
    cv2.imwrite(str(image), (rng.uniform(size=(40, 50, 3)) * 255).astype(np.uint8))
    listfile = tmp_path / "list.txt"
    listfile.write_text(f"data:{npy}\n\n{npy}\n")
    path = tmp_path / "t.mge"
    f.dump(path, arg_names=["data"], input_data=[f"@{listfile}"], input_transform="data * 2")
    cases = mge.load_graph(path).testcases
    assert len(cases) == 2
    np.testing.assert_allclose(cases[0]["data"], np.load(npy) * 2)
    f.dump(path, arg_names=["data"], input_data=[str(image)], resize_input=True)
    (case,) = mge.load_graph(path).testcases
    want = cv2.resize(cv2.imread(str(image)), (32, 32)).transpose(2, 0, 1)[None]
    np.testing.assert_array_equal(case["data"], want.astype(np.float32))
    f.dump(path, arg_names=["data"], input_data=[str(npy)], repeat=2, no_assert=True)
    loaded = mge.load_graph(path)
    assert set(loaded.testcases[0]) == {"data"} and loaded.testcases[0]["data"].shape[0] == 2
    assert loaded.run_testcases() == [{}]


def test_wrong_expectation_fails_verification(traced, tmp_path):
    _, f = traced
    path = tmp_path / "t.mge"
    f.dump(path, arg_names=["data"], output_names=["out"], input_data=["#rand(0,1)"],
           maxerr=1e-4)
    loaded = mge.load_graph(path)
    loaded.testcases[0]["out:expect"] = loaded.testcases[0]["out:expect"] + 1.0
    with pytest.raises(AssertionError, match="exceeds maxerr"):
        loaded.run_testcases()


def test_bad_specs_are_clear(traced, tmp_path):
    _, f = traced
    with pytest.raises(ValueError, match="bad spec"):
        f.dump(tmp_path / "x.mge", input_data=["#random(0,1)"])
    with pytest.raises(ValueError, match="resize_input"):
        f.dump(tmp_path / "x.mge", input_data=["#rand(0,1)"], resize_input=True)
    assert not (tmp_path / "x.mge").exists()


@pytest.mark.lite
def test_main_model_of_container_runs_in_lite(traced, lite, tmp_path, rng):
    net, f = traced
    path = tmp_path / "t.mge"
    f.dump(path, arg_names=["data"], output_names=["out"], input_data=["#rand(0,1)"])
    raw = path.read_bytes()
    size = struct.unpack_from("<I", raw, 12)[0]
    model = tmp_path / "model.mge"
    model.write_bytes(raw[12:16 + size])
    case = mge.load_graph(path).testcases[0]
    outs = lite.run_model(model, case)
    (value,) = outs.values()
    assert rel_err(value, case["out:expect"]) <= 1e-4


def test_scalar_argument_takes_one_element_testcases(tmp_path):
    """MegEngine dumps a scalar argument as a (1,) input, so "#rand(0,255,1)" fits it."""
    f = trace(lambda x: mge.functional.exp(x), symbolic=True, capture_as_const=True)
    f(mge.tensor(1.0))
    path = tmp_path / "s.mge"
    f.dump(path, input_data=["#rand(0, 5, 1)"], silent=True)
    (case,) = mge.load_graph(path).testcases
    assert case["arg_0"].size == 1
    np.testing.assert_allclose(case["output_0:expect"].reshape(-1),
                               np.exp(case["arg_0"].reshape(-1)), rtol=1e-5)
    with pytest.raises(ValueError, match=r"input/data shapes mismatch: \(1,\) vs \(1, 2\)"):
        f.dump(tmp_path / "bad.mge", input_data=["#rand(0, 5, 1, 2)"])
