"""Every notebook's code cells run, in order, as a script (no Jupyter needed)."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, capsys):
    nb = json.loads(path.read_text())
    code = [("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"]
    namespace: dict = {}
    for i, cell in enumerate(code):
        exec(compile(cell, f"{path.name}[{i}]", "exec"), namespace)
    assert "max |compiled - eager|" in capsys.readouterr().out


def test_there_is_a_notebook():
    assert NOTEBOOKS
