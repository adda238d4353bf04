"""megtrace.utils.network (MegEngine's Network) against the real MegEngine 1.13.

tests/data/network/model.mge is a model real MegEngine dumped; golden.json holds what real
`Network` shows of it and the outputs of each edited model as real MegEngine computes
them (tests/data/network/make_golden.py). The same edits made with megtrace's Network are
dumped and run by megtrace (GraphInference) and by the real MegEngine Lite.
"""
import io
import json
from pathlib import Path

import numpy as np
import pytest

import megtrace.functional as F
from megtrace.errors import TraceError
import megtrace.utils.network_node as N
from megtrace.utils.comp_graph_tools import GraphInference
from megtrace.utils.network import Network

DATA = Path(__file__).parent / "data" / "network"
GOLDEN = json.loads((DATA / "golden.json").read_text())
INPUTS = {k: np.asarray(v, "float32") for k, v in GOLDEN["inputs"].items()}


def load() -> Network:
    return Network.load(str(DATA / "model.mge"))


def dumped(net: Network, **kwargs) -> bytes:
    f = io.BytesIO()
    net.dump(f, optimize_for_inference=False, **kwargs)
    return f.getvalue()


def check(data: bytes, inputs: dict, golden: dict, lite, tmp_path, tol=1e-5) -> None:
    """The dump computes golden's outputs in megtrace and in MegEngine Lite."""
    ours = GraphInference(io.BytesIO(data)).run(inp_dict=inputs)
    path = tmp_path / "edited.mge"
    path.write_bytes(data)
    theirs = lite.run_model(path, inputs)
    assert sorted(ours) == sorted(golden) == sorted(theirs)
    for name, want in golden.items():
        np.testing.assert_allclose(ours[name], want, rtol=tol, atol=tol)
        np.testing.assert_allclose(theirs[name], want, rtol=tol, atol=tol)


def test_view_matches_megengine():
    net = load()
    view = GOLDEN["view"]
    got = [[o.type, o.params.get("mode") if o.type == "Elemwise" else None]
           for o in net.all_oprs]
    assert got == view["oprs"]
    assert [v.name for v in net.input_vars] == view["input_names"]
    assert [v.name for v in net.output_vars] == view["output_names"]
    assert net.params_filter.as_count() == view["n_params"]
    assert net.opr_filter.type(N.ConvolutionForward).as_count() == view["n_conv"]
    assert net.opr_filter.type(N.Elemwise).as_count() == view["n_elemwise"]
    assert net.opr_filter.type(N.Reduce).as_count() == view["n_reduce"]
    data = net.var_filter.name("data").as_unique()
    assert [o.type for o in net.opr_filter.has_input(data)] == view["data_readers"]
    assert sorted(list(o.shape) for o in net.params_filter) == view["param_shapes"]
    assert [o.name for o in net.all_oprs] == view["opr_names"]
    assert [v.name for v in net.all_vars] == view["var_names"]


def test_unchanged_roundtrip(lite, tmp_path):
    check(dumped(load()), INPUTS, GOLDEN["unchanged"], lite, tmp_path)


def test_replace_vars_with_new_op(lite, tmp_path):
    net = load()
    relu = [o for o in net.all_oprs if o.type == "Elemwise" and o.params["mode"] == "RELU"][0]
    net.replace_vars({relu.outputs[0]: F.sigmoid(relu.inputs[0])})
    assert "RELU" not in [o.params.get("mode") for o in net.all_oprs]
    check(dumped(net), INPUTS, GOLDEN["relu_to_sigmoid"], lite, tmp_path)


def test_input_replaced_by_const(lite, tmp_path):
    net = load()
    net.replace_vars({net.var_filter.name("scale").as_unique():
                      net.make_const(np.array([-2.0], "float32"), name="fixed_scale")})
    data = dumped(net)
    assert [v.name for v in Network.load(io.BytesIO(data)).input_vars] == \
        GOLDEN["const_scale_inputs"]
    check(data, {"data": INPUTS["data"]}, GOLDEN["const_scale"], lite, tmp_path)


def test_remove_and_add_outputs(lite, tmp_path):
    net = load()
    net.remove_output(net.var_filter.name("act").as_unique())
    pooled = net.var_filter.name("pooled").as_unique()
    extra = F.max(pooled, axis=1) + F.sum(net.var_filter.name("data").as_unique())
    extra.name = "extra"
    net.add_output(extra)
    assert [v.name for v in net.output_vars] == ["pooled", "extra"]
    check(dumped(net), INPUTS, GOLDEN["outputs_edited"], lite, tmp_path)


def test_reset_batch_size_and_rename(lite, tmp_path):
    net = load()
    net.reset_batch_size(1, blacklist=["scale"])
    assert net.var_filter.name("act").as_unique().shape == (1, 4, 4, 4)
    net.modify_opr_names("m")
    data = dumped(net)
    again = Network.load(io.BytesIO(data))
    want = GOLDEN["batch1"]
    assert sorted(v.name for v in again.input_vars) == want["input_names"]
    assert list(again.data_providers_filter.name("m.data").as_unique().shape) == \
        want["data_shape"]
    assert list(again.var_filter.name("act").as_unique().shape) == want["act_shape"]
    inputs = {"m.data": INPUTS["data"][:1], "m.scale": INPUTS["scale"]}
    check(data, inputs, want["outputs"], lite, tmp_path)


def test_param_set_value(lite, tmp_path):
    net = load()
    conv = net.opr_filter.type(N.ConvolutionForward).as_list()[0]
    weight = conv.inputs[1].owner
    assert isinstance(weight, N.ImmutableTensor)
    weight.set_value(weight.numpy() * 0.5)
    check(dumped(net), INPUTS, GOLDEN["half_weight"], lite, tmp_path)


def test_batch_mismatch_and_unknown_blacklist_are_refused():
    with pytest.raises(AssertionError, match="batchsize mismatch"):
        load().reset_batch_size(1)
    with pytest.raises(AssertionError, match="unused items in blacklist"):
        load().reset_batch_size(1, blacklist=["scale", "nothing"])


def test_dump_refuses_two_inputs_of_one_name():
    net = load()
    other = net.make_input_node((2, 3, 6, 6), "float32", name="data")
    out = net.output_vars[1] + F.sum(other)
    out.name = "o"
    net.add_output(out)
    with pytest.raises(ValueError, match="two inputs are named 'data'"):
        dumped(net)


def test_shape_change_that_does_not_fit_is_a_shape_error():
    from megtrace.errors import ShapeError
    net = load()
    wrong = net.make_input_node((2, 5, 6, 6), "float32", name="data2")
    with pytest.raises(ShapeError, match="no longer fit"):
        net.replace_vars({net.var_filter.name("data").as_unique(): wrong})


def test_metadata_and_filters():
    net = load()
    meta = net.metadata
    assert meta["graph_modified"] is False and meta["optimized_for_inference"] is False
    again = Network.load(io.BytesIO(dumped(net, user_info={"k": [1, 2]})))
    assert again.metadata == {"user_info": {"k": [1, 2]}, "graph_modified": True,
                              "optimized_for_inference": False}
    assert Network.load(io.BytesIO(dumped(net, enable_metadata=False))).metadata is None
    assert net.opr_filter.name("CONV1.*").as_count() == 4
    assert net.opr_filter.name("CONV1.*", ignorecase=False).as_count() == 0
    assert net.get_opr_by_type(N.Host2DeviceCopy, unique=False)[0].name == "data"
    with pytest.raises(AssertionError):
        net.get_opr_by_type(N.Host2DeviceCopy)


def test_comp_graph_tools_on_loaded_outputs():
    import megtrace.utils.comp_graph_tools as cgtools
    from megtrace import load_graph
    outs = load_graph(str(DATA / "model.mge")).output_vars_list
    want = GOLDEN["cgtools"]
    assert [cgtools.get_opr_type(o) for o in cgtools.get_oprs_seq(outs)] == want["seq"]
    assert [cgtools.get_opr_type(o) for o in cgtools.get_oprs_seq(outs, False, False)] == \
        want["seq_all"]
    assert len(cgtools.get_dep_vars(outs, "ImmutableTensor")) == want["params"]
    assert [cgtools.get_owner_opr_type(v) for v in cgtools.get_dep_vars(outs)] == \
        want["dep_types"]
    nodes = cgtools.get_dep_vars(outs)[:2]
    assert [cgtools.get_owner_opr_type(v) for v in cgtools.get_owner_opr_inputs(nodes[1])] == \
        want["first_inputs"]


def test_comp_graph_tools_replace_vars_and_oprs():
    import megtrace.utils.comp_graph_tools as cgtools
    net = load()
    act = net.var_filter.name("act").as_unique()
    scale = net.var_filter.name("scale").as_unique()
    (new,) = cgtools.replace_vars([act], {scale: net.make_const(np.array([0.0], "float32"))})
    assert "Host2DeviceCopy" in [o.type for o in cgtools.get_oprs_seq([new])]
    assert [o.name for o in cgtools.get_oprs_seq([new]) if o.type == "Host2DeviceCopy"] == \
        ["data"]
    assert len(cgtools.get_oprs_seq([act], False, False)) == \
        len(cgtools.get_oprs_seq([new], False, False))
    assert "scale" in [o.name for o in cgtools.get_oprs_seq([act])]      # the old graph stays
    exp = new.owner            # the copy of EXP that reads the constant
    (swapped,) = cgtools.replace_oprs([new], {exp: F.log(exp.inputs[0]).owner})
    assert swapped.owner.params["mode"] == "LOG"
    out = io.BytesIO()
    net.remove_output(*net.output_vars)
    swapped.name = "o"
    net.add_output(swapped)
    net.dump(out, optimize_for_inference=False)
    got = GraphInference(io.BytesIO(out.getvalue())).run(inp_dict={"data": INPUTS["data"]})
    assert got["o"].shape == (2, 4, 4, 4) and np.all(got["o"] == -np.inf)  # log(x * 0)


def test_flops_of_nodes_match_megengine():
    from megtrace.utils.module_stats import get_op_stats
    net = load()
    got = [[o.type, float(get_op_stats(o, o.inputs, o.outputs)["flops_num"])]
           for o in net.all_oprs if get_op_stats(o, o.inputs, o.outputs) is not None]
    assert got == GOLDEN["flops"]


# Oprs of flatten's shape arithmetic (GetVarShape -> Subtensor -> Concat, with their two
# constants) that megtrace folds into the Reshape's target shape when it loads a model.
SHAPE_ARITHMETIC = [["GetVarShape", None], ["ImmutableTensor", None], ["Subtensor", None],
                    ["ImmutableTensor", None], ["Concat", None]]
SHAPE_VAR_NAMES = {"GetVarShape", "Subtensor", "Concat", "const<0>[24]", "const<-1>[26]"}


def _without_shape_arithmetic(oprs: list) -> list:
    n = len(SHAPE_ARITHMETIC)
    for i in range(len(oprs) - n + 1):
        if oprs[i:i + n] == SHAPE_ARITHMETIC:
            return oprs[:i] + oprs[i + n:]
    return oprs


@pytest.mark.parametrize("name", sorted(json.loads((DATA / "fixture_views.json").read_text())))
def test_view_of_megengine_fixtures(name, fixtures_dir):
    """megtrace's Network shows MegEngine-made models as real MegEngine's does, except
    for the folded shape arithmetic (README: Not yet)."""
    want = json.loads((DATA / "fixture_views.json").read_text())[name]
    net = Network.load(str(fixtures_dir / name))
    got = [[o.type, o.params.get("mode") if o.type == "Elemwise" else None]
           for o in net.all_oprs]
    folded = _without_shape_arithmetic(want["oprs"]) != want["oprs"]
    assert got == _without_shape_arithmetic(want["oprs"])
    assert [v.name for v in net.input_vars] == want["inputs"]
    assert [v.name for v in net.output_vars] == want["outputs"]
    assert net.params_filter.as_count() == want["n_params"] - (2 if folded else 0)
    if name.endswith("_fbs1.mge"):
        return              # megtrace's FBS (V1) reader keeps no var names
    assert [v.name for v in net.all_vars] == \
        [n for n in want["var_names"] if n not in SHAPE_VAR_NAMES]


def test_load_with_outspec():
    part = Network.load(str(DATA / "model.mge"), outspec=["RELU", "pooled"])
    want = GOLDEN["outspec"]
    assert [o.type for o in part.all_oprs] == want["oprs"]
    assert [v.name for v in part.output_vars] == want["outputs"]
    assert [v.name for v in part.input_vars] == want["inputs"]
    with pytest.raises(AssertionError, match="Can not find"):
        Network.load(str(DATA / "model.mge"), outspec=["nothing"])


def test_dump_optimized_for_inference_runs_in_lite(lite, tmp_path):
    net = load()
    f = io.BytesIO()
    net.dump(f)                       # optimize_for_inference=True, MegEngine's default
    data = f.getvalue()
    again = Network.load(io.BytesIO(data))
    assert again.metadata["optimized_for_inference"] is True
    assert "FUSE_ADD_RELU" in [o.params.get("mode") for o in again.all_oprs]
    check(data, INPUTS, GOLDEN["unchanged"], lite, tmp_path, tol=1e-4)


def test_as_oprnode_and_as_varnode():
    from megtrace.utils.network import as_oprnode, as_varnode
    net = load()
    act = net.var_filter.name("act").as_unique()
    assert as_oprnode(act) is act.owner and as_oprnode([act.owner]) is act.owner
    assert as_varnode(act.owner) is act and as_varnode([act]) is act
    with pytest.raises(AssertionError):
        as_varnode(net.output_vars)


def test_clear_errors():
    from megtrace import Tensor
    from megtrace.errors import FormatError, TraceError
    from megtrace.jit import trace
    net = load()
    data = net.var_filter.name("data").as_unique()
    with pytest.raises(TraceError, match="has no value"):
        data.numpy()
    assert np.array_equal(net.params_filter.as_list()[0].outputs[0].numpy(),
                          net.params_filter.as_list()[0].numpy())    # constants have one

    @trace(symbolic=True)
    def mixed(x):
        return x + data

    with pytest.raises(TraceError, match="tensor of another trace"):
        mixed(Tensor(np.zeros((2, 3, 6, 6), "float32")))
    with pytest.raises(FormatError):
        Network.load(io.BytesIO(b"not a model at all"))
    with pytest.raises(ValueError, match="unknown options"):
        net.dump(io.BytesIO(), enable_nchw1000=True)


def test_find_vars_by_name_and_embed_inputs(lite, tmp_path):
    import megtrace.utils.comp_graph_tools as cgtools
    net = load()
    relu, data = cgtools.find_vars_by_name(net.output_vars, ["RELU", "data"])
    assert relu.owner.params["mode"] == "RELU" and data.owner.type == "Host2DeviceCopy"
    with pytest.raises(AssertionError, match="Can not find varnode"):
        cgtools.find_vars_by_name(net.output_vars, ["nothing"])
    inputs = cgtools.get_dep_vars(net.output_vars, "Host2DeviceCopy")
    new, embedded = cgtools.embed_inputs(net.output_vars, [INPUTS[v.name] for v in inputs])
    assert sorted(embedded) == ["data", "scale"]
    assert [v.name for v in new] == ["pooled", "act"]
    net.remove_output(*net.output_vars)
    net.add_output(*new)
    assert net.input_vars == []
    check(dumped(net), {}, GOLDEN["unchanged"], lite, tmp_path)


@pytest.mark.parametrize("name", ["convnet_plain", "convnet_fuse", "mlp_opt"])
def test_reset_batch_size_refolds_flatten(name, fixtures_dir, lite, tmp_path):
    """A model dumped at batch 1 whose flatten megtrace folded to Reshape(1, -1) runs at
    batch 8 after reset_batch_size, with real MegEngine's batch-8 outputs, in megtrace and
    in MegEngine Lite."""
    net = Network.load(str(fixtures_dir / f"{name}.mge"))
    net.reset_batch_size(8)
    assert all(o.outputs[0].shape[0] == 8 for o in net.data_providers_filter)
    assert net.output_vars[0].shape[0] == 8
    x = np.load(fixtures_dir / f"{name.split('_')[0]}_in_b8.npy")
    want = np.load(fixtures_dir / f"{name.split('_')[0]}_out_b8.npy")
    input_name = net.input_vars[0].name
    check(dumped(net), {input_name: x}, {net.output_vars[0].name: want}, lite, tmp_path,
          tol=1e-4)


def test_symbolic_shape_switch():
    from megtrace.core._trace_option import use_symbolic_shape
    from megtrace.utils.network import set_symbolic_shape
    net = load()
    act = net.var_filter.name("act").as_unique()
    old = set_symbolic_shape(True)
    try:
        assert use_symbolic_shape() is True
        shape = act.shape
        assert isinstance(shape, N.VarNode)
        assert shape.numpy().tolist() == [2, 4, 4, 4] and shape.dtype == np.int32
    finally:
        set_symbolic_shape(old)
    assert act.shape == act.partial_shape == (2, 4, 4, 4)


def test_quantized_input_survives_network_and_load():
    """A model with a qint8 input: Network keeps the input's quantized dtype, and
    load_graph takes an input of that dtype (and refuses one of another scale)."""
    import megtrace.core.tensor.dtype as qd
    from megtrace import Tensor, load_graph
    from megtrace.jit import trace
    dq = qd.qint8(0.25)

    @trace(symbolic=True, capture_as_const=True)
    def fwd(x):
        return x.astype("float32") * 2

    raw = np.array([[-8, 3], [5, 127]], np.int8)
    x = Tensor(raw.astype(dq), dtype=dq)
    fwd(x)
    f = io.BytesIO()
    fwd.dump(f, arg_names=["x"], output_names=["y"], optimize_for_inference=False)
    net = Network.load(io.BytesIO(f.getvalue()))
    (inp,) = net.input_vars
    assert inp.dtype.metadata["mgb_dtype"]["name"] == "QuantizedS8"
    model = load_graph(io.BytesIO(dumped(net)))
    out = model.run(x=raw.astype(dq))["y"]
    np.testing.assert_allclose(out, raw.astype(np.float32) * 0.25 * 2)
    with pytest.raises(ValueError, match="expected dtype"):
        model.run(x=raw.astype(qd.qint8(0.5)))


def test_varnode_values_from_constants_as_megengine_infers_them():
    """A VarNode whose value follows from constants has it (MegEngine's static value
    inference: MegEngine's test_tensor builds ops on Network constants and reads them);
    `VarNode(x.var)` is x's node; make_const keeps its device."""
    net = Network()
    x = net.make_const(np.arange(6, dtype="float32"), device="cpu0")
    y = F.reshape(x, (2, 3)) * 2 + 1
    np.testing.assert_array_equal(y.numpy(), np.arange(6, dtype="float32").reshape(2, 3) * 2 + 1)
    assert N.VarNode(x.var) is x and str(x.device).startswith("cpu0")
    n = net.make_const(9)
    np.testing.assert_array_equal(F.linspace(N.VarNode(n.var), 9, n).numpy(),
                                  np.linspace(9, 9, 9, dtype="float32"))
    z = net.make_input_node((2, 3), "float32", name="data") + y
    with pytest.raises(TraceError, match="depends on its inputs"):
        z.numpy()


def test_ellipsis_on_a_value_shaped_varnode_is_refused_as_megengine_does():
    """After CondTake a Network value has no static shape, so Ellipsis cannot be expanded
    (MegEngine's IndexErrors, word for word); plain tensors are unaffected."""
    net = Network()
    a = net.make_const(np.arange(9, dtype="float32").reshape(3, 3))
    picked = a[a > 4]
    assert picked.shape_unknown and not a.shape_unknown
    with pytest.raises(IndexError, match="^does not support Ellipsis when tensor's ndim is unknown.$"):
        picked[...]
    mask = a > 4
    with pytest.raises(IndexError, match="^does not support bool index with unknown shape"):
        picked[..., mask[mask]]
    np.testing.assert_array_equal(a[..., 1].numpy(), [1, 4, 7])


def test_dumped_opr_names_are_unique_as_megengine_leaves_them():
    """`x.sum(axis=1)` writes a Reduce and an AxisAddRemove named after the one op: MegEngine's
    AutoNaming calls them `Reduce[0]`, `Reduce[1]` (a dump by MegEngine 1.13 with
    keep_opr_name=True); name filters need unique names (`as_dict` refused duplicates)."""
    import megtrace as mge
    from megtrace.jit import trace

    @trace(symbolic=True, capture_as_const=True)
    def f(a):
        return F.relu(a) + 1, a.sum(axis=1)
    a = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    r1, r2 = f(mge.tensor(a))
    buf = io.BytesIO()
    f.dump(buf, arg_names=["a"], output_names=["o1", "o2"], optimize_for_inference=False,
           keep_var_name=2, keep_opr_name=True)
    net = Network.load(io.BytesIO(buf.getvalue()))
    names = [o.name for o in net.all_oprs]
    assert len(names) == len(set(names))
    reduce_names = [o.name for o in net.all_oprs if o.type in ("Reduce", "AxisAddRemove")]
    base = reduce_names[0][:-len("[0]")]
    assert reduce_names == [f"{base}[0]", f"{base}[1]"]
    assert set(net.opr_filter.as_dict()) == set(names)
    out = GraphInference(io.BytesIO(buf.getvalue())).run(inp_dict={"a": a})
    np.testing.assert_allclose(out["o1"], np.maximum(a, 0) + 1)
    np.testing.assert_allclose(out["o2"], a.sum(1))
