"""MultiHeadAttn with masks and returned attention weights, and the params MegEngine's
CPU kernel ignores or refuses, against real MegEngine 1.13
(tests/data/make_megengine_mha_masks.py): megtrace reads MegEngine's dumps and computes
its outputs; it writes its traces as the same opr with MegEngine's params, which the real
Lite runs to MegEngine's outputs; what MegEngine's CPU kernel refuses is refused on
reading, naming the feature."""
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace import load_graph
from megtrace.errors import UnsupportedModelError
from megtrace.fbs.reader import read_model
from megtrace.fbs.to_graph import build_graph
from megtrace.fbs.writer import DumpOptions, emit_graph, serialize
from megtrace.ir import Graph, TensorType
from megtrace.jit import trace
from megtrace.ops import get

DATA = Path(__file__).resolve().parents[1] / "data" / "megengine_mha_masks"
# the make script's models: (embed, heads, bias, self-attention, graph inputs beyond
# q/k/v, forward kwargs (constants captured in the trace))
PADDING = np.array([[False, False, False, True, True], [False, False, False, False, True]])
MODELS = {
    "attn_mask_2d": (8, 2, True, False, ["attn_mask"], {}),
    "attn_mask_3d": (6, 3, False, False, ["attn_mask"], {}),
    "causal_given": (8, 4, True, True, ["attn_mask"], {"is_causal": True}),
    "key_padding": (8, 2, True, False, ["key_padding_mask"], {}),
    "key_padding_bool": (8, 2, False, False, [], {"key_padding_mask": PADDING}),
    "both_2d": (8, 2, True, False, ["attn_mask", "key_padding_mask"], {}),
    "both_3d": (6, 2, True, False, ["attn_mask", "key_padding_mask"], {}),
    "weights": (8, 2, True, False, ["attn_mask"], {"need_weights": True}),
    "weights_averaged": (6, 3, False, True, [],
                         {"need_weights": True, "average_attn_weights": True}),
}
# written by MegEngine through its builtin op only: reslink (ignored by the CPU kernel),
# a mask under attn_mask_type NO_MASK (ignored); and a module left in training mode
# (training=True, dropout rates 0)
MEGENGINE_ONLY = ["reslink", "mask_type_none", "training_mode"]


def _io(name):
    io = np.load(DATA / "io.npz")
    return {k.split(".", 1)[1]: io[k] for k in io.files if k.startswith(f"{name}.")}


def _outputs(name):
    return [n for n in ("y", "weights") if n in _io(name)]


def _mha_opr(path: Path):
    (opr,) = [o for o in read_model(path.read_bytes()).oprs if o.type == "MultiHeadAttn"]
    return opr


@pytest.mark.parametrize("name", list(MODELS) + MEGENGINE_ONLY)
def test_megengine_dump_loads_and_computes_megengines_outputs(name):
    d = _io(name)
    feeds = {k: v for k, v in d.items() if k not in ("w", "y", "weights")}
    got = load_graph(DATA / f"{name}.mge").run(**feeds)
    assert sorted(got) == sorted(_outputs(name))
    for out in got:
        assert rel_err(got[out], d[out]) <= 1e-5, out


# F.nn.multi_head_attention with projection sizes of 0 (the make script's PROJ0):
# (embed, heads, {q,k,v,o}proj_size, {q,k,v,o}bias, with a 2-d mask)
PROJ0 = {
    "proj0_qk": (4, 2, (0, 0, 6, 5), (False, False, True, True), False),
    "proj0_o": (8, 2, (8, 8, 8, 0), (True, True, True, False), True),
    "proj0_v": (4, 2, (4, 4, 0, 5), (True, False, False, True), True),
    "proj0_vo": (6, 3, (6, 6, 0, 0), (False, False, False, False), False),
}


@pytest.mark.parametrize("name", list(PROJ0))
def test_megengine_dump_without_projections_loads(name):
    d = _io(name)
    feeds = {k: v for k, v in d.items() if k not in ("w", "y")}
    got = load_graph(DATA / f"{name}.mge").run(**feeds)
    assert rel_err(got["y"], d["y"]) <= 1e-5


def _dump_proj0(name, tmp_path):
    embed, heads, sizes, biases, masked = PROJ0[name]
    d = _io(name)
    names = ["q", "k", "v"] + (["attn_mask"] if masked else [])
    kw = dict(zip(("qproj_size", "kproj_size", "vproj_size", "oproj_size"), sizes),
              **dict(zip(("qbias", "kbias", "vbias", "obias"), biases)))
    w = mge.tensor(d["w"])

    def fn(q, k, v, *mask):
        return F.nn.multi_head_attention(q, k, v, embed, heads, 0.0, 0.0, w, training=False,
                                         attn_mask=mask[0] if mask else None, **kw)[0]
    inputs = [mge.tensor(d[n]) for n in names]
    assert rel_err(fn(*inputs).numpy(), d["y"]) <= 1e-5          # eager
    f = trace(fn, symbolic=True, capture_as_const=True)
    assert rel_err(f(*inputs).numpy(), d["y"]) <= 1e-5           # compiled
    path = tmp_path / f"{name}.mge"
    f.dump(path, arg_names=names, output_names=["y"])
    return path, {n: d[n] for n in names}


@pytest.mark.parametrize("name", list(PROJ0))
def test_megtrace_writes_attention_without_projections_as_megengine(name, tmp_path):
    path, feeds = _dump_proj0(name, tmp_path)
    ours, theirs = _mha_opr(path), _mha_opr(DATA / f"{name}.mge")
    drop = ("seed",)
    assert {k: v for k, v in ours.params[0][1].items() if k not in drop} == \
        {k: v for k, v in theirs.params[0][1].items() if k not in drop}
    assert rel_err(load_graph(path).run(**feeds)["y"], _io(name)["y"]) <= 1e-5


@pytest.mark.lite
def test_lite_runs_megtraces_attention_without_projections(lite, tmp_path):
    jobs = [_dump_proj0(name, tmp_path) for name in PROJ0]
    for (path, _), got, name in zip(jobs, lite.run_models(jobs), PROJ0, strict=True):
        assert not isinstance(got, str), f"{path.name}: {got}"
        assert rel_err(got["y"], _io(name)["y"]) <= 1e-5, name


def test_megengines_fbs_v1_dump_loads():
    """The older FBS format numbers every output of every opr: MultiHeadAttn has four."""
    d = _io("weights")
    got = load_graph(DATA / "weights_fbs.mge").run(q=d["q"], k=d["k"], v=d["v"],
                                                   attn_mask=d["attn_mask"])
    for out in ("y", "weights"):
        assert rel_err(got[out], d[out]) <= 1e-5, out


@pytest.mark.lite
def test_lite_runs_megtraces_fbs_v1_dump(lite, tmp_path):
    feeds = {n: _io("weights")[n] for n in ("q", "k", "v", "attn_mask")}
    v1 = tmp_path / "weights_fbs.mge"
    m = _module("weights")
    f = trace(lambda q, k, v, a: m(q, k, v, attn_mask=a, need_weights=True), symbolic=True,
              capture_as_const=True)
    f(*[mge.tensor(feeds[n]) for n in ("q", "k", "v", "attn_mask")])
    f.dump(v1, arg_names=["q", "k", "v", "attn_mask"], output_names=["y", "weights"],
           dump_format="FBS")
    for got in (lite.run_model(v1, feeds), load_graph(v1).run(**feeds)):
        for out in ("y", "weights"):
            assert rel_err(got[out], _io("weights")[out]) <= 1e-5, out


def test_megengines_dumps_use_the_mask_input():
    """The golden files hold what they are meant to test: a fifth (mask) input of the
    MultiHeadAttn opr, with the mask type the hints ask for."""
    kinds = {name: _mha_opr(DATA / f"{name}.mge").params[0][1] for name in MODELS}
    masked = {n: f for n, f in kinds.items() if n != "weights_averaged"}
    assert all(f["tensor_combination_type"] == "ONLY_MASK" for f in masked.values())
    assert kinds["causal_given"]["attn_mask_type"] == "DEFAULT_MASK"
    assert {f["attn_mask_type"] for n, f in masked.items() if n != "causal_given"} == \
        {"USER_DEFINED_MASK"}
    assert kinds["weights"]["need_weights"] and kinds["weights_averaged"]["need_weights"]
    assert _mha_opr(DATA / "reslink.mge").params[0][1]["reslink"] is True
    assert _mha_opr(DATA / "training_mode.mge").params[0][1]["training"] is True


def _module(name):
    embed, heads, bias, *_ = MODELS[name]
    m = M.MultiHeadAttention(embed, heads, bias=bias).eval()
    m.load_state_dict({**m.state_dict(), "io_weight_bias": _io(name)["w"]})
    return m


def _dump_ours(name, tmp_path) -> tuple[Path, dict]:
    _, _, _, self_attn, extra, kwargs = MODELS[name]
    m, d = _module(name), _io(name)
    names = ["q"] + ([] if self_attn else ["k", "v"]) + extra
    consts = {k: mge.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}

    def fn(*ts):
        t = dict(zip(names, ts))
        out = m(t["q"], t.get("k", t["q"]), t.get("v", t["q"]),
                **{n: t[n] for n in extra}, **consts)
        return out if kwargs.get("need_weights") else out[0]
    f = trace(fn, symbolic=True, capture_as_const=True)
    f(*[mge.tensor(d[n]) for n in names])
    path = tmp_path / f"{name}.mge"
    f.dump(path, arg_names=names, output_names=_outputs(name))
    return path, {n: d[n] for n in names}


@pytest.mark.parametrize("name", list(MODELS))
def test_megtrace_writes_megengines_opr_with_megengines_params(name, tmp_path):
    ours, theirs = _mha_opr(_dump_ours(name, tmp_path)[0]), _mha_opr(DATA / f"{name}.mge")
    (table, fields), = ours.params
    (their_table, their_fields), = theirs.params
    assert table == their_table == "MultiHeadAttn"
    drop = ("seed",)                      # dropout's seed: the global one of each process
    assert {k: v for k, v in fields.items() if k not in drop} == \
        {k: v for k, v in their_fields.items() if k not in drop}
    assert len(ours.inputs) == len(theirs.inputs)
    assert len(ours.outputs) == len(theirs.outputs)


def test_megtrace_reads_its_own_dumps_back(tmp_path):
    for name in ("both_3d", "causal_given", "weights"):
        path, feeds = _dump_ours(name, tmp_path)
        got = load_graph(path).run(**feeds)
        for out in _outputs(name):
            assert rel_err(got[out], _io(name)[out]) <= 1e-5, (name, out)


def _causal_without_mask(tmp_path):
    """is_causal with no mask: MegEngine 1.13's CPU kernel fails; megtrace computes the
    causal attention and writes the mask as a constant (checked against masking by hand)."""
    m, d = _module("causal_given"), _io("causal_given")
    x = mge.tensor(d["q"])
    want = m(x, x, x, attn_mask=mge.tensor(d["attn_mask"]))[0].numpy()
    f = trace(lambda x: m(x, x, x, is_causal=True)[0], symbolic=True, capture_as_const=True)
    assert rel_err(f(x).numpy(), want) <= 1e-5
    path = tmp_path / "causal.mge"
    f.dump(path, arg_names=["q"], output_names=["y"])
    fields = _mha_opr(path).params[0][1]
    assert (fields["attn_mask_type"], fields["tensor_combination_type"]) == \
        ("DEFAULT_MASK", "ONLY_MASK")
    return path, {"q": d["q"]}, want


@pytest.mark.lite
def test_lite_runs_megtraces_dumps_to_megengines_outputs(lite, tmp_path):
    jobs, wants = [], []
    for name in MODELS:
        path, feeds = _dump_ours(name, tmp_path)
        jobs.append((path, feeds))
        wants.append({out: _io(name)[out] for out in _outputs(name)})
    path, feeds, want = _causal_without_mask(tmp_path)
    jobs.append((path, feeds))
    wants.append({"y": want})
    for (path, _), got, want in zip(jobs, lite.run_models(jobs), wants, strict=True):
        assert not isinstance(got, str), f"{path.name}: {got}"
        for out, w in want.items():
            assert rel_err(got[out], w) <= 1e-5, (path.name, out)


def test_causal_without_mask_reads_back(tmp_path):
    path, feeds, want = _causal_without_mask(tmp_path)
    assert rel_err(load_graph(path).run(**feeds)["y"], want) <= 1e-5


# -- what MegEngine's CPU kernel refuses -------------------------------------------------------
def _file_with(**fields) -> bytes:
    """megtrace's own MultiHeadAttn file with some params changed."""
    g = Graph()
    x = g.add_input(TensorType((2, 3, 8), "float32"), "x")
    w = g.add_const(np.zeros((1, 4 * 64 + 32), np.float32))
    p = {"num_heads": 2, **{f"{c}proj_size": 8 for c in "qkvo"},
         **{f"{c}bias": True for c in "qkvo"}, "sm_scaler": 0.5}
    (y,) = g.add_node(get("multi_head_attn"), [x, x, x, w], p)
    g.set_outputs([y], ["y"])
    em, outs = emit_graph(g, ["x"], ["y"])
    (opr,) = [o for o in em.oprs if o.type == "MultiHeadAttn"]
    params = dict(opr.params)
    params["MultiHeadAttn"] = {**params["MultiHeadAttn"], **fields}
    opr.params = list(params.items())
    return serialize(em, outs, DumpOptions())[0]


REFUSED = {
    "bias_kv": ({"tensor_combination_type": "ONLY_BIASKV"},
                r"bias_k/bias_v.*'attn_weight.shape should be \[4, 3, 4\]\(attn_add=1\), "
                r"but got \[4, 3, 3\]'"),
    "bias_kv_and_mask": ({"tensor_combination_type": "ALL",
                          "attn_mask_type": "USER_DEFINED_MASK"}, r"bias_k/bias_v"),
    "add_zero_attn": ({"add_zero_attn": True}, r"add_zero_attn=True.*attn_add=1"),
    "bias_kv_and_zero_attn": ({"tensor_combination_type": "ONLY_BIASKV", "add_zero_attn": True},
                              r"\[4, 3, 5\]\(attn_add=2\), but got \[4, 3, 3\]"),
    "default_mask_without_mask": ({"attn_mask_type": "DEFAULT_MASK"},
                                  r"is_causal without attn_mask.*dtype == i->dtype"),
    "cudnn_style_mask": ({"attn_mask_type": "CUDNN_STYLE_MASK"}, r"CUDNN_STYLE_MASK"),
    "dropout": ({"training": True, "attn_prob": 0.1}, r"dropout in training mode"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_megengines_cpu_kernel_refuses_is_refused(case):
    fields, message = REFUSED[case]
    with pytest.raises(UnsupportedModelError, match=rf"^MultiHeadAttn: .*{message}"):
        build_graph(read_model(_file_with(**fields)))


def test_refusals_quote_megengine():
    """The refusals quote what real MegEngine said to the same shapes (make script: query
    (2, 3, 8), 2 heads)."""
    said = json.loads((DATA / "refusals.json").read_text())
    for case in ("bias_kv", "add_zero_attn"):
        with pytest.raises(UnsupportedModelError) as info:
            build_graph(read_model(_file_with(**REFUSED[case][0])))
        quoted = str(info.value).split("('")[1].split("')")[0]
        assert said[case] == f"extra message: {quoted}."
    assert "dtype == i->dtype" in said["default_mask_without_mask"]


def test_a_plain_file_reads():
    build_graph(read_model(_file_with()))
