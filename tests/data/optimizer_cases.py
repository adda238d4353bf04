"""The optimizer runs both tests/data/make_megengine_optimizers.py (real MegEngine) and
tests/test_optimizer.py (megtrace) replay: fixed parameters, fixed synthetic gradients,
one optimizer configuration per case. Plain Python + NumPy (the generator runs on
MegEngine's Python 3.9)."""
import numpy as np

STEPS = 6
SHAPES = {"w": (3, 4), "b": (4,)}
# (case, optimizer, constructor kwargs, how params are grouped, MEGENGINE_INPLACE_UPDATE)
# grouping "one": a single list; "two": w and b in separate groups, b's lr halved.
CASES = [
    ("sgd_plain", "SGD", {"lr": 0.1}, "one", False),
    ("sgd_momentum", "SGD", {"lr": 0.05, "momentum": 0.9}, "one", False),
    ("sgd_nesterov_wd", "SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True,
                                "weight_decay": 1e-2}, "one", False),
    ("sgd_momentum_groups", "SGD", {"lr": 0.05, "momentum": 0.9}, "two", False),
    ("sgd_momentum_inplace", "SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3},
     "one", True),
    ("adam_default", "Adam", {"lr": 0.01}, "one", False),
    ("adam_wd_betas", "Adam", {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6,
                               "weight_decay": 0.05}, "two", False),
    ("adam_inplace", "Adam", {"lr": 0.01, "weight_decay": 0.01}, "one", True),
    ("adamw_default", "AdamW", {"lr": 0.01}, "one", False),
    ("adamw_wd", "AdamW", {"lr": 0.03, "betas": (0.85, 0.98), "weight_decay": 0.1}, "two",
     False),
    ("adamw_inplace", "AdamW", {"lr": 0.01}, "one", True),
    ("adagrad_default", "Adagrad", {}, "one", False),
    ("adagrad_decay_wd", "Adagrad", {"lr": 0.1, "lr_decay": 0.05, "eps": 1e-6,
                                     "weight_decay": 0.02}, "two", False),
    ("adadelta_default", "Adadelta", {}, "one", False),
    ("adadelta_rho_wd", "Adadelta", {"lr": 0.5, "rho": 0.7, "eps": 1e-4,
                                     "weight_decay": 0.03}, "two", False),
    ("lamb_nowd", "LAMB", {"lr": 0.01}, "one", False),
    ("lamb_nobias", "LAMB", {"lr": 0.02, "betas": (0.8, 0.9), "bias_correction": False},
     "one", False),
]
# LAMB with a trust ratio: one step from integer-valued parameters, where MegEngine's
# CPU kernel's int-accumulated ||p||^2 is exact (see megtrace/optimizer/lamb.py).
LAMB_TRUST_CASES = [
    ("lamb_trust_wd", {"lr": 0.01, "weight_decay": 0.1}),
    ("lamb_trust_always", {"lr": 0.01, "always_adapt": True}),
]
MISSING_GRAD_STEP = 3          # at this step b has no gradient (grad None: b is skipped)


def initial_params():
    rng = np.random.RandomState(2024)
    return {name: rng.randn(*shape).astype("float32") for name, shape in SHAPES.items()}


def integer_params():
    rng = np.random.RandomState(7)
    return {name: rng.randint(-3, 4, size=shape).astype("float32")
            for name, shape in SHAPES.items()}


def gradients():
    """gradients()[step][name] (None where the parameter has no gradient that step)."""
    rng = np.random.RandomState(99)
    steps = []
    for step in range(STEPS):
        grads = {name: (rng.randn(*shape) * 0.5).astype("float32")
                 for name, shape in SHAPES.items()}
        if step == MISSING_GRAD_STEP:
            grads["b"] = None
        steps.append(grads)
    return steps


def param_groups(params, grouping, lr):
    """The `params` argument of the optimizer for a grouping."""
    if grouping == "one":
        return [params["w"], params["b"]]
    return [{"params": [params["w"]]}, {"params": params["b"], "lr": lr / 2}]
