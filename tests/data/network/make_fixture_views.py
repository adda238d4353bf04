"""What real MegEngine 1.13's Network shows of the MegEngine-made fixtures in
tests/data/megengine-1.13 (operator types, Elemwise modes, operator and var names, input
and output names); tests/test_network.py compares megtrace's Network with it.

    cd <repo> && /work/shared/megref/mpy tests/data/network/make_fixture_views.py
"""
import json
import os

from megengine.utils.network import Network

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "megengine-1.13")
FILES = ["convnet_plain.mge", "convnet_opt.mge", "convnet_fuse.mge", "convnet_fbs1.mge",
         "mlp_plain.mge", "mlp_opt.mge", "mlp_fuse.mge", "mobilenetv2_fuse.mge"]


def view(net: Network) -> dict:
    return {"oprs": [[o.type, o.params.get("mode") if o.type == "Elemwise" else None]
                     for o in net.all_oprs],
            "opr_names": [o.name for o in net.all_oprs],
            "var_names": [v.name for v in net.all_vars],
            "inputs": [v.name for v in net.input_vars],
            "outputs": [v.name for v in net.output_vars],
            "n_params": net.params_filter.as_count()}


def main():
    out = {name: view(Network.load(os.path.join(FIXTURES, name))) for name in FILES}
    with open(os.path.join(HERE, "fixture_views.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
