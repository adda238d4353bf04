"""Each dump/dump_graph option has a visible effect, and the files still run in Lite."""
import io
import json

import numpy as np
import pytest
from conftest import rel_err
from models import MLP

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.jit import trace
from megtrace.fbs.reader import read_model


class NewModes(M.Module):
    """Uses Elemwise modes that MegEngine rewrites for older runtimes."""

    def __init__(self):
        super().__init__()
        self.fc = M.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        return (F.relu6(y * 4) + F.hsigmoid(y) + F.softplus(y) + F.sqrt(F.abs(y))
                + F.leaky_relu(y, 0.1) + F.logsigmoid(y) + F.square(y))


def _traced(net, shape, rng):
    f = trace(lambda d: net(d), symbolic=True, capture_as_const=True)
    x = rng.uniform(-2, 2, size=shape).astype(np.float32)
    f(mge.tensor(x))
    return f, x


def _modes(path):
    return {p[0][1]["mode"] for p in (o.params for o in read_model(open(path, "rb").read()).oprs)
            if p and p[0][0] == "Elemwise"}


@pytest.mark.lite
def test_no_change_graph_controls_compat_rewrites(lite, rng, tmp_path):
    net = NewModes().eval()
    f, x = _traced(net, (2, 8), rng)
    want = net(mge.tensor(x)).numpy()
    new_modes = {"RELU6", "HSIGMOID", "SOFTPLUS", "SQRT", "PRELU", "LOGSIGMOID", "SQUARE"}
    f.dump(tmp_path / "compat.mge", arg_names=["data"], output_names=["out"],
           optimize_for_inference=False)
    f.dump(tmp_path / "asis.mge", arg_names=["data"], output_names=["out"], no_change_graph=True,
           optimize_for_inference=False)
    assert not (_modes(tmp_path / "compat.mge") & new_modes)
    assert new_modes <= _modes(tmp_path / "asis.mge")
    for name in ("compat.mge", "asis.mge"):
        assert rel_err(mge.load_graph(tmp_path / name).run(data=x)["out"], want) <= 1e-5
        assert rel_err(lite.run_model(tmp_path / name, {"data": x})["out"], want) <= 1e-4


def test_strip_info_file_and_append_json(rng, tmp_path):
    f, _ = _traced(NewModes().eval(), (1, 8), rng)
    info = tmp_path / "strip.json"
    f.dump(tmp_path / "a.mge", strip_info_file=str(info))
    first = json.loads(info.read_text())
    assert set(first) == {"dtypes", "elemwise_modes", "opr_types", "hash"}
    assert first["hash"] == 0 and first["dtypes"] == ["Float32"]
    assert "SQRT" in first["elemwise_modes"]          # reported before the compat rewrite
    assert {"MatrixMul", "Host2DeviceCopy", "ImmutableTensor", "Elemwise"} <= set(first["opr_types"])
    g, _ = _traced(M.Sequential(M.Conv2d(3, 4, 3), M.ReLU()).eval(), (1, 3, 8, 8), rng)
    g.dump(tmp_path / "b.mge", strip_info_file=str(info), append_json=True)
    merged = json.loads(info.read_text())
    assert "ConvolutionForward" in merged["opr_types"] and "MatrixMul" in merged["opr_types"]
    g.dump(tmp_path / "c.mge", strip_info_file=str(info))     # no append: rewritten
    assert "MatrixMul" not in json.loads(info.read_text())["opr_types"]


def test_keep_opr_priority_and_model_version(rng, tmp_path):
    import megtrace.fbs.generated.Model as Model
    f, _ = _traced(MLP().eval(), (1, 64), rng)
    f.dump(tmp_path / "p.mge", keep_opr_priority=True, model_version=3)
    buf = (tmp_path / "p.mge").read_bytes()
    model = Model.Model.GetRootAs(buf, 4)
    assert model.ModelVersion() == 3
    prios = {model.Oprs(i).Type().decode(): model.Oprs(i).Priority()
             for i in range(model.OprsLength())}
    assert prios["Host2DeviceCopy"] == -2147483648 and prios["MatrixMulV2"] > 0
    f.dump(tmp_path / "q.mge")
    model = Model.Model.GetRootAs((tmp_path / "q.mge").read_bytes(), 4)
    assert all(model.Oprs(i).Priority() == 0 for i in range(model.OprsLength()))


def test_keep_param_name_has_no_effect_on_trace_dumps(rng, tmp_path):
    f, _ = _traced(MLP().eval(), (1, 64), rng)
    a = f.dump(tmp_path / "a.mge", keep_param_name=True)
    b = f.dump(tmp_path / "b.mge")
    assert a.params == [] and (tmp_path / "a.mge").read_bytes() == (tmp_path / "b.mge").read_bytes()


def test_dump_graph_api_and_load_result_unpacking(rng, tmp_path):
    net = MLP().eval()
    f, x = _traced(net, (1, 64), rng)
    data, result = mge.dump_graph({"logits": f.output_vars[0]})
    assert isinstance(result, mge.CompGraphDumpResult)
    assert result.outputs == ["logits"] and result.inputs == ["arg_0"]
    assert result.tot_bytes == len(data)
    graph, outputs_dict, outputs_list, metadata = mge.load_graph(io.BytesIO(data))
    assert list(outputs_dict) == ["logits"] and outputs_list[0].shape == (1, 10)
    assert not metadata.is_valid                      # dump_graph without metadata
    assert rel_err(graph.run(arg_0=x)["logits"], net(mge.tensor(x)).numpy()) <= 1e-5
    again, _ = mge.dump_graph(outputs_list)           # a loaded model dumps again
    assert mge.load_graph(io.BytesIO(again)).output_names == ["logits"]
    with pytest.raises(KeyError):
        mge.dump_graph(outputs_list, dump_format="ONNX")
    with pytest.raises(ValueError, match="8.14"):
        mge.dump_graph(outputs_list, compat_older_version="8.14")


def test_dict_outputs_are_named_by_their_keys(rng, tmp_path):
    net = MLP().eval()
    f = trace(lambda d: {"logits": net(d), "probs": F.softmax(net(d), axis=-1)},
              symbolic=True, capture_as_const=True)
    f(mge.tensor(rng.uniform(size=(1, 64)).astype(np.float32)))
    result = f.dump(tmp_path / "d.mge")
    assert result.outputs == ["logits", "probs"]
    with pytest.raises(TypeError, match="dict"):
        f.dump(tmp_path / "e.mge", output_names=["a", "b"])
