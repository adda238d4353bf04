"""megtrace.data.transform and samplers against golden outputs of the real MegEngine 1.13
(tests/data/make_data_transform_golden.py made tests/data/data_transform_golden.npz)."""
import importlib.util
import os

import numpy as np
import pytest

from megtrace.data import transform as T

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
GOLDEN = np.load(os.path.join(HERE, "data_transform_golden.npz"))


def _script():
    spec = importlib.util.spec_from_file_location("make_data_transform_golden",
                                                  os.path.join(HERE, "make_data_transform_golden.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OURS = _script().compute("megtrace")


@pytest.mark.parametrize("key", sorted(GOLDEN.files))
def test_matches_megengine(key):
    got, want = OURS[key], GOLDEN[key]
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    # OpenCV builds may round a bilinear/bicubic uint8 pixel differently by one.
    atol = 1 if key.split("/")[0].startswith(("resize", "random_resize", "shortest", "random_resized")) else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="order should be a sequence, but got order=3"):
        T.ToMode(order=3)
    with pytest.raises(ValueError, match="batch is invalid data type"):
        T.Normalize(order=("batch",))
    with pytest.raises(NotImplementedError, match="foo is unsupported data type"):
        T.Normalize(order=("image", "foo"))
    with pytest.raises(ValueError, match="hue value should be in"):
        T.HueTransform(0.7)
    with pytest.raises(ValueError, match="brightness value should be non-negative"):
        T.BrightnessTransform(-1)
    with pytest.raises(ValueError, match="size should be a list/tuple which contains"):
        T.Pad((1, 2, 3))
    with pytest.raises(ValueError, match="image must have 3 dims, but got 2 dims"):
        T.RandomHorizontalFlip(1.0).apply(np.zeros((4, 4), np.uint8))
    with pytest.raises(AssertionError, match="output size is bigger than image size"):
        T.CenterCrop(9).apply(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ValueError, match="Do not support shuffle"):
        T.Compose([], batch_compose=True, shuffle_indices=[(1,)])


def test_category_and_extra_fields_pass_through():
    image = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    out = T.RandomHorizontalFlip(1.0, order=("image", "image_category")).apply((image, 5, "extra"))
    np.testing.assert_array_equal(out[0], image[:, ::-1])
    assert out[1:] == (5, "extra")
