"""Golden optimizer runs from MegEngine 1.13 (run in the megref chroot:
/work/shared/megref/mpy tests/data/make_megengine_optimizers.py). For every case of
optimizer_cases.py: the parameters after each step and the final state_dict, written to
megengine_optimizers.npz; MultiStepLR's learning rates; clip_grad results; and a real
`opt.state_dict()` saved by megengine.save (megengine_optimizer_state.pkl)."""
import os
import sys

import numpy as np

import megengine as mge
import megengine.optimizer as optim
from megengine.optimizer.optimizer import Optimizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from optimizer_cases import (CASES, LAMB_TRUST_CASES, STEPS, gradients, initial_params,  # noqa
                             integer_params, param_groups)

# MegEngine 1.13's LAMB passes dtype= to a base-class _add_state that has no such argument
# (TypeError); accept and ignore it so the LAMBUpdate kernel can be recorded.
_add_state = Optimizer._add_state
Optimizer._add_state = lambda self, param, name, initializer=None, dtype=None: \
    _add_state(self, param, name, initializer)


def run(case, cls_name, kwargs, grouping, inplace, init, steps, out):
    os.environ["MEGENGINE_INPLACE_UPDATE"] = "1" if inplace else "0"
    params = {k: mge.Parameter(v) for k, v in init.items()}
    ids = {k: id(p) for k, p in params.items()}
    opt = getattr(optim, cls_name)(param_groups(params, grouping, kwargs.get("lr")), **kwargs)
    for step, grads in enumerate(gradients()[:steps]):
        for name, p in params.items():
            p.grad = None if grads[name] is None else mge.tensor(grads[name])
        opt.step()
        for name, p in params.items():
            out[f"{case}/step{step}/{name}"] = p.numpy()
    assert all(id(p) == ids[k] for k, p in params.items())
    state = opt.state_dict()
    for pid, st in state["state"].items():
        for key, value in st.items():
            out[f"{case}/state/{pid}/{key}"] = np.asarray(value)
    os.environ["MEGENGINE_INPLACE_UPDATE"] = "0"
    return opt, params


out = {}
for case, cls_name, kwargs, grouping, inplace in CASES:
    run(case, cls_name, kwargs, grouping, inplace, initial_params(), STEPS, out)
for case, kwargs in LAMB_TRUST_CASES:
    run(case, "LAMB", kwargs, "one", False, integer_params(), 1, out)

# MultiStepLR: the lr each epoch, and the parameters it produced
params = {k: mge.Parameter(v) for k, v in initial_params().items()}
opt = optim.SGD([params["w"], params["b"]], lr=0.1, momentum=0.9)
sched = optim.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
lrs = []
for step, grads in enumerate(gradients()):
    lrs.append(opt.param_groups[0]["lr"])
    for name, p in params.items():
        p.grad = None if grads[name] is None else mge.tensor(grads[name])
    opt.step()
    sched.step()
out["multistep/lrs"] = np.array(lrs)
out["multistep/w"] = params["w"].numpy()
out["multistep/state_epoch"] = np.array(sched.state_dict()["current_epoch"])

# clip_grad on step 0's gradients
for key, clip in (("norm2", lambda ps: optim.clip_grad_norm(ps, 0.5)),
                  ("norminf", lambda ps: optim.clip_grad_norm(ps, 0.5, ord=np.inf)),
                  ("value", lambda ps: optim.clip_grad_value(ps, -0.2, 0.3))):
    params = {k: mge.Parameter(v) for k, v in initial_params().items()}
    for name, p in params.items():
        p.grad = mge.tensor(gradients()[0][name])
    total = clip(list(params.values()))
    if total is not None:
        out[f"clip/{key}/total"] = total.numpy()
    for name, p in params.items():
        out[f"clip/{key}/{name}"] = p.grad.numpy()

# a checkpoint as MegEngine writes it: Adam in two groups, after 3 steps
params = {k: mge.Parameter(v) for k, v in initial_params().items()}
opt = optim.Adam(param_groups(params, "two", 0.02), lr=0.02, betas=(0.8, 0.99), eps=1e-6,
                 weight_decay=0.05)
for grads in gradients()[:3]:
    for name, p in params.items():
        p.grad = mge.tensor(grads[name])
    opt.step()
mge.save({"optimizer": opt.state_dict(), "params": {k: p for k, p in params.items()}},
         os.path.join(HERE, "megengine_optimizer_state.pkl"))
for step, grads in enumerate(gradients()[3:], start=3):     # the continuation, for tests
    for name, p in params.items():
        p.grad = None if grads[name] is None else mge.tensor(grads[name])
    opt.step()
    for name, p in params.items():
        out[f"resumed/step{step}/{name}"] = p.numpy()

np.savez_compressed(os.path.join(HERE, "megengine_optimizers.npz"), **out)
print("wrote", len(out), "arrays")
