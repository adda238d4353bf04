"""End-to-end training against real MegEngine 1.13: GradManager + SGD(momentum) /
Adam / AdamW for 100 steps on an MLP, a small CNN (conv, BatchNorm in training mode, max
pool, linear, cross-entropy) and a transformer encoder block (multi-head self-attention
with batched matmul and softmax, LayerNorm, GELU MLP, residuals); every step's loss and
the final weights and BatchNorm statistics within 1e-4 of MegEngine's
(tests/data/make_megengine_training.py, models and data in tests/data/training_cases.py);
eager, and most runs traced too."""
import numpy as np
import pytest
from conftest import TESTS, rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
import megtrace.optimizer as optim
from data.training_cases import RUNS, STEPS, build, data, initial_state
from megtrace.autodiff import GradManager
from megtrace.jit import trace

GOLDEN = np.load(TESTS / "data" / "megengine_training.npz")


def train(kind, opt_name, kwargs, symbolic=None):
    """100 steps; eager, or each step one `trace(symbolic=...)` call. The losses and the
    final state dict."""
    net = build(kind, M, F)
    net.load_state_dict(initial_state(kind, net), strict=False)
    net.train()
    params = list(net.parameters())
    gm = GradManager().attach(params)
    opt = getattr(optim, opt_name)(params, **kwargs)

    def step(x, label):
        with gm:
            loss = F.nn.cross_entropy(net(x), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss
    if symbolic is not None:
        step = trace(step, symbolic=symbolic)
    batches = data(kind)
    losses = []
    for i in range(STEPS):
        x, label = batches[i % len(batches)]
        losses.append(float(step(mge.tensor(x), mge.tensor(label))))
    assert all(a is b for a, b in zip(net.parameters(), params))     # updated in place
    return losses, net.state_dict()


def check(case, losses, final):
    assert rel_err(losses, GOLDEN[f"{case}/losses"]) <= 1e-4
    names = {k.split("/", 2)[2] for k in GOLDEN.files if k.startswith(f"{case}/final/")}
    assert set(final) == names
    for name, value in final.items():
        assert rel_err(np.asarray(value), GOLDEN[f"{case}/final/{name}"]) <= 1e-4, name


@pytest.mark.parametrize("case,kind,opt_name,kwargs", RUNS, ids=[r[0] for r in RUNS])
def test_training_matches_megengine(case, kind, opt_name, kwargs):
    check(case, *train(kind, opt_name, kwargs))


@pytest.mark.parametrize("case,symbolic", [
    ("mlp_adam", False), ("cnn_sgd", True),
    ("transformer_adam", True), ("transformer_adamw", False), ("transformer_sgd", True)])
def test_traced_training_matches_megengine(case, symbolic):
    """The same training with each step a compiled `trace` call (GradManager, optimizer
    and in-place parameter updates inside the traced function)."""
    _, kind, opt_name, kwargs = next(run for run in RUNS if run[0] == case)
    check(case, *train(kind, opt_name, kwargs, symbolic=symbolic))
