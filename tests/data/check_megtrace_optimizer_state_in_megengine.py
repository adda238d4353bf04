"""Real MegEngine 1.13 resumes from an optimizer checkpoint megtrace wrote (checked:
max rel err 0 over 3 resumed Adam steps). Two runs of this one script:
  PYTHONPATH=. .venv/bin/python tests/data/check_megtrace_optimizer_state_in_megengine.py (megtrace:
      3 Adam steps, megtrace.save of {"optimizer": state_dict, "params": ...} and the
      parameters after 3 more steps, into $MEGX_EXCHANGE or /tmp)
  /work/shared/megref/mpy tests/data/check_megtrace_optimizer_state_in_megengine.py
      (MegEngine: megengine.load, Optimizer.load_state_dict, the same 3 steps, compare)."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from optimizer_cases import gradients, initial_params, param_groups  # noqa: E402

EXCHANGE = os.environ.get("MEGX_EXCHANGE", "/tmp")
CKPT = os.path.join(EXCHANGE, "mt_optimizer_state.pkl")
FINAL = os.path.join(EXCHANGE, "mt_optimizer_final.npz")

try:
    import megtrace as mge
    import megtrace.optimizer as optim
    WRITER = True
except ImportError:
    import megengine as mge
    import megengine.optimizer as optim
    WRITER = False


def steps(opt, params, grads_list):
    for grads in grads_list:
        for name, p in params.items():
            p.grad = None if grads[name] is None else mge.tensor(grads[name])
        opt.step()


if WRITER:
    params = {k: mge.Parameter(v) for k, v in initial_params().items()}
    opt = optim.Adam(param_groups(params, "two", 0.02), lr=0.02, betas=(0.8, 0.99),
                     weight_decay=0.05)
    steps(opt, params, gradients()[:3])
    mge.save({"optimizer": opt.state_dict(), "params": params}, CKPT)
    steps(opt, params, gradients()[3:])
    np.savez(FINAL, **{k: p.numpy() for k, p in params.items()})
    print("wrote", CKPT, FINAL)
else:
    ckpt = mge.load(CKPT)
    params = {k: mge.Parameter(v.numpy()) for k, v in ckpt["params"].items()}
    opt = optim.Adam(param_groups(params, "two", 0.02), lr=0.02)
    opt.load_state_dict(ckpt["optimizer"])
    steps(opt, params, gradients()[3:])
    final = np.load(FINAL)
    err = max(float(np.abs(p.numpy() - final[k]).max() / np.abs(final[k]).max())
              for k, p in params.items())
    print("max rel err vs megtrace:", err)
    assert err <= 1e-6
