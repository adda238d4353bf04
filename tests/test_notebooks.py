"""Every notebook executes in a Jupyter kernel (nbclient) and shows what its cells promise:
plots as images, graphs as drawings (or tables), outputs that agree with eager execution;
the committed copy keeps its outputs so that it reads on GitHub."""
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory) -> str:
    """A kernelspec for this interpreter, so the kernel imports this checkout's megtrace."""
    spec_dir = tmp_path_factory.mktemp("jupyter") / "kernels" / "megtrace-test"
    spec_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "megtrace test", "language": "python",
            "env": {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(spec_dir.parents[1])
    yield "megtrace-test"
    if old is None:
        del os.environ["JUPYTER_PATH"]
    else:
        os.environ["JUPYTER_PATH"] = old


@pytest.fixture(scope="module")
def execute(kernel_name):
    """Executes a notebook once per test module (each run compiles several models)."""
    done: dict[Path, nbformat.NotebookNode] = {}

    def run(path: Path) -> nbformat.NotebookNode:
        if path not in done:
            nb = nbformat.read(path, as_version=4)
            NotebookClient(nb, timeout=600, kernel_name=kernel_name,
                           resources={"metadata": {"path": str(path.parent)}}).execute()
            done[path] = nb
        return done[path]
    return run


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def mime_types(cell) -> set[str]:
    return {m for out in cell.outputs for m in out.get("data", {})}


def stdout(cell) -> str:
    return "".join(out.text for out in cell.outputs if out.output_type == "stream")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_draws(path, execute):
    nb = execute(path)
    for cell in code_cells(nb):
        if "plt.show()" in cell.source:
            assert "image/png" in mime_types(cell), f"no figure from cell:\n{cell.source}"
        if cell.source.rstrip().endswith(".graph"):
            assert mime_types(cell) & {"image/svg+xml", "text/html"}, \
                f"graph cell shows no drawing or table:\n{cell.source}"
            (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
            assert result.data["text/plain"].startswith("<Graph: ")


def test_quickstart_results_agree_with_eager(execute):
    nb = execute(QUICKSTART)
    text = "".join(stdout(c) for c in code_cells(nb))
    errors = re.findall(r"max \|(?:compiled|tuned|reloaded|Lite) - eager\|: (\S+)", text)
    assert len(errors) == 4, text       # the suite prepares Lite, so its line is there
    assert re.search(r"tuning of \d+ tasks? for llvm", text), text   # the tuning summary
    assert all(float(e) < 1e-4 for e in errors), errors
    figures = sum("image/png" in mime_types(c) for c in code_cells(nb))
    assert figures >= 4    # latency, per-kernel profile, reloaded vs eager, with Lite


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_keeps_its_outputs(path):
    """GitHub shows the committed outputs: every code cell ran, in order, without errors."""
    cells = code_cells(nbformat.read(path, as_version=4))
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert not [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert sum("image/png" in mime_types(c) for c in cells) >= 1


def test_there_is_a_notebook():
    assert QUICKSTART in NOTEBOOKS
