"""The README's "Use" snippet runs as written (it traces, dumps, reloads, tunes and
exports), and tuning without its optional packages says how to install them."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def readme_snippet() -> str:
    """The first ```python block of README.md, unchanged."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks, "README.md has no python code block"
    return blocks[0]


@pytest.mark.slow
def test_readme_snippet_runs_as_written(tmp_path):
    (tmp_path / "snippet.py").write_text(readme_snippet())
    out = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=900, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    for made in ("net.mge", "net.so", "net.so.json", "tuning"):
        assert (tmp_path / made).exists(), made


def test_tuning_without_xgboost_says_how_to_install():
    code = ("import sys; sys.modules['xgboost'] = None\n"
            "import numpy as np, megtrace as mge\n"
            "import megtrace.functional as F\n"
            "from megtrace.jit import trace\n"
            "f = trace(lambda x: F.relu(x), symbolic=True)\n"
            "f(mge.tensor(np.ones((2, 2), 'float32')))\n"
            "try:\n"
            "    mge.tune(f, work_dir='unused', trials=64)\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=ENV)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ("tuning needs xgboost (not installed): "
                                  "pip install 'megtrace[tune]'")
