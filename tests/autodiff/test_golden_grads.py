"""One training step's gradients of small models equal the real MegEngine 1.13's
(tests/data/make_megengine_autodiff_grads.py made them from the same model code)."""
import importlib.util

import numpy as np
import pytest
from conftest import TESTS, rel_err

import megtrace

_spec = importlib.util.spec_from_file_location("autodiff_models",
                                               TESTS / "data" / "autodiff_models.py")
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)
GOLDEN = np.load(TESTS / "data" / "megengine_autodiff_grads.npz")


@pytest.mark.parametrize("name", ["mlp", "transformer", "cnn"])
def test_gradients_match_megengine(name):
    loss, grads = models.gradients(megtrace, name)
    assert rel_err(loss, GOLDEN[f"{name}/loss"]) <= 1e-5
    want = {k.split("/", 1)[1] for k in GOLDEN.files if k.startswith(name + "/")} - {"loss"}
    assert set(grads) == want
    for key, g in grads.items():
        golden = GOLDEN[f"{name}/{key}"]
        # a bias feeding BatchNorm (cnn's conv1.bias) has an exactly-zero gradient: both
        # sides hold rounding noise there, compared absolutely
        assert rel_err(g, golden) <= 1e-5 or np.abs(g - golden).max() <= 1e-7, key
