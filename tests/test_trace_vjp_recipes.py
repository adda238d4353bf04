"""Gradient rules replayed as recipes (megtrace/autodiff/recipes.py): a traced training
step's later calls apply the ops its rules applied on the first replay, without running
the rules. They must compute what the rules compute and fail where the rules would."""
import dataclasses

import numpy as np
import pytest

import megtrace as mge
import megtrace.formats as formats
import megtrace.functional as F
import megtrace.module as M
import megtrace.optimizer as optim
from megtrace.autodiff import GradManager, recipes, tape
from megtrace.dispatch import apply
from megtrace.jit import TraceError, trace
from megtrace.ops import get


class _Net(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
        self.bn = M.BatchNorm2d(4)
        self.fc = M.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        y = F.nn.dropout(y, 0.0) * 0.5 + y / 4.0      # a random op (its rule always runs)
        return self.fc(F.flatten(y, 1))


@pytest.fixture(autouse=True)
def _no_formats(monkeypatch):
    """A process that has not marked a tensor with a format (an earlier test may have:
    `formats.in_use` then stays on, and recipes are off, as the next test shows)."""
    monkeypatch.setattr(formats, "in_use", False)


def test_recipes_stay_on_while_formats_are_in_use_elsewhere(monkeypatch):
    """A tensor marked with a format somewhere in the process (formats.in_use is one-way)
    does not turn recipes off for nodes whose tensors carry no format."""
    monkeypatch.setattr(formats, "in_use", True)
    losses, params, step = _run_steps(3)
    assert step._last_entry.vjp_recipes and all(
        r is not None for r in step._last_entry.vjp_recipes.values())
    monkeypatch.setattr(formats, "in_use", False)
    want_losses, want_params, _ = _steps(False, calls=3)
    np.testing.assert_array_equal(losses, want_losses)
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)


def test_a_formatted_input_keeps_its_recipes():
    """An input marked "nhwc" inside the step: the forward's results take the mark, the
    tape's saved tensors do not (autodiff/tape.py snapshots them unformatted), so the
    rules' results are unformatted either way and their recipes are kept."""
    losses, params, step = _run_steps(3, fmt="nhwc")
    assert formats.in_use
    assert step._last_entry.vjp_recipes and all(
        r is not None for r in step._last_entry.vjp_recipes.values())
    with pytest.MonkeyPatch.context() as mp:
        _rules_only(mp)
        want_losses, want_params, _ = _run_steps(3, fmt="nhwc")
    np.testing.assert_array_equal(losses, want_losses)
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)


def test_a_formatted_output_gradient_runs_the_rule():
    """An output gradient marked "nhwc": the rule's results take its format through
    dispatch.apply, which a recipe would skip, so that node's rule runs every call."""
    net = M.Linear(3, 2)
    gm = GradManager().attach(net.parameters())

    @trace(symbolic=True)
    def step(x, dy):
        dy.format = "nhwc"
        with gm:
            gm.backward(net(x), dy)
        grad = net.weight.grad * 1.0
        net.weight.grad = net.bias.grad = None
        return grad
    x = mge.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    dy = mge.tensor(np.ones((4, 2), np.float32))
    grads = [step(x, dy).numpy() for _ in range(3)]
    kept = step._last_entry.vjp_recipes
    assert not [key for key, r in kept.items() if key[0].name == "matmul" and r is not None]
    for g in grads:
        np.testing.assert_allclose(g, np.ones((4, 2)).T @ x.numpy(), rtol=1e-6)


def _rules_only(mp):
    """Every gradient rule runs (no recipes), as before recipes.py."""
    mp.setattr(tape, "run_backward", lambda node, outs, wanted: node.backward(outs, wanted))


def _steps(use_recipes: bool, calls: int = 4):
    """Parameters and losses after `calls` traced SGD steps of a fresh _Net."""
    with pytest.MonkeyPatch.context() as mp:
        if not use_recipes:
            _rules_only(mp)
        return _run_steps(calls)


def _run_steps(calls, fmt: str = "default"):
    mge.random.seed(0)
    np.random.seed(0)
    net = _Net()
    net.train()
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    @trace(symbolic=True)
    def step(x, label):
        if fmt != "default":
            x.format = fmt          # MegEngine's mark: the conv and what follows take it
        with gm:
            loss = F.nn.cross_entropy(net(x), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss
    rng = np.random.default_rng(1)
    x = mge.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    label = mge.tensor(np.array([1, 3], np.int32))
    losses = [float(step(x, label).numpy()) for _ in range(calls)]
    return losses, [p.numpy() for p in net.parameters()], step


def test_recipes_compute_what_the_rules_compute(monkeypatch):
    recorded = []
    real = recipes._record
    monkeypatch.setattr(recipes, "_record", lambda *a: recorded.append(1) or real(*a))
    losses, params, step = _steps(True, calls=5)
    kept = step._last_entry.vjp_recipes
    assert kept and all(r is not None for r in kept.values())
    # the rules ran on the first replay (call 2) only: later calls replayed them
    assert len(recorded) == len(kept)
    want_losses, want_params, _ = _steps(False, calls=5)
    np.testing.assert_array_equal(losses, want_losses)
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)


def _detach_later(use_recipes: bool):
    """A step whose backward changes on call 3 (the weight no longer attached): the
    error it raises, or None."""
    with pytest.MonkeyPatch.context() as mp:
        if not use_recipes:
            _rules_only(mp)
        return _run_detach_later()


def _run_detach_later():
    net = M.Linear(3, 2)
    state = {"params": [net.weight, net.bias]}

    @trace(symbolic=True)
    def step(x):
        gm = GradManager().attach(state["params"])
        with gm:
            loss = (net(x) * 2.0).sum()
            gm.backward(loss)
        net.weight.grad = net.bias.grad = None
        return loss
    x = mge.tensor(np.ones((4, 3), np.float32))
    for _ in range(2):
        step(x)
    state["params"] = [net.bias]
    try:
        step(x)
    except TraceError as e:
        return str(e)
    return None


def test_a_changed_backward_fails_as_the_rules_do():
    got = _detach_later(True)
    want = _detach_later(False)
    assert want is not None and got == want


def test_a_rule_that_reads_a_value_is_not_kept():
    """A recipe keeps only ops and the constants a rule made: a rule that did anything
    else with the replay (here a value read) runs every call."""
    rule = get("relu").vjp
    reads = []

    def reading(V, inputs, outputs, grads, **params):
        reads.append(float(outputs[0].sum().numpy()))
        return rule(V, inputs, outputs, grads, **params)
    relu = dataclasses.replace(get("relu"), vjp=reading)   # relu, its rule reading a value
    net = M.Linear(3, 2)
    gm = GradManager().attach(net.parameters())

    @trace(symbolic=True)
    def step(x):
        with gm:
            loss = apply(relu, net(x)).sum()
            gm.backward(loss)
        net.weight.grad = net.bias.grad = None
        return loss
    x = mge.tensor(np.ones((4, 3), np.float32))
    for _ in range(4):
        step(x)
    assert len(reads) == 4
    assert None in step._last_entry.vjp_recipes.values()


def test_a_rule_that_copies_an_outside_value_is_not_kept():
    """Tensor(w) of a parameter inside a rule is a constant of the trace holding w's
    value: once the optimizer changes w, the rule fails MegEngine's constant check. A
    recipe must not keep the old value and pass."""
    def copying(V, inputs, outputs, grads):
        (a, b), (g,) = inputs, grads
        return g * mge.Tensor(b), g * a
    mul = dataclasses.replace(get("mul"), vjp=copying)
    w = mge.Parameter(np.full((3,), 2.0, np.float32))
    gm = GradManager().attach([w])
    opt = optim.SGD([w], lr=0.0)

    @trace(symbolic=True)
    def step(x):
        with gm:
            loss = apply(mul, x, w).sum()
            gm.backward(loss)
        opt.step().clear_grad()
        return loss
    x = mge.tensor(np.ones((3,), np.float32))
    step(x)
    step(x)             # the first replay, w unchanged: the rule ran, no recipe kept
    assert None in step._last_entry.vjp_recipes.values()
    opt.param_groups[0]["lr"] = 0.1
    step(x)             # w changes
    with pytest.raises(TraceError, match="tensors not equals"):
        step(x)
