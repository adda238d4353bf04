"""Errors that blame the caller's input, not the model, when the input is what is wrong."""
import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.errors import FormatError, ShapeError
from megtrace.jit import trace


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory):
    conv = M.Conv2d(3, 4, 3, padding=1)
    f = trace(lambda x: F.relu(conv(x)), symbolic=True, capture_as_const=True)
    f(mge.tensor(np.ones((1, 3, 8, 8), np.float32)))
    path = tmp_path_factory.mktemp("m") / "conv.mge"
    f.dump(path, arg_names=["data"], output_names=["out"])
    return mge.load_graph(path)


def test_a_wrong_channel_count_names_the_input(conv_model):
    with pytest.raises(ShapeError) as info:
        conv_model.run(data=np.ones((1, 5, 8, 8), np.float32))
    msg = str(info.value)
    assert not isinstance(info.value, FormatError)
    assert "'data': (1, 5, 8, 8)" in msg and "(1, 3, 8, 8)" in msg and "channels" in msg


def test_another_batch_and_image_size_still_run(conv_model):
    out = conv_model.run(data=np.ones((2, 3, 6, 6), np.float32))["out"]
    assert out.shape == (2, 4, 6, 6)


def test_an_input_given_twice_is_refused(conv_model):
    x = np.ones((1, 3, 8, 8), np.float32)
    with pytest.raises(ValueError, match="both by position and by name"):
        conv_model.run(x, data=x)
