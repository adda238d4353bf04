"""BatchNorm in training mode against real MegEngine 1.13: outputs from batch statistics,
running_mean/running_var updated in place (momentum weighs the OLD value; the variance
is the unbiased one), freeze, untracked statistics, eval afterwards (golden data from
tests/data/make_megengine_batchnorm_training.py)."""
import numpy as np
import pytest
from conftest import TESTS, rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from data.make_megengine_batchnorm_training import CASES

GOLDEN = np.load(TESTS / "data" / "megengine_batchnorm_training.npz")


def close(got, want, tol):
    """rel_err within tol, NaN exactly where MegEngine has NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    return not finite.any() or rel_err(got[finite], want[finite]) <= tol


@pytest.mark.parametrize("case,cls,kwargs,shape", CASES, ids=[c[0] for c in CASES])
def test_training_forward_matches_megengine(case, cls, kwargs, shape):
    bn = getattr(M, cls)(shape[1], **kwargs)
    if bn.affine:
        bn.weight[...] = mge.tensor(GOLDEN[f"{case}/weight"])
        bn.bias[...] = mge.tensor(GOLDEN[f"{case}/bias"])
    if bn.freeze:
        bn.running_mean[...] = mge.tensor(GOLDEN[f"{case}/init_mean"])
        bn.running_var[...] = mge.tensor(GOLDEN[f"{case}/init_var"])
    stats = (bn.running_mean, bn.running_var)
    bn.train()
    for step in range(3):
        y = bn(mge.tensor(GOLDEN[f"{case}/x{step}"]))
        assert close(y.numpy(), GOLDEN[f"{case}/y{step}"], 1e-5), step
        if bn.running_mean is not None:
            assert close(bn.running_mean.numpy(), GOLDEN[f"{case}/mean{step}"], 1e-6)
            assert close(bn.running_var.numpy(), GOLDEN[f"{case}/var{step}"], 1e-6)
    assert (bn.running_mean, bn.running_var) == stats or stats == (None, None)
    bn.eval()
    y = bn(mge.tensor(GOLDEN[f"{case}/x_eval"]))
    assert close(y.numpy(), GOLDEN[f"{case}/y_eval"], 1e-5)


def test_functional_training_not_inplace_matches_megengine():
    mean, var = mge.tensor(GOLDEN["functional/mean"]), mge.tensor(GOLDEN["functional/var"])
    y, new_mean, new_var = F.batch_norm(mge.tensor(GOLDEN["functional/x"]), mean, var,
                                        training=True, momentum=0.6, inplace=False)
    assert rel_err(y.numpy(), GOLDEN["functional/y"]) <= 1e-5
    assert rel_err(new_mean.numpy(), GOLDEN["functional/new_mean"]) <= 1e-6
    assert rel_err(new_var.numpy(), GOLDEN["functional/new_var"]) <= 1e-6
    assert np.array_equal(mean.numpy(), GOLDEN["functional/mean"])     # inputs untouched
    assert np.array_equal(var.numpy(), GOLDEN["functional/var"])


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_sync_batch_norm_eps_max_matches_megengine(training):
    key = f"sync_max_{'train' if training else 'eval'}"
    mean, var = mge.tensor(GOLDEN[f"{key}/mean"]), mge.tensor(GOLDEN[f"{key}/var"])
    y = F.sync_batch_norm(mge.tensor(GOLDEN[f"{key}/x"]), mean, var,
                          mge.tensor(GOLDEN[f"{key}/w"]), mge.tensor(GOLDEN[f"{key}/b"]),
                          training=training, momentum=0.8, eps=1e-2, eps_mode="max")
    assert close(y.numpy(), GOLDEN[f"{key}/y"], 1e-5)
    assert close(mean.numpy(), GOLDEN[f"{key}/new_mean"], 1e-6)
    assert close(var.numpy(), GOLDEN[f"{key}/new_var"], 1e-6)


def test_sync_batch_norm_errors():
    x = mge.tensor(np.ones((2, 3, 4), np.float32))
    with pytest.raises(AssertionError, match="unknown eps_mode: mul"):
        F.sync_batch_norm(x, None, None, eps_mode="mul")
    with pytest.raises(NotImplementedError, match="sync_batch_norm for ndim != 4"):
        F.sync_batch_norm(x, None, None, training=True, eps_mode="max")
    with pytest.raises(ValueError, match=r"expected 2D, 3D or 4D input \(got 5D input\)"):
        M.SyncBatchNorm(3)(mge.tensor(np.ones((1, 3, 1, 1, 1), np.float32)))


def test_frozen_batchnorm_gives_weight_and_bias_no_gradient():
    """freeze=True normalizes with the running statistics and detaches weight and bias
    (MegEngine): a GradManager step leaves them as they were, the input still gets its
    gradient, scale / sqrt(running_var + eps)."""
    from megtrace.autodiff import GradManager
    bn = M.BatchNorm2d(3, freeze=True)
    bn.train()
    bn.running_var[...] = np.full((1, 3, 1, 1), 4.0, np.float32)
    x = mge.tensor(np.random.RandomState(0).rand(2, 3, 2, 2).astype("float32"))
    gm = GradManager().attach([*bn.parameters(), x])
    with gm:
        gm.backward(bn(x).sum())
    assert bn.weight.grad is None and bn.bias.grad is None
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 1 / np.sqrt(4.0 + 1e-5)),
                               rtol=1e-6)


def test_dump_refuses_batchnorm_in_training_mode(tmp_path):
    """A dumped graph cannot update running statistics: MegEngine's dump fails with a
    GraphError (a RuntimeError); megtrace refuses the same way and writes nothing. The
    same module in eval mode dumps."""
    from megtrace.jit import trace
    bn = M.BatchNorm2d(4)
    data = mge.tensor(np.random.RandomState(1).rand(2, 4, 3, 3).astype("float32"))

    @trace(symbolic=True, capture_as_const=True)
    def step(x):
        return bn(x).sum()

    bn.train()
    step(data)
    with pytest.raises(RuntimeError, match="training mode BatchNorm"):
        step.dump(str(tmp_path / "train.mge"))
    assert not (tmp_path / "train.mge").exists()

    bn.eval()

    @trace(symbolic=True, capture_as_const=True)
    def infer(x):
        return bn(x).sum()

    infer(data)
    infer.dump(str(tmp_path / "eval.mge"))
    assert (tmp_path / "eval.mge").stat().st_size > 0
