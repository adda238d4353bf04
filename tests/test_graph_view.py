"""Graph's REPL and Jupyter display: short, never the weights, and a drawing or a table."""
import numpy as np

from megtrace import graph_view
from megtrace.ir import Graph, TensorType
from megtrace.ops.registry import get as get_op
import megtrace.ops  # noqa: F401  (registers the ops)


def _conv_relu_graph() -> Graph:
    g = Graph()
    x = g.add_input(TensorType((1, 3, 8, 8), "float32"), "data")
    w = g.add_const(np.full((4, 3, 3, 3), 0.123456, np.float32), "conv.weight")
    (y,) = g.add_node(get_op("conv2d"), [x, w], {"padding": (1, 1)}, "conv")
    (z,) = g.add_node(get_op("relu"), [y], {}, "relu")
    g.set_outputs([z], ["out"])
    return g


def test_repr_is_one_line_summary_without_weights():
    text = repr(_conv_relu_graph())
    assert text == ("<Graph: 1 input data: f32[1,3,8,8], 2 nodes (conv2d x1, relu x1), "
                    "1 constant, 1 output out: f32[1,4,8,8]>")
    assert "0.123" not in text


def test_str_is_still_the_text_ir():
    assert str(_conv_relu_graph()).startswith("graph(%data: f32[1,3,8,8]) {")


def test_dot_has_an_edge_per_non_constant_input_and_output():
    dot = graph_view.to_dot(_conv_relu_graph())
    assert dot.count("->") == 3  # data -> conv2d -> relu -> out; the weight is not drawn
    assert 'label="data\\nf32[1,3,8,8]"' in dot
    assert 'label="conv2d\\npadding=(1, 1)"' in dot  # params that differ from the defaults


def test_without_dot_jupyter_gets_an_html_table(monkeypatch):
    monkeypatch.setattr(graph_view.shutil, "which", lambda name: None)
    g = _conv_relu_graph()
    assert g._repr_svg_() is None
    table = g._repr_html_()
    assert table.count("<tr>") == 1 + 1 + 2 + 1  # header, input, two nodes, output
    assert "conv2d" in table and "0.123" not in table


def test_a_failing_dot_gives_no_drawing_and_no_exception(monkeypatch, tmp_path):
    broken = tmp_path / "dot"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setattr(graph_view.shutil, "which", lambda name: str(broken))
    assert _conv_relu_graph()._repr_svg_() is None


def test_a_loaded_model_shows_its_graph(tmp_path, monkeypatch):
    import megtrace as mge
    import megtrace.functional as F
    from megtrace.jit import trace

    infer = trace(lambda x: F.relu(x * 2.0), symbolic=True, capture_as_const=True)
    infer(mge.tensor(np.ones((2, 3), np.float32)))
    infer.dump(str(tmp_path / "m.mge"), arg_names=["data"], output_names=["out"])
    model = mge.load_graph(str(tmp_path / "m.mge"))
    assert repr(model.graph).startswith("<Graph: 1 input data: f32[2,3], ")
    monkeypatch.setattr(graph_view.shutil, "which", lambda name: None)
    assert model._repr_svg_() is None
    assert "relu" in model._repr_html_()
