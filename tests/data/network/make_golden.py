"""Golden data for tests/test_network.py from the real MegEngine 1.13 (megref chroot):

    cd <repo> && /work/shared/megref/mpy tests/data/network/make_golden.py

Writes, beside this script:
- model.mge: a small conv model dumped by real MegEngine (keep_opr_name, keep_var_name=2,
  no optimize_for_inference), the model the tests edit;
- golden.json: what real `Network` shows of it (operator types, Elemwise modes, counts,
  names) and, for each edit the tests repeat, the edited model's outputs on fixed inputs
  as real MegEngine computes them (GraphInference of the dump real Network writes).
"""
import io
import json
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
import megengine.utils.network_node as N
from megengine.jit import trace
import megengine.core.tensor.megbrain_graph as G
import megengine.utils.comp_graph_tools as cgtools
from megengine.utils.comp_graph_tools import GraphInference
from megengine.utils.network import Network

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(M.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = M.Conv2d(3, 4, 3, padding=1)
        self.conv2 = M.Conv2d(4, 4, 3)

    def forward(self, data, scale):
        x = F.relu(self.conv1(data))
        x = self.conv2(x) * scale
        return x.mean(axis=[2, 3]), F.exp(x)


def make_model() -> bytes:
    rng = np.random.RandomState(0)
    net = Net()
    for p in net.parameters():
        p[...] = rng.uniform(-0.5, 0.5, p.shape).astype("float32")
    net.eval()

    @trace(symbolic=True, capture_as_const=True)
    def fwd(data, scale):
        return net(data, scale)

    fwd(mge.tensor(np.zeros((2, 3, 6, 6), "float32")), mge.tensor(np.ones((1,), "float32")))
    f = io.BytesIO()
    fwd.dump(f, arg_names=["data", "scale"], output_names=["pooled", "act"],
             keep_opr_name=True, keep_var_name=2, optimize_for_inference=False)
    return f.getvalue()


def load(data: bytes) -> Network:
    return Network.load(io.BytesIO(data))


def run(net: Network, inputs: dict) -> dict:
    f = io.BytesIO()
    net.dump(f, optimize_for_inference=False)
    f.seek(0)
    out = GraphInference(f).run(inp_dict=inputs)
    return {k: np.asarray(v).tolist() for k, v in out.items()}


def main():
    model = make_model()
    with open(os.path.join(HERE, "model.mge"), "wb") as f:
        f.write(model)
    rng = np.random.RandomState(1)
    data = rng.uniform(-1, 1, (2, 3, 6, 6)).astype("float32")
    scale = np.array([1.5], "float32")
    inputs = {"data": data, "scale": scale}
    golden = {"inputs": {k: v.tolist() for k, v in inputs.items()}}

    net = load(model)
    golden["view"] = {
        "oprs": [[o.type, o.params.get("mode") if o.type == "Elemwise" else None]
                 for o in net.all_oprs],
        "input_names": [v.name for v in net.input_vars],
        "output_names": [v.name for v in net.output_vars],
        "n_params": net.params_filter.as_count(),
        "n_conv": net.opr_filter.type(N.ConvolutionForward).as_count(),
        "n_elemwise": net.opr_filter.type(N.Elemwise).as_count(),
        "n_reduce": net.opr_filter.type(N.Reduce).as_count(),
        "data_readers": [o.type for o in net.opr_filter.has_input(
            net.var_filter.name("data").as_unique())],
        "param_shapes": sorted(list(o.shape) for o in net.params_filter),
        "opr_names": [o.name for o in net.all_oprs],
        "var_names": [v.name for v in net.all_vars],
    }
    golden["unchanged"] = run(net, inputs)

    # 1. an Elemwise after the first conv (the RELU) becomes SIGMOID (replace_vars)
    net = load(model)
    relu = [o for o in net.all_oprs if o.type == "Elemwise" and o.params["mode"] == "RELU"][0]
    x = relu.inputs[0]
    net.replace_vars({relu.outputs[0]: F.sigmoid(x)})
    golden["relu_to_sigmoid"] = run(net, inputs)

    # 2. the scale input replaced by a constant (make_const + replace_vars)
    net = load(model)
    net.replace_vars({net.var_filter.name("scale").as_unique(): net.make_const(
        np.array([-2.0], "float32"), name="fixed_scale")})
    golden["const_scale"] = run(net, {"data": data})
    golden["const_scale_inputs"] = [v.name for v in load_dump_inputs(net)]

    # 3. outputs: drop "act", add max(pooled) + data.sum() as a new output
    net = load(model)
    act = net.var_filter.name("act").as_unique()
    pooled = net.var_filter.name("pooled").as_unique()
    net.remove_output(act)
    extra = F.max(pooled, axis=1) + F.sum(net.var_filter.name("data").as_unique())
    extra.name = "extra"
    net.add_output(extra)
    golden["outputs_edited"] = run(net, inputs)

    # 4. reset_batch_size(1) and a renamed input (modify_opr_names)
    net = load(model)
    net.reset_batch_size(1, blacklist=["scale"])
    net.modify_opr_names("m")
    f = io.BytesIO()
    net.dump(f, optimize_for_inference=False)
    f.seek(0)
    again = Network.load(f)
    golden["batch1"] = {
        "input_names": sorted(v.name for v in again.input_vars),
        "data_shape": list(again.data_providers_filter.name("m.data").as_unique().shape),
        "act_shape": list(again.var_filter.name("act").as_unique().shape),
    }
    g = GraphInference(io.BytesIO(f.getvalue()))
    golden["batch1"]["outputs"] = {k: np.asarray(v).tolist() for k, v in g.run(
        inp_dict={"m.data": data[:1], "m.scale": scale}).items()}

    # 5. a parameter changed in place (set_value on the first conv's bias)
    net = load(model)
    conv = net.opr_filter.type(N.ConvolutionForward).as_list()[0]
    weight = conv.inputs[1].owner
    weight.set_value(weight.numpy() * 0.5)
    golden["half_weight"] = run(net, inputs)

    # outspec: only the subgraph ending at these vars
    part = Network.load(io.BytesIO(model), outspec=["RELU", "pooled"])
    golden["outspec"] = {"oprs": [o.type for o in part.all_oprs],
                         "outputs": [v.name for v in part.output_vars],
                         "inputs": [v.name for v in part.input_vars]}

    # FLOPs of the operators (module_stats.get_op_stats on the Network's nodes)
    from megengine.utils.module_stats import get_op_stats
    net = load(model)
    golden["flops"] = [[o.type, float(get_op_stats(o, o.inputs, o.outputs)["flops_num"])]
                       for o in net.all_oprs
                       if get_op_stats(o, o.inputs, o.outputs) is not None and
                       "flops_num" in get_op_stats(o, o.inputs, o.outputs)]

    # comp_graph_tools on the loaded model's output vars
    outs = G.load_graph(io.BytesIO(model)).output_vars_list
    golden["cgtools"] = {
        "seq": [cgtools.get_opr_type(o) for o in cgtools.get_oprs_seq(outs)],
        "seq_all": [cgtools.get_opr_type(o) for o in cgtools.get_oprs_seq(outs, False, False)],
        "params": len(cgtools.get_dep_vars(outs, "ImmutableTensor")),
        "dep_types": [cgtools.get_owner_opr_type(v) for v in cgtools.get_dep_vars(outs)],
        "first_inputs": [cgtools.get_owner_opr_type(v)
                         for v in cgtools.get_owner_opr_inputs(outs[1])],
    }

    with open(os.path.join(HERE, "golden.json"), "w") as f:
        json.dump(golden, f)
    print(json.dumps(golden["view"], indent=1))


def load_dump_inputs(net):
    f = io.BytesIO()
    net.dump(f, optimize_for_inference=False)
    f.seek(0)
    return Network.load(f).input_vars


if __name__ == "__main__":
    main()
