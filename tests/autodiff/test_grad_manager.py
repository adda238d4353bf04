"""GradManager and Function: MegEngine 1.13's semantics, checked against hand-derived
gradients (NumPy)."""
import weakref

import numpy as np
import pytest

import megtrace as mge
import megtrace.functional as F
from megtrace.autodiff import Function, GradManager
from megtrace.jit import trace


def test_matmul_plus_bias_grads_and_reuse():
    x = mge.tensor([1.0, 3.0, 5.0]).reshape(1, 3)
    w = mge.tensor([2.0, 4.0, 6.0]).reshape(3, 1)
    b = mge.tensor(-1.0)
    gm = GradManager().attach([w, b])
    gm.record()
    gm.backward(F.matmul(x, w) + b)
    np.testing.assert_equal(w.grad.numpy(), [[1], [3], [5]])
    np.testing.assert_equal(b.grad.numpy(), 1)
    with gm:                                 # reused: gradients accumulate
        gm.backward(F.matmul(x, w) + b, dy=mge.tensor(2.5).reshape(1, 1))
    np.testing.assert_equal(w.grad.numpy(), [[3.5], [10.5], [17.5]])
    w.grad = None
    with gm:
        gm.backward(F.matmul(x, w) + b)
    np.testing.assert_equal(w.grad.numpy(), [[1], [3], [5]])


def test_backward_without_record_raises():
    with pytest.raises(RuntimeError, match="no computation history"):
        GradManager().backward(mge.tensor(1.0))


def test_record_twice_raises():
    gm = GradManager()
    with gm:
        with pytest.raises(RuntimeError, match="already recording"):
            gm.record()


def test_attach_rejects_integer_tensors():
    with pytest.raises(AssertionError, match="floating point dtype"):
        GradManager().attach(mge.tensor([1, 2]))


def test_no_dependency_leaves_grad_none():
    x, w, unused = mge.tensor(3.0), mge.Parameter(1.0), mge.Parameter(1.0)
    gm = GradManager().attach([w, unused])
    with gm:
        out = x * w
        _ = unused * out
        gm.backward(out.sum())
    assert w.grad is not None and unused.grad is None


def test_attach_inside_record_and_callbacks():
    a = mge.Parameter([1.0])
    gm = GradManager()
    seen = []
    with gm:
        b = a * 3
        gm.attach(b, callbacks=lambda t, g: (seen.append(t is b), g * 2)[1])
        gm.backward(b * b + 1)
    assert seen == [True]
    np.testing.assert_allclose(b.grad.numpy(), [12.0])     # 2 * (2 * b)


def test_attached_tensors_are_weak():
    gm = GradManager()
    x = mge.Tensor(2.0)
    gm.attach(x)
    assert gm.attached_tensors()[0] is x
    ref = weakref.ref(x)
    del x
    assert ref() is None and gm.attached_tensors() == []


def test_detach_stops_gradient():
    w = mge.Parameter([2.0, 3.0])
    gm = GradManager().attach(w)
    with gm:
        gm.backward((w * w.detach()).sum())
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 3.0])


def test_inplace_update_keeps_history():
    w = mge.Parameter([2.0])
    gm = GradManager().attach(w)
    with gm:
        y = w * 1
        y *= w                       # y = w^2 through _reset
        gm.backward(y)
    np.testing.assert_allclose(w.grad.numpy(), [4.0])


def test_mlp_softmax_cross_entropy_matches_numpy(rng):
    x = rng.standard_normal((4, 5)).astype("float32")
    w1 = rng.standard_normal((5, 6)).astype("float32")
    w2 = rng.standard_normal((6, 3)).astype("float32")
    label = np.array([0, 2, 1, 2])
    W1, W2 = mge.Parameter(w1), mge.Parameter(w2)
    gm = GradManager().attach([W1, W2])
    with gm:
        h = F.relu(F.matmul(mge.tensor(x), W1))
        p = F.softmax(F.matmul(h, W2), axis=1)
        loss = -F.log(p[np.arange(4), label]).mean() if False else \
            -(F.log(p) * mge.tensor(np.eye(3, dtype="float32")[label])).sum() / 4
        gm.backward(loss)
    # NumPy reference
    hp = x @ w1
    hr = np.maximum(hp, 0)
    z = hr @ w2
    e = np.exp(z - z.max(1, keepdims=True))
    pr = e / e.sum(1, keepdims=True)
    dz = (pr - np.eye(3)[label]) / 4
    dw2 = hr.T @ dz
    dh = dz @ w2.T * (hp > 0)
    dw1 = x.T @ dh
    np.testing.assert_allclose(W2.grad.numpy(), dw2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(W1.grad.numpy(), dw1, rtol=1e-4, atol=1e-5)


def test_two_managers_and_higher_order():
    x = mge.Parameter([0.5, 1.0])
    outer, inner = GradManager().attach(x), GradManager().attach(x)
    with outer:
        with inner:
            y = F.sin(x)
            inner.backward(y.sum())
        first = x.grad
        x.grad = None
        outer.backward(first.sum())
    np.testing.assert_allclose(first.numpy(), np.cos([0.5, 1.0]), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), -np.sin([0.5, 1.0]), rtol=1e-6)


def test_group_backward_is_not_recorded_by_the_other():
    x = mge.Parameter([2.0])
    gm1, gm2 = GradManager().attach(x), GradManager().attach(x)
    with gm1 | gm2:
        y = x * x
        gm1.backward(y)
        assert x.grad is not None
        g = x.grad
        x.grad = None
        gm2.backward(y)
    np.testing.assert_allclose(g.numpy(), [4.0])
    np.testing.assert_allclose(x.grad.numpy(), [4.0])


class _Scale(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return a * b, a + b

    def backward(self, g1, g2):
        ga = g1 * 10 if g2 is None else g1 * 10 + g2
        return ga, None


def test_function_custom_backward_and_none_grads():
    a, b = mge.Parameter([1.0, 2.0]), mge.Parameter([3.0, 4.0])
    gm = GradManager().attach([a, b])
    with gm:
        prod, _ = _Scale()(a, b)
        gm.backward(prod.sum())
    np.testing.assert_allclose(a.grad.numpy(), [10.0, 10.0])
    assert b.grad is None


def test_function_rejects_non_tensor_arguments():
    with pytest.raises(TypeError, match=r"op .* expect type Tensor as inputs"):
        _Scale()(mge.tensor([1.0]), 1)


def test_function_forward_ops_are_not_differentiated():
    class StopGradient(Function):
        def forward(self, a):
            return a * 5

        def backward(self, *_):
            return None

    a = mge.Parameter([1.0])
    gm = GradManager().attach(a)
    with gm:
        gm.backward((StopGradient()(a * 3) + a * 4).sum())
    np.testing.assert_allclose(a.grad.numpy(), [4.0])


def test_inner_manager_does_not_record_an_outer_backward():
    x = mge.Parameter([0.3, 0.7])
    outer, inner = GradManager().attach(x), GradManager().attach(x)
    with outer:
        with inner:
            y = F.cos(x)
            outer.backward(y)            # inner was entered later: it does not see this
            first = x.grad
            inner.backward(first)        # first does not depend on x for inner
    np.testing.assert_allclose(x.grad.numpy(), -np.sin([0.3, 0.7]), rtol=1e-6)


def test_forward_mode_by_double_reverse():
    """jvp(f, x, v) = d/dv <vjp(f, x, v), 1>: the outer manager differentiates the inner
    backward pass with respect to the cotangent."""
    x = mge.tensor([0.1, 0.5, 0.9])
    with GradManager() as outer:
        with GradManager().attach(x) as inner:
            y = F.sin(x) * 3
            v = F.zeros_like(y)
            outer.attach(v)
            inner.backward(y, v)
        outer.backward(x.grad)
    np.testing.assert_allclose(v.grad.numpy(), 3 * np.cos([0.1, 0.5, 0.9]), rtol=1e-6)


def test_function_backward_differentiated_by_an_outer_manager():
    class Cos(Function):
        def forward(self, x):
            self.x = x
            return F.cos(mge.Tensor(x.numpy()))

        def backward(self, dy):
            return -F.sin(self.x) * dy

    x = mge.Parameter([0.2, 0.4])
    outer, inner = GradManager().attach(x), GradManager().attach(x)
    with outer:
        with inner:
            inner.backward(Cos()(x))
        outer.backward(x.grad)
    want = -np.sin([0.2, 0.4]) - np.cos([0.2, 0.4])
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)


def test_float16_can_be_attached():
    x = mge.tensor([1.0], dtype="float16")
    with GradManager().attach(x) as gm:
        gm.backward(x * 2)
    assert x.grad.dtype == np.float16 and float(x.grad) == 2.0


def test_attached_tensors_given_one_gradient_get_objects_of_their_own():
    """`x + w` gives both inputs the same gradient; accumulated over two backward passes
    each must read 2 (one object shared would read 3 after `x.grad += g` added to both).
    MegEngine 1.13: tests/data/show_megengine_grad_formats.py."""
    x, w = mge.tensor(np.ones(3, "float32")), mge.tensor(np.ones(3, "float32"))
    gm = GradManager().attach([x, w])
    for _ in range(2):
        with gm:
            gm.backward(x + w)
    assert x.grad is not w.grad
    np.testing.assert_equal(x.grad.numpy(), [2, 2, 2])
    np.testing.assert_equal(w.grad.numpy(), [2, 2, 2])


def test_gradient_of_the_tensor_given_as_dy_is_not_the_callers_tensor():
    """The first pass's x.grad must not be the caller's dy, which `+=` would then change
    (MegEngine 1.13: x.grad 4, dy still 2; show_megengine_grad_formats.py)."""
    x = mge.tensor(np.ones(3, "float32"))
    dy = mge.tensor(np.full(3, 2.0, "float32"))
    gm = GradManager().attach([x])
    for _ in range(2):
        with gm:
            gm.backward(x + 0.0, dy=dy)  # add's rule hands dy itself back
    np.testing.assert_equal(x.grad.numpy(), [4, 4, 4])
    np.testing.assert_equal(dy.numpy(), [2, 2, 2])


@pytest.mark.parametrize("name,fn,fx,fw,want", [
    ("x*w", lambda x, w: x * w, "default", "nhwc", ("nhwc", "default", "nhwc")),
    ("x*w", lambda x, w: x * w, "nhwc", "default", ("nhwc", "nhwc", "default")),
    ("x+w", lambda x, w: x + w, "nhwc", "default", ("nhwc", "nhwc", "default")),
    ("relu(x)*w", lambda x, w: F.relu(x) * w, "nhwc", "default", ("nhwc", "nhwc", "default")),
    ("sum(x*w)", lambda x, w: (x * w).sum(), "nhwc", "nhwc", ("default", "nhwc", "nhwc"))])
def test_a_gradient_takes_the_format_of_its_tensor(name, fn, fx, fw, want):
    """MegEngine's AttachGrad wraps each attached tensor's gradient in that tensor's
    format, whatever the formats on the way (the table printed by real MegEngine 1.13:
    tests/data/show_megengine_grad_formats.py); the values are NumPy's."""
    xv = np.arange(1, 25, dtype="float32").reshape(1, 2, 3, 4)
    x = mge.tensor(xv, format=fx)
    w = mge.tensor(np.full((1, 2, 3, 4), 0.5, "float32"), format=fw)
    gm = GradManager().attach([x, w])
    with gm:
        y = fn(x, w)
        gm.backward(y.sum())
    assert (y.format, x.grad.format, w.grad.format) == want
    np.testing.assert_allclose(x.grad.numpy(), np.full_like(xv, 0.5) if name != "x+w"
                               else np.ones_like(xv))
    np.testing.assert_allclose(w.grad.numpy(), xv if name != "x+w" else np.ones_like(xv))


def _grads_of_sum(fn, values, other=None, symbolic=None) -> list:
    """x.grad after backward of fn(x[, other]).sum(): once eagerly (symbolic None), or
    from two calls of trace(symbolic=...), the second one replayed or compiled."""
    x = mge.tensor(np.array(values, "float32"))
    args = (x,) if other is None else (x, mge.tensor(np.array(other, "float32")))
    gm = GradManager().attach([x])

    def step(*args):
        with gm:
            gm.backward(fn(*args).sum())
        return args[0].grad
    if symbolic is not None:
        step = trace(step, symbolic=symbolic)
    grads = []
    for _ in range(1 if symbolic is None else 2):
        x.grad = None
        grads.append(step(*args).numpy())
    return grads


@pytest.mark.parametrize("symbolic", [None, False, True], ids=["eager", "record", "symbolic"])
@pytest.mark.parametrize("fn,values,other,want", [
    pytest.param(F.abs, [-1.0, 0.0, 2.0], None, [-1, -1, 1], id="abs"),
    pytest.param(F.nn.l1_loss, [1.0, 3.0], [1.0, 2.0], [-0.5, 0.5], id="l1_loss"),
    pytest.param(lambda x: F.leaky_relu(x, 0.1), [-1.0, 0.0, 2.0], None, [0.1, 1, 1],
                 id="leaky_relu")])
def test_subgradient_at_zero_is_megengines(fn, values, other, want, symbolic):
    """Where the derivative does not exist MegEngine picks a side: abs's ABS_GRAD is
    `x > 0 ? g : -g` (so -g at 0, not sign's 0) and leaky_relu's slope is 1 for x >= 0;
    traced or not (MegEngine 1.13: tests/data/show_megengine_subgradients.py)."""
    for got in _grads_of_sum(fn, values, other, symbolic):
        np.testing.assert_allclose(got, np.array(want, "float32"), rtol=1e-6)


def test_values_written_twice_both_get_the_gradient():
    """MegEngine 1.13 gives each value written to one element twice that element's
    gradient, the overwritten write too (tests/data/show_megengine_duplicate_index_grads.py),
    for setitem and F.scatter alike; the overwritten elements of x get none."""
    x, v = mge.tensor([1., 2., 3.]), mge.tensor([5., 6.])
    gm = GradManager().attach([x, v])
    with gm:
        y = x * 1
        y[mge.tensor([1, 1], dtype="int32")] = v
        gm.backward((y * mge.tensor([1., 10., 100.])).sum())
    assert (x.grad.numpy().tolist(), v.grad.numpy().tolist()) == ([1, 0, 100], [10, 10])
    x, s = mge.tensor([[1., 2., 3.]]), mge.tensor([[10., 20., 30.]])
    gm = GradManager().attach([x, s])
    with gm:
        y = F.scatter(x * 1, 1, mge.tensor([[0, 0, 1]], dtype="int32"), s)
        gm.backward((y * mge.tensor([[1., 2., 3.]])).sum())
    assert (x.grad.numpy().tolist(), s.grad.numpy().tolist()) == ([[0, 0, 3]], [[1, 1, 2]])
