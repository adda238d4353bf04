"""megtrace imports without TVM or flatbuffers; they load only when needed."""
import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_import_does_not_load_tvm_or_flatbuffers():
    proc = _run("import sys; import megtrace, megtrace.functional, megtrace.module, "
                "megtrace.jit; print('tvm' in sys.modules, 'flatbuffers' in sys.modules)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_eager_works_with_tvm_unavailable():
    proc = _run("import sys; sys.modules['tvm'] = None; sys.modules['flatbuffers'] = None\n"
                "import numpy as np, megtrace as mge, megtrace.functional as F\n"
                "print(F.relu(mge.tensor([-1.0, 2.0])).numpy().tolist())")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[0.0, 2.0]"
