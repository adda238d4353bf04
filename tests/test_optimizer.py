"""megtrace.optimizer against real MegEngine 1.13: parameter trajectories and state dicts
of every optimizer on fixed synthetic gradients (golden data from
tests/data/make_megengine_optimizers.py, cases in tests/data/optimizer_cases.py),
MultiStepLR, clip_grad, checkpoints in both directions, and MegEngine's errors."""
import pickle
import warnings

import numpy as np
import pytest
from conftest import TESTS, rel_err

import megtrace as mge
import megtrace.optimizer as optim
from data.optimizer_cases import (CASES, LAMB_TRUST_CASES, STEPS, gradients,
                                  initial_params, integer_params, param_groups)

GOLDEN = np.load(TESTS / "data" / "megengine_optimizers.npz")
TOL = 1e-6


def set_grads(params, grads):
    for name, p in params.items():
        p.grad = None if grads[name] is None else mge.tensor(grads[name])


def replay(monkeypatch, case, cls_name, kwargs, grouping, inplace, init, steps):
    monkeypatch.setenv("MEGENGINE_INPLACE_UPDATE", "1" if inplace else "0")
    params = {k: mge.Parameter(v) for k, v in init.items()}
    originals = dict(params)
    opt = getattr(optim, cls_name)(param_groups(params, grouping, kwargs.get("lr")), **kwargs)
    for step, grads in enumerate(gradients()[:steps]):
        set_grads(params, grads)
        opt.step()
        for name, p in params.items():
            want = GOLDEN[f"{case}/step{step}/{name}"]
            assert rel_err(p.numpy(), want) <= TOL, (case, step, name)
    assert all(params[k] is originals[k] for k in params)     # updated in place
    return opt


def check_state(case, opt):
    state = opt.state_dict()
    golden = {key.split("/", 2)[2] for key in GOLDEN.files if key.startswith(f"{case}/state/")}
    ours = {f"{pid}/{name}" for pid, st in state["state"].items() for name in st}
    assert ours == golden
    for pid, st in state["state"].items():
        for name, value in st.items():
            want = GOLDEN[f"{case}/state/{pid}/{name}"]
            assert isinstance(value, np.ndarray) and value.dtype == want.dtype
            assert value.shape == want.shape and rel_err(value, want) <= TOL, (pid, name)


@pytest.mark.parametrize("case,cls_name,kwargs,grouping,inplace", CASES,
                         ids=[c[0] for c in CASES])
def test_trajectory_matches_megengine(monkeypatch, case, cls_name, kwargs, grouping, inplace):
    opt = replay(monkeypatch, case, cls_name, kwargs, grouping, inplace, initial_params(),
                 STEPS)
    check_state(case, opt)


@pytest.mark.parametrize("case,kwargs", LAMB_TRUST_CASES, ids=[c[0] for c in LAMB_TRUST_CASES])
def test_lamb_trust_ratio_matches_megengine(monkeypatch, case, kwargs):
    opt = replay(monkeypatch, case, "LAMB", kwargs, "one", False, integer_params(), 1)
    check_state(case, opt)


def test_lamb_trust_ratio_uses_float_norm():
    """||p|| is the float norm (MegEngine's CPU kernel truncates it to an int sum)."""
    p = mge.Parameter(np.full((4,), 0.25, np.float32))
    p.grad = mge.tensor(np.array([1.0, -1.0, 1.0, -1.0], np.float32))
    optim.LAMB([p], lr=0.1, weight_decay=0.5).step()
    direction = np.array([1, -1, 1, -1], np.float32) + 0.25 * 0.5   # m_hat/sqrt(v_hat) = sign
    want = 0.25 - 0.1 * (0.5 / np.linalg.norm(direction)) * direction
    assert rel_err(p.numpy(), want) <= 1e-5


def test_multistep_lr_matches_megengine():
    params = {k: mge.Parameter(v) for k, v in initial_params().items()}
    opt = optim.SGD([params["w"], params["b"]], lr=0.1, momentum=0.9)
    sched = optim.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
    lrs = []
    for grads in gradients():
        lrs.append(opt.param_groups[0]["lr"])
        set_grads(params, grads)
        opt.step()
        sched.step()
    assert np.allclose(lrs, GOLDEN["multistep/lrs"], rtol=1e-12)
    assert rel_err(params["w"].numpy(), GOLDEN["multistep/w"]) <= TOL
    assert sched.state_dict() == {"milestones": [2, 4], "gamma": 0.5,
                                  "current_epoch": int(GOLDEN["multistep/state_epoch"])}


def test_multistep_lr_state_dict_roundtrip_and_errors():
    opt = optim.SGD([mge.Parameter(np.ones(2, np.float32))], lr=1.0)
    sched = optim.MultiStepLR(opt, [1, 3], gamma=0.1)
    sched.load_state_dict({"milestones": [1, 3], "gamma": 0.1, "current_epoch": 5})
    assert sched.current_epoch == 5
    with pytest.raises(KeyError, match="key 'gamma'' is not specified"):
        sched.load_state_dict({"milestones": [1], "current_epoch": 0})
    with pytest.raises(ValueError, match="Milestones should be a list of increasing"):
        optim.MultiStepLR(opt, [3, 1])
    with pytest.raises(TypeError, match="should be Optimizer"):
        optim.MultiStepLR(object(), [1])
    fresh = optim.SGD([mge.Parameter(np.ones(2, np.float32))], lr=1.0)
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in "
                                       r"param_groups\[0\] when resuming"):
        optim.MultiStepLR(fresh, [1], current_epoch=3)


@pytest.mark.parametrize("key,clip", [
    ("norm2", lambda ps: optim.clip_grad_norm(ps, 0.5)),
    ("norminf", lambda ps: optim.clip_grad_norm(ps, 0.5, ord=np.inf)),
    ("value", lambda ps: optim.clip_grad_value(ps, -0.2, 0.3))])
def test_clip_grad_matches_megengine(key, clip):
    params = {k: mge.Parameter(v) for k, v in initial_params().items()}
    set_grads(params, gradients()[0])
    total = clip(list(params.values()))
    if f"clip/{key}/total" in GOLDEN.files:
        assert rel_err(total.numpy(), GOLDEN[f"clip/{key}/total"]) <= TOL
    else:
        assert total is None
    for name, p in params.items():
        assert rel_err(p.grad.numpy(), GOLDEN[f"clip/{key}/{name}"]) <= TOL


def test_clip_grad_norm_without_grads_is_zero():
    total = optim.clip_grad_norm(mge.Parameter(np.ones(2, np.float32)), 1.0)
    assert isinstance(total, mge.Tensor) and float(total) == 0.0


def test_megengine_checkpoint_resumes():
    """A real MegEngine opt.state_dict() (megengine.save'd) loads and continues exactly
    as MegEngine continued it."""
    ckpt = mge.load(TESTS / "data" / "megengine_optimizer_state.pkl")
    saved = ckpt["optimizer"]
    assert [g["params"] for g in saved["param_groups"]] == [[0], [1]]
    assert saved["param_groups"][0]["betas"] == (0.8, 0.99)
    params = {k: mge.Parameter(v.numpy()) for k, v in ckpt["params"].items()}
    opt = optim.Adam(param_groups(params, "two", 0.02), lr=0.5, betas=(0.9, 0.999))
    opt.load_state_dict(saved)
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[0]["weight_decay"] == 0.05
    assert float(opt._state[params["w"]]["step"]) == 3.0
    for step, grads in enumerate(gradients()[3:], start=3):
        set_grads(params, grads)
        opt.step()
        for name, p in params.items():
            assert rel_err(p.numpy(), GOLDEN[f"resumed/step{step}/{name}"]) <= TOL


def test_state_dict_pickles_for_megengine(tmp_path):
    """Our state dict pickles as MegEngine's does: plain dicts/lists/tuples and NumPy-1
    arrays (real MegEngine 1.13 loaded one and resumed to within 1e-6:
    tests/data/check_megtrace_optimizer_state_in_megengine.py)."""
    params = {k: mge.Parameter(v) for k, v in initial_params().items()}
    opt = optim.Adam(param_groups(params, "two", 0.02), lr=0.02, betas=(0.8, 0.99))
    set_grads(params, gradients()[0])
    opt.step()
    mge.save(opt.state_dict(), tmp_path / "opt.pkl")
    raw = (tmp_path / "opt.pkl").read_bytes()
    assert b"numpy._core" not in raw and b"megtrace" not in raw
    names = {(a.arg if isinstance(a.arg, str) else "") for a in _ops(raw) if
             a.name in ("SHORT_BINUNICODE", "BINUNICODE", "GLOBAL")}
    assert "numpy" in names and "ndarray" in names
    back = mge.load(tmp_path / "opt.pkl")
    assert back["param_groups"] == opt.state_dict()["param_groups"]
    for pid, st in opt.state_dict()["state"].items():
        assert set(back["state"][pid]) == {"exp_avg", "exp_avg_sq", "step"}
        for name, value in st.items():
            assert np.array_equal(back["state"][pid][name], value)
            assert back["state"][pid][name].dtype == np.float32


def _ops(raw: bytes):
    import pickletools

    class Op:
        def __init__(self, name, arg):
            self.name, self.arg = name, arg
    return [Op(op.name, arg) for op, arg, _ in pickletools.genops(raw)]


def test_state_dict_keep_var_and_load_tensors():
    p = mge.Parameter(np.ones((2,), np.float32))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = mge.tensor(np.array([1.0, 2.0], np.float32))
    opt.step()
    kept = opt.state_dict(keep_var=True)
    assert isinstance(kept["state"][0]["momentum_buffer"], mge.Tensor)
    other = optim.SGD([mge.Parameter(np.ones((2,), np.float32))], lr=0.3, momentum=0.5)
    other.load_state_dict(kept)
    assert other.param_groups[0]["lr"] == 0.1
    buf = other.state_dict()["state"][0]["momentum_buffer"]
    assert np.array_equal(buf, [1.0, 2.0])


def test_load_state_dict_errors():
    p, q = (mge.Parameter(np.ones(2, np.float32)) for _ in range(2))
    opt = optim.SGD([p, q], lr=0.1, momentum=0.9)
    state = opt.state_dict()
    two = optim.SGD([{"params": p}, {"params": q}], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        two.load_state_dict(state)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        optim.SGD([p], lr=0.1, momentum=0.9).load_state_dict(state)
    with pytest.raises(ValueError, match="doesn't match the keys of optimizer's group"):
        optim.Adam([p, q], lr=0.1).load_state_dict(
            {"param_groups": state["param_groups"],
             "state": {0: {"exp_avg": np.zeros(2)}, 1: {"exp_avg": np.zeros(2)}}})


def test_inplace_identity_grad_none_and_clear_grad():
    w = mge.Parameter(np.ones((2, 2), np.float32))
    b = mge.Parameter(np.zeros((2,), np.float32))
    opt = optim.SGD([w, b], lr=0.5)
    w.grad = mge.tensor(np.ones((2, 2), np.float32))
    assert opt.step() is opt
    assert np.array_equal(w.numpy(), np.full((2, 2), 0.5)) and np.array_equal(b.numpy(), [0, 0])
    opt.clear_grad()
    assert w.grad is None and b.grad is None
    w.grad = mge.tensor(np.ones((2, 2), np.float32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.zero_grad()
    assert np.array_equal(w.grad.numpy(), np.zeros((2, 2)))
    # MegEngine 1.13's words (checked in its chroot), then reset_zero's for the one grad
    assert [str(c.message) for c in caught] == [
        "Call to deprecated method zero_grad. (use clear_grad instead) -- Deprecated since "
        "version 1.0.",
        "Call to deprecated method reset_zero. (use ``*= 0`` instead) -- Deprecated since "
        "version 1.0."]


def test_param_groups_defaults_and_add_param_group():
    w, b, c = (mge.Parameter(np.ones(2, np.float32)) for _ in range(3))
    opt = optim.Adam([{"params": [w]}, {"params": b, "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["betas"] == (0.9, 0.999)
    opt.add_param_group({"params": [c], "eps": 1e-3})
    assert opt.param_groups[2]["eps"] == 1e-3 and opt.param_groups[2]["lr"] == 0.1
    assert len(opt.param_groups) == 3


def test_megengine_errors():
    p = mge.Parameter(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="optimizer can only optimize Parameters, but one of "
                                        "the params is <class 'megtrace.tensor.Tensor'>"):
        optim.SGD([mge.tensor([1.0])], lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="should be Parameter or dict, or Iterable of them"):
        optim.SGD(3, lr=0.1)
    with pytest.raises(TypeError, match="types of params argument given to the optimizer "
                                        "shoud be same"):
        optim.SGD([p, {"params": [p]}], lr=0.1)
    with pytest.raises(AssertionError, match="some parameters appear in more than one "
                                             "parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(AssertionError, match="param group must be a dict"):
        optim.SGD([p], lr=0.1).add_param_group([p])
    with pytest.raises(AssertionError, match="Invalid learning rate: -1"):
        optim.SGD([p], lr=-1)
    with pytest.raises(AssertionError, match="Invalid momentum value: -0.5"):
        optim.SGD([p], lr=0.1, momentum=-0.5)
    with pytest.raises(AssertionError, match="Nesterov momentum requires a momentum"):
        optim.SGD([p], lr=0.1, nesterov=True)
    for cls in (optim.Adam, optim.AdamW, optim.LAMB):
        with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
            cls([p], lr=-0.1)
        with pytest.raises(ValueError, match="Invalid weight_decay value: -1"):
            cls([p], lr=0.1, weight_decay=-1)
        with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
            cls([p], lr=0.1, betas=(0.9, 1.0))
    with pytest.raises(AssertionError, match="Invalid learning rate decay: -1"):
        optim.Adagrad([p], lr_decay=-1)
    with pytest.raises(AssertionError, match="Invalid rho value: 2"):
        optim.Adadelta([p], rho=2)
    with pytest.raises(TypeError, match="Please use a list instead"):
        opt = optim.SGD([p], lr=0.1)
        opt.param_groups[0]["params"] = {p}
        opt.step()
    with pytest.raises(NotImplementedError, match="use autodiff.GradManager instead"):
        optim.SGD([p], lr=0.1).backward(None)


def test_optimizer_surface_matches_megengine():
    assert set(optim.__all__) >= {"Adadelta", "Adagrad", "Adam", "AdamW", "LAMB", "LAMBFp16",
                                  "LRScheduler", "MultiStepLR", "Optimizer", "SGD",
                                  "clip_grad_norm", "clip_grad_value"}
    with pytest.raises(TypeError):
        optim.Optimizer([mge.Parameter(np.ones(1, np.float32))], {})   # abstract


def test_lamb_fp16_keeps_a_float32_master():
    p = mge.Parameter(np.full((3,), 1.0, np.float16))
    opt = optim.LAMBFp16([p], lr=1e-4)
    p.grad = mge.tensor(np.ones(3, np.float16))
    opt.step()
    master = opt._state[p]["param_fp32"]
    assert master.dtype == np.float32 and p.dtype == np.float16
    assert rel_err(master.numpy(), np.full(3, 1 - 1e-4, np.float32)) <= 1e-6
    assert np.array_equal(p.numpy(), master.numpy().astype(np.float16))
