"""Training-API behaviours real MegEngine 1.13 shows (tests/data/show_megengine_training_facts.py
prints them there; its docstring holds the output): autocast's batch_norm dtype, an NHWC copy
of a tensor, load_state_dict's dtypes and strict=False warnings, backward on a number."""
import logging

import numpy as np
import pytest

import megtrace as mge
import megtrace.autodiff as ad
import megtrace.functional as F
import megtrace.module as M
from megtrace.amp import autocast


def _x():
    return mge.tensor(np.arange(32, dtype="float32").reshape(2, 4, 2, 2) / 10)


def test_batch_norm_under_autocast_is_float16_without_parameters():
    x = _x()
    with autocast():
        outs = [F.batch_norm(x, training=True),
                M.BatchNorm2d(4, affine=False, track_running_stats=False)(x),
                M.BatchNorm2d(4, affine=False)(x),
                F.batch_norm(x.astype("float16"), training=True)]
    assert [o.dtype for o in outs] == [np.float16] * 4
    v = x.numpy()
    ref = (v - v.mean((0, 2, 3), keepdims=True)) / np.sqrt(v.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(outs[0].numpy().astype(np.float32), ref, atol=2e-3)
    np.testing.assert_allclose(outs[0].numpy().ravel()[:4], [-1.176, -1.053, -0.929, -0.805],
                               atol=1e-3)


def test_convert_tensor_format_copy():
    x = _x()
    y = mge.amp.convert_tensor_format(x, inplace=False)
    assert (y.format, x.format, y.shape) == ("nhwc", "default", (2, 4, 2, 2))
    np.testing.assert_array_equal(y.numpy(), x.numpy())


def test_load_state_dict_takes_the_arrays_dtype():
    lin = M.Linear(2, 1)
    lin.load_state_dict({"weight": np.array([[1, 2]], "int32"), "bias": np.zeros(1, "float32")})
    assert (lin.weight.dtype, lin.bias.dtype) == (np.int32, np.float32)
    np.testing.assert_array_equal(lin.weight.numpy(), [[1, 2]])
    lin.load_state_dict({"weight": np.array([[1, 2]], "float32"), "bias": np.zeros(1, "float16")})
    assert (lin.weight.dtype, lin.bias.dtype) == (np.float32, np.float16)


def test_load_state_dict_not_strict_warns(caplog):
    lin = M.Linear(2, 1)
    logger = logging.getLogger("megtrace.module.module")
    logger.addHandler(caplog.handler)
    try:
        lin.load_state_dict({"weight": np.ones((1, 2), "float32")}, strict=False)
        lin.load_state_dict({"weight": np.ones((1, 2), "float32"), "bias": np.zeros(1, "float32"),
                             "extra": np.zeros(1, "float32")}, strict=False)
    finally:
        logger.removeHandler(caplog.handler)
    assert [r.getMessage() for r in caplog.records] == [
        "Missing params in `strict=False` mode, missing={'bias'}",
        "Unused params in `strict=False` mode, unused={'extra'}"]


def test_backward_on_a_number_raises_and_ends_the_recording():
    w = mge.Parameter(np.ones(3, "float32"))
    gm = ad.GradManager().attach([w])
    with pytest.raises(TypeError, match="py_apply expects tensor"):
        with gm:
            (w * 2).sum()
            gm.backward(3.0)
    assert not gm._recording
    assert w.grad is None
