"""Golden outputs of some zoo families (tests/zoo_models) from the real MegEngine 1.13, run in
the megref chroot: `../shared/megref/mpy tests/data/make_zoo_golden.py` (from the checkout);
family names as arguments make only those.

The model files are imported with `megtrace` aliased to `megengine`, so MegEngine runs the very
code the tests run. For each family: build it (NumPy seed 0), give its BatchNorms random
running statistics, eval(), run it on a batch of 2; write zoo_golden/<name>_state.pkl
(megengine.save of its state dict) and zoo_golden/<name>_io.npz (in_<argument>, out<i>)."""
import os
import sys

import numpy as np

import megengine
import megengine.functional
import megengine.module
import megengine.module.activation

HERE = os.path.dirname(os.path.abspath(__file__))
sys.modules.update({"megtrace": megengine, "megtrace.functional": megengine.functional,
                    "megtrace.module": megengine.module,
                    "megtrace.module.activation": megengine.module.activation})
sys.path.insert(0, os.path.dirname(HERE))

from zoo_models import FAMILIES  # noqa: E402

GOLDEN = ["resnet", "shufflenet_v2", "deeplabv3plus", "bert", "dcgan_generator", "shufflenet_v1"]
OUT = os.path.join(HERE, "zoo_golden")


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in sys.argv[1:] or GOLDEN:
        build, make_inputs = FAMILIES[name]
        np.random.seed(0)
        rng = np.random.default_rng(0)
        net = build()
        for m in net.modules():
            if isinstance(m, megengine.module.BatchNorm2d):
                shape = m.running_mean.shape
                m.running_mean[...] = megengine.tensor(
                    rng.normal(size=shape).astype(np.float32) * 0.1)
                m.running_var[...] = megengine.tensor(
                    rng.uniform(0.5, 1.5, size=shape).astype(np.float32))
        net.eval()
        inputs = make_inputs(2, rng)
        out = net(*[megengine.tensor(v) for v in inputs.values()])
        outs = out if isinstance(out, (tuple, list)) else (out,)
        megengine.save(net.state_dict(), os.path.join(OUT, f"{name}_state.pkl"))
        np.savez(os.path.join(OUT, f"{name}_io.npz"),
                 **{f"in_{k}": v for k, v in inputs.items()},
                 **{f"out{i}": o.numpy() for i, o in enumerate(outs)})
        print(name, [o.shape for o in outs])


if __name__ == "__main__":
    main()
