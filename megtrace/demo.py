"""End-to-end demo: trace a conv net, run it TVM-compiled, dump a .mge, reload it.

    python -m megtrace.demo [--out net.mge]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 16, 3, padding=1)
        self.bn = M.BatchNorm2d(16)
        self.fc = M.Linear(16 * 16 * 16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(F.flatten(x, 1))


def _median_ms(fn, repeat: int = 50) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="net.mge", help="where to write the model")
    args = parser.parse_args(argv)

    np.random.seed(0)
    net = Net()
    net.eval()

    @trace(symbolic=True, capture_as_const=True)
    def infer(data):
        return net(data)

    x = mge.tensor(np.random.rand(1, 3, 32, 32).astype("float32"))
    start = time.perf_counter()
    y = infer(x)                      # records, then compiles with TVM
    print(f"trace + TVM build: {time.perf_counter() - start:.2f} s")
    print(infer.graph)
    y = infer(x)                      # the compiled graph
    eager = net(x).numpy()
    print(f"max |compiled - eager|: {np.abs(y.numpy() - eager).max():.3e}")

    result = infer.dump(args.out, arg_names=["data"], output_names=["out"])
    print(f"dumped {args.out}: {result.nr_opr} oprs, {result.tot_bytes} bytes")
    loaded = mge.load_graph(args.out)
    print(f"reloaded: {loaded}")
    print(f"max |reloaded - eager|: {np.abs(loaded(x).numpy() - eager).max():.3e}")
    x8 = mge.tensor(np.random.rand(8, 3, 32, 32).astype("float32"))
    print(f"batch 8 from the batch-1 file, max |reloaded - eager|: "
          f"{np.abs(loaded(data=x8).numpy() - net(x8).numpy()).max():.3e}")

    fast = trace(lambda data: net(data), symbolic=True, capture_as_const=True,
                 without_host=True)
    fast(x)
    # A fresh cache stores the build in a background process; time after it is done,
    # so that the figures are the kernels' and not a shared CPU's.
    from megtrace.relay_bridge import compile_cache
    compile_cache.wait_for_stores()
    t_eager = _median_ms(lambda: net(x).numpy())
    t_replay = _median_ms(lambda: infer(x).numpy())
    t_fast = _median_ms(lambda: fast(x).numpy())
    print(f"eager (NumPy): {t_eager:.3f} ms   compiled, replaying Python: {t_replay:.3f} ms "
          f"({t_eager / t_replay:.1f}x)   compiled, without_host: {t_fast:.3f} ms "
          f"({t_eager / t_fast:.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
