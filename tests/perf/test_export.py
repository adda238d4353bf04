"""export -> load_exported: the same numbers as compile_graph, in a fresh process that
never imports megtrace; the manifest; clear errors on bad input."""
import json

import numpy as np
import pytest
from conftest import rel_err
from models import MLP, ConvNet, randomize_bn

import megtrace as mge
from megtrace.relay_bridge import compile_graph
from megtrace.relay_bridge.export import export, load_exported

from .helpers import run_exported_fresh, traced


@pytest.mark.parametrize("make,shape", [(MLP, (4, 64)), (ConvNet, (2, 3, 32, 32))],
                         ids=["mlp", "convnet"])
def test_export_runs_in_a_fresh_process(make, shape, rng, tmp_path):
    net = randomize_bn(make(), rng).eval()
    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    f = traced(net, x)
    want = compile_graph(f.graph)(x)
    done = export(f, tmp_path / "model.so")
    assert done.library.is_file() and done.manifest.name == "model.so.json"
    outs, leaked = run_exported_fresh(done.library, {"arg_0": x}, tmp_path)
    assert leaked == []
    assert len(outs) == len(want)
    for got, ref in zip(outs, want):
        assert rel_err(got, ref) <= 1e-6


def test_manifest_and_in_process_runner(rng, tmp_path):
    net = MLP().eval()
    x = rng.standard_normal((2, 64)).astype(np.float32)
    f = traced(net, x)
    done = export(f, tmp_path / "mlp.so", num_threads=1)
    manifest = json.loads(done.manifest.read_text())
    assert manifest["format"] == "megtrace-export"
    assert manifest["inputs"] == [{"name": "arg_0", "shape": [2, 64], "dtype": "float32"}]
    assert manifest["outputs"] == [{"name": "output_0", "shape": [2, 10], "dtype": "float32"}]
    assert manifest["num_threads"] == 1 and manifest["target"]["kind"] == "llvm"
    assert manifest["megtrace_version"] and manifest["tvm_version"].startswith("0.27")
    model = load_exported(done.manifest)              # the manifest's path works too
    want = net(mge.tensor(x)).numpy()
    assert rel_err(model(x)[0], want) <= 1e-5
    assert rel_err(model.run(arg_0=x)["output_0"], want) <= 1e-5


def test_export_of_a_compiled_graph_and_a_loaded_model(rng, tmp_path):
    net = MLP().eval()
    x = rng.standard_normal((1, 64)).astype(np.float32)
    f = traced(net, x)
    compiled = compile_graph(f.graph)
    done = export(compiled, tmp_path / "c.so")
    assert rel_err(load_exported(done.library)(x)[0], compiled(x)[0]) == 0
    f.dump(tmp_path / "m.mge", arg_names=["data"], output_names=["out"])
    loaded = mge.load_graph(tmp_path / "m.mge")
    done = export(loaded, tmp_path / "l.so")
    model = load_exported(done.library)
    assert [i["name"] for i in model.inputs] == ["data"]
    assert rel_err(model(data=x)[0], loaded.run(data=x)["out"]) <= 1e-6


def test_bad_input_gives_clear_errors(rng, tmp_path):
    net = MLP().eval()
    x = rng.standard_normal((2, 64)).astype(np.float32)
    f = traced(net, x)
    with pytest.raises(TypeError, match="model"):
        export(object(), tmp_path / "m.so")
    with pytest.raises(ValueError, match="path"):
        export(f, tmp_path / "m.txt")
    with pytest.raises(ValueError, match="path"):
        export(f, tmp_path / "missing" / "m.so")
    with pytest.raises(ValueError, match="target"):
        export(f, tmp_path / "m.so", target="no-such-target")
    with pytest.raises(ValueError, match="num_threads"):
        export(f, tmp_path / "m.so", num_threads=0)
    from megtrace.jit import trace
    with pytest.raises(ValueError, match="not been called"):
        export(trace(lambda a: a), tmp_path / "m.so")
    with pytest.raises(FileNotFoundError, match="manifest"):
        load_exported(tmp_path / "nothing.so")
    model = load_exported(export(f, tmp_path / "m.so").library)
    with pytest.raises(ValueError, match="arg_0: expected shape"):
        model(x[:1])
    with pytest.raises(ValueError, match="arg_0: expected dtype"):
        model(x.astype(np.float64))
    with pytest.raises(ValueError, match="bogus: not an input"):
        model(bogus=x)
    with pytest.raises(ValueError, match="arg_0: missing input"):
        model()
    with pytest.raises(ValueError, match="takes 1 inputs"):
        model(x, x)
