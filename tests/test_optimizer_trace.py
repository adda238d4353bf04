"""Optimizer steps inside `megtrace.jit.trace`: the traced function assigns parameters and
optimizer state (outside tensors) in place, and every compiled replay assigns them again;
hyper-parameters are fed on every call, so a scheduler's new lr reaches the compiled
step (MegEngine feeds tensors created in a trace the same way). Reference: the eager
optimizers, which tests/test_optimizer.py checks against real MegEngine."""
import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.optimizer as optim
from megtrace.jit import trace

CONFIGS = [("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 1e-2}),
           ("Adam", {"lr": 0.01, "weight_decay": 0.05}),
           ("AdamW", {"lr": 0.03, "betas": (0.85, 0.98)}),
           ("Adagrad", {"lr": 0.1, "lr_decay": 0.05}),
           ("Adadelta", {"lr": 0.5, "rho": 0.7})]


def grads(step):
    rng = np.random.RandomState(step)
    return rng.randn(3, 4).astype("float32"), rng.randn(4).astype("float32")


def run_eager(name, kwargs, steps):
    w, b = mge.Parameter(np.ones((3, 4), np.float32)), mge.Parameter(np.zeros(4, np.float32))
    opt = getattr(optim, name)([w, b], **kwargs)
    for step in range(steps):
        gw, gb = grads(step)
        w.grad, b.grad = mge.tensor(gw), mge.tensor(gb)
        opt.step()
    return w.numpy(), b.numpy(), opt.state_dict()


@pytest.mark.parametrize("symbolic", [False, True], ids=["eager_record", "symbolic"])
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_traced_step_matches_eager(name, kwargs, symbolic):
    w, b = mge.Parameter(np.ones((3, 4), np.float32)), mge.Parameter(np.zeros(4, np.float32))
    opt = getattr(optim, name)([w, b], **kwargs)

    @trace(symbolic=symbolic)
    def train_step(gw, gb):
        w.grad, b.grad = gw, gb
        opt.step()
        return w * 1.0

    for step in range(4):
        out = train_step(*(mge.tensor(g) for g in grads(step)))
        assert w._var is None and b._var is None          # plain tensors again
        assert np.array_equal(out.numpy(), w.numpy())
    want_w, want_b, want_state = run_eager(name, kwargs, 4)
    assert rel_err(w.numpy(), want_w) <= 1e-5 and rel_err(b.numpy(), want_b) <= 1e-5
    state = opt.state_dict()["state"]
    for pid, st in want_state["state"].items():
        for key, value in st.items():
            assert rel_err(state[pid][key], value) <= 1e-5, (pid, key)
    assert opt.param_groups[0]["params"] == [w, b]       # same Parameter objects


def test_scheduler_changes_lr_of_a_traced_step():
    w = mge.Parameter(np.ones(3, np.float32))
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    sched = optim.MultiStepLR(opt, [2], gamma=0.1)

    @trace(symbolic=True)
    def train_step(g):
        w.grad = g
        opt.step()

    for _ in range(4):
        train_step(mge.tensor(np.ones(3, np.float32)))
        sched.step()
    # buf: 1, 1.9, 2.71, 3.439; lr 0.1, 0.1, 0.01, 0.01
    want = 1 - 0.1 * 1 - 0.1 * 1.9 - 0.01 * 2.71 - 0.01 * 3.439
    assert rel_err(w.numpy(), np.full(3, want)) <= 1e-6


def test_outside_tensor_assigned_in_trace_keeps_its_identity():
    buf = mge.Tensor(np.zeros(2, np.float32))

    @trace
    def accumulate(x):
        buf._reset(buf * 0.5 + x)
        buf[0] = buf[0] + 1
        return buf + 0

    for i in range(3):
        out = accumulate(mge.tensor(np.array([2.0, 4.0], np.float32)))
    # (0 -> [3, 4] -> [4.5, 6] -> [5.25, 7])
    assert np.allclose(buf.numpy(), [5.25, 7.0]) and np.allclose(out.numpy(), [5.25, 7.0])
