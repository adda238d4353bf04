"""Models traced once for the perf tests, and a fresh-process runner for exports."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import megtrace as mge
from megtrace.jit import trace

DEPLOY = Path(__file__).resolve().parents[2] / "relay_bridge" / "deploy.py"


def traced(net, x: np.ndarray):
    """A trace of `net` called once on `x` (symbolic, weights as constants)."""
    f = trace(lambda data: net(data), symbolic=True, capture_as_const=True)
    f(mge.tensor(x))
    return f


def run_exported_fresh(library: Path, inputs: dict, tmp: Path) -> tuple[list, list]:
    """Run an exported library in a new Python that loads deploy.py by its path (not
    the package); returns (outputs, modules of megtrace/relay_bridge it imported)."""
    feeds = tmp / "feeds.npz"
    np.savez(feeds, **inputs)
    script = textwrap.dedent(f"""
        import importlib.util, json, sys
        import numpy as np
        spec = importlib.util.spec_from_file_location("deploy", {str(DEPLOY)!r})
        deploy = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(deploy)
        model = deploy.load({str(library)!r})
        feeds = dict(np.load({str(feeds)!r}))
        outs = model(**feeds)
        np.savez({str(tmp / 'outs.npz')!r}, *outs)
        leaked = [m for m in sys.modules if m.split('.')[0] in ('megtrace', 'relay_bridge')]
        print(json.dumps(leaked))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(tmp / "outs.npz") as data:
        outs = [data[f"arr_{i}"] for i in range(len(data.files))]
    return outs, json.loads(proc.stdout.strip().splitlines()[-1])


def llvm_modules(mod) -> int:
    """How many LLVM modules `mod` and the modules it imports (recursively) hold."""
    return (mod.kind == "llvm") + sum(llvm_modules(sub) for sub in mod.imports)
