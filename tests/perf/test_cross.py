"""Cross-compilation without the devices: an aarch64 library (or object files when no
cross linker is installed) and CUDA sm_80/sm_90 code compiled to PTX by nvcc."""
import json
import shutil

import numpy as np
import pytest
from models import MLP

from megtrace.relay_bridge.cross import compile_cuda, cuda_source, elf_machine, tar_machines
from megtrace.relay_bridge.executable import build_executable
from megtrace.relay_bridge.export import export
from megtrace.relay_bridge.targets import resolve

from .helpers import traced


@pytest.fixture(scope="module")
def mlp_graph():
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    return traced(MLP().eval(), x).graph


def test_aarch64_objects_without_a_linker(mlp_graph, tmp_path):
    done = export(mlp_graph, tmp_path / "mlp_a64.tar", "aarch64")
    machines = tar_machines(done.library)
    assert machines and set(machines.values()) == {"aarch64"}, machines
    manifest = json.loads(done.manifest.read_text())
    assert manifest["target"]["mtriple"] == "aarch64-linux-gnu"


def test_aarch64_shared_library(mlp_graph, tmp_path):
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        with pytest.raises(RuntimeError, match="aarch64-linux-gnu-gcc"):
            export(mlp_graph, tmp_path / "mlp_a64.so", "aarch64")
        pytest.skip("no aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu); "
                    "the .tar test covers the code generation")
    done = export(mlp_graph, tmp_path / "mlp_a64.so", "aarch64")
    assert elf_machine(done.library) == "aarch64"


@pytest.mark.parametrize("preset", ["cuda-sm80", "cuda-sm90"])
def test_cuda_compile_only(mlp_graph, preset, tmp_path):
    target = resolve(preset)
    built = build_executable(mlp_graph, target)
    src = cuda_source(built.executable)
    assert "__global__" in src and "extern \"C\"" in src
    done = export(mlp_graph, tmp_path / f"{preset}.so", preset)
    assert json.loads(done.manifest.read_text())["device"] == "cuda"
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: CUDA C generated, PTX compile not checked")
    ptx = compile_cuda(src, target, "ptx").decode()
    assert f".target {target.attrs['arch']}" in ptx and ".entry" in ptx


def test_cross_errors(tmp_path):
    with pytest.raises(ValueError, match="not an ELF"):
        (tmp_path / "x.o").write_bytes(b"hello world, not elf")
        elf_machine(tmp_path / "x.o")
    with pytest.raises(ValueError, match="fmt"):
        compile_cuda("", resolve("cuda-sm90"), "sass")
    with pytest.raises(ValueError, match="executable"):
        cuda_source(build_executable(_tiny_graph(), resolve(None), rules=False).executable)


def _tiny_graph():
    from megtrace.ir import Graph, TensorType
    from megtrace.ops import get
    g = Graph()
    x = g.add_input(TensorType((4,), "float32"), "x")
    (y,) = g.add_node(get("relu"), [x], {})
    g.set_outputs([y], ["y"])
    return g
